"""The export around the grades: LMS files with late penalties, and reruns that keep the previous
results and say whose score changed, by how much and why.

The fast tests call export.write_all on results shaped like the workers' result.json (the
template gradebook is nbgrader's own, generated from the fixture); the slow one changes a hidden
test of a graded class and regrades it with the real command.
"""
import datetime as dt
import os
import pathlib
import shutil

import nbformat
import pytest

import grading_helpers as H
from autograder import export, intake, lms, regrade
from autograder.batch import _generate

A, NB = "00_fixture", "fixture.ipynb"
UTC = dt.timezone.utc
DUE = dt.datetime(2026, 11, 20, 23, 59, tzinfo=UTC)
ROWS_WRONG = "GradingError: You summed the columns (axis 0); rows are axis 1."


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    work = tmp_path_factory.mktemp("template")
    db = work / "template.db"
    _generate(str(H.FIXTURE), str(work / "release"), str(db), A, str(work))
    return str(db)


class Batch:
    """What export.write_all reads of a batch."""

    def __init__(self, out, template, settings=None, fp="tests-v1"):
        self.out, self.problems, self.export_settings = str(out), [], settings
        self.prepared = {A: {"template_db": template, "fp": fp}}

    def known_students(self):
        return set()


def _result(root, student, double=2.0, rows=3.0, rows_message=ROWS_WRONG):
    html = root / "shards" / student / "fixture.html"
    html.parent.mkdir(parents=True, exist_ok=True)
    html.write_text(f"<p>feedback for {student}: {double + rows:g}</p>")
    cells = [{"notebook": "fixture", "grade_id": "fixture_double_tests", "score": double, "max_score": 2.0,
              "message": "" if double == 2 else "GradingError: You added the mean instead of doubling."},
             {"notebook": "fixture", "grade_id": "fixture_rows_tests", "score": rows, "max_score": 3.0,
              "message": "" if rows == 3 else rows_message}]
    return {"student": student, "assignment": A, "status": "graded", "cells": cells,
            "feedback": {"fixture": str(html)}, "problems": []}


def _submission(root, student, content="v1", **fields):
    path = root / "staged" / student / NB
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return intake.Submission(student, A, files={NB: str(path)}, **fields)


def _taken(subs):
    return intake.IntakeResult(subs, [], {s.student_id for s in subs}, {(s.student_id, A) for s in subs})


def _rows(path):
    return H.read_csv(path)


# -- LMS files and late penalties ------------------------------------------------------------------

def test_without_settings_grades_csv_keeps_its_documented_columns(tmp_path, template):
    subs = [_submission(tmp_path, "alice")]
    failures = export.write_all(Batch(tmp_path / "out", template), _taken(subs),
                                {("alice", A): _result(tmp_path, "alice")}, [A])
    assert failures == []
    out = tmp_path / "out"
    assert (out / "grades.csv").read_text().splitlines() == [
        "student_id,assignment,score,max_score,status", "alice,00_fixture,5,5,graded"]
    # Without a roster, the LMS files name students by their course id.
    assert (out / "canvas.csv").read_text().splitlines() == [
        "Student,ID,SIS User ID,SIS Login ID,Section,00_fixture",
        "Points Possible,,,,,5",
        "alice,,,alice,,5"]
    assert (out / "moodle.csv").read_text().splitlines() == ["Username,00_fixture", "alice,5"]
    assert not (out / "regrade.csv").exists() and not (out / "history").exists()  # a first run


def test_late_penalties_come_from_each_submissions_time_and_are_shown(tmp_path, template):
    (tmp_path / "roster.csv").write_text(
        "student_id,Student,ID,SIS User ID,SIS Login ID,Section,Email address\n"
        "alice,\"Smith, Alice\",1001,S1,asmith,A,alice@example.edu\n"
        "bob,\"Jones, Bob\",1002,S2,bjones,B,bob@example.edu\n")
    settings = lms.Settings.load(
        {"LMSExport": {"roster": "roster.csv", "canvas_assignment_ids": {A: 77}, "zip_timezone": "Europe/Berlin"},
         "LatePolicy": {"due": {A: DUE.isoformat()}, "per_day": 0.1, "cap": 0.3}}, str(tmp_path), {A})
    subs = [
        _submission(tmp_path, "alice", submitted_at=DUE - dt.timedelta(hours=1), timestamp_from="timestamp.txt",
                    exchange_files={"timestamp.txt": "2026-11-20 22:59:00 UTC", "submission_secret.txt": "s3cr3t"}),
        _submission(tmp_path, "bob", submitted_at=DUE + dt.timedelta(hours=25), timestamp_from="timestamp.txt"),
        # a zip's zone-less 00:30 in Berlin is 23:30 UTC on the 20th: not late
        _submission(tmp_path, "carol", submitted_at=dt.datetime(2026, 11, 21, 0, 30), timestamp_from="zip entry"),
        _submission(tmp_path, "dan"),  # no time known
    ]
    results = {(s.student_id, A): _result(tmp_path, s.student_id, rows=0.0 if s.student_id == "bob" else 3.0)
               for s in subs}
    out = tmp_path / "out"
    assert export.write_all(Batch(out, template, settings), _taken(subs), results, [A]) == []
    grades = {r["student_id"]: r for r in _rows(out / "grades.csv")}
    assert list(grades["alice"]) == ["student_id", "assignment", "score", "max_score", "status",
                                     "submitted_at", "days_late", "penalty", "final_score"]
    assert [grades["alice"][k] for k in ("score", "days_late", "penalty", "final_score")] == ["5", "0", "0", "5"]
    assert grades["alice"]["submitted_at"] == "2026-11-20T22:59:00+00:00"
    assert [grades["bob"][k] for k in ("score", "days_late", "penalty", "final_score")] == ["2", "2", "0.2", "1.6"]
    assert grades["carol"]["submitted_at"] == "2026-11-21T00:30:00+01:00" and grades["carol"]["days_late"] == "0"
    assert grades["dan"]["submitted_at"] == "" and grades["dan"]["final_score"] == "5"
    problems = {(r["student_id"], r["problem"]) for r in _rows(out / "problems.csv")}
    assert any(s == "bob" and "2 started day(s) after the due date" in p and "20% of the points" in p
               and "score 2 -> final_score 1.6" in p for s, p in problems), problems
    assert any(s == "dan" and "no submission time is known" in p for s, p in problems)
    assert any(s == "carol" and "not in the roster (roster.csv)" in p for s, p in problems)
    assert not any(s in ("alice", "carol") and "after the due date" in p for s, p in problems)
    # Canvas: the identity columns of its gradebook export, the assignment by its Canvas id, and
    # Points Possible; the score is the one after the penalty.
    canvas = (out / "canvas.csv").read_text().splitlines()
    assert canvas[:4] == ["Student,ID,SIS User ID,SIS Login ID,Section,00_fixture (77)",
                          "Points Possible,,,,,5",
                          '"Smith, Alice",1001,S1,asmith,A,5',
                          '"Jones, Bob",1002,S2,bjones,B,1.6']
    assert canvas[4] == "carol,,,carol,,5"
    moodle = (out / "moodle.csv").read_text().splitlines()
    assert moodle == ["Email address,00_fixture", "alice@example.edu,5", "bob@example.edu,1.6", "carol,5", "dan,5"]
    # nbgrader's feedback layout, so that `nbgrader release_feedback` can serve it
    assert (out / "feedback" / "alice" / A / "submission_secret.txt").read_text() == "s3cr3t"
    assert (out / "feedback" / "alice" / A / "timestamp.txt").read_text() == "2026-11-20 22:59:00 UTC"


# -- regrades ----------------------------------------------------------------------------------------

def _class(root, bob_rows=0.0, bob_message=ROWS_WRONG, bob_content="v1"):
    subs = [_submission(root, "alice"), _submission(root, "bob", content=bob_content), _submission(root, "carol")]
    results = {("alice", A): _result(root, "alice"),
               ("bob", A): _result(root, "bob", rows=bob_rows, rows_message=bob_message),
               ("carol", A): _result(root, "carol", double=0.0)}
    return _taken(subs), results


def test_a_regrade_says_whose_score_changed_by_how_much_and_why(tmp_path, template):
    out = tmp_path / "out"
    taken, results = _class(tmp_path)
    assert export.write_all(Batch(out, template, fp="tests-v1"), taken, results, [A]) == []
    before = {name: (out / name).read_bytes() for name in ("grades.csv", "grades_by_cell.csv", "problems.csv")}
    old_feedback = (out / "feedback" / "bob" / A / "fixture.html").read_text()

    # The hidden test of fixture_rows changed: bob's answer now passes (a changed catalogue).
    taken, results = _class(tmp_path, bob_rows=3.0)
    batch = Batch(out, template, fp="tests-v2")
    assert export.write_all(batch, taken, results, [A]) == []
    rows = _rows(out / "regrade.csv")
    assert list(rows[0]) == regrade.HEADER
    assert [(r["student_id"], r["old_score"], r["new_score"], r["change"], r["grade_id"], r["old_cell_score"],
             r["new_cell_score"], r["old_outcome"], r["new_outcome"], r["reason"]) for r in rows] == [
        ("bob", "2", "5", "3", "fixture_rows_tests", "0", "3", "wrong, not named", "passed", "tests changed")]
    assert rows[0]["old_message"] == ROWS_WRONG and rows[0]["new_message"] == ""
    # The previous files are kept, with the time of the run, byte for byte.
    kept = pathlib.Path(batch.history_kept)
    assert kept.parent == out / "history"
    for name, data in before.items():
        assert (kept / name).read_bytes() == data
    assert (kept / "feedback" / "bob" / A / "fixture.html").read_text() == old_feedback
    assert (kept / "results.json").is_file()
    assert _rows(out / "grades.csv")[1]["score"] == "5"

    # The same again: nothing changed, so no new history folder and an empty regrade.csv.
    batch = Batch(out, template, fp="tests-v2")
    assert export.write_all(batch, *_class(tmp_path, bob_rows=3.0), [A]) == []
    assert batch.history_kept is None and os.listdir(out / "history") == [kept.name]
    assert _rows(out / "regrade.csv") == []


@pytest.mark.parametrize("fp, content, reason", [
    ("tests-v1", "v2", regrade.SUBMISSION_CHANGED),  # bob uploaded a new notebook
    ("tests-v1", "v1", regrade.SAME_INPUTS),         # nothing changed, yet the score did
])
def test_the_reason_tells_a_new_upload_from_a_test_that_is_not_deterministic(tmp_path, template, fp, content, reason):
    out = tmp_path / "out"
    assert export.write_all(Batch(out, template), *_class(tmp_path), [A]) == []
    assert export.write_all(Batch(out, template, fp=fp), *_class(tmp_path, bob_rows=3.0, bob_content=content), [A]) == []
    assert [r["reason"] for r in _rows(out / "regrade.csv")] == [reason]


def test_a_run_from_before_the_record_is_compared_by_its_csv(tmp_path, template):
    out = tmp_path / "out"
    assert export.write_all(Batch(out, template), *_class(tmp_path), [A]) == []
    os.remove(out / regrade.RECORD)  # an output folder from an older grader
    assert export.write_all(Batch(out, template), *_class(tmp_path, bob_rows=3.0), [A]) == []
    (row,) = _rows(out / "regrade.csv")
    assert (row["student_id"], row["change"], row["reason"]) == ("bob", "3", regrade.UNRECORDED)


def test_when_the_previous_results_cannot_be_kept_nothing_is_replaced(tmp_path, template):
    out = tmp_path / "out"
    assert export.write_all(Batch(out, template), *_class(tmp_path), [A]) == []
    before = (out / "grades.csv").read_bytes()
    (out / "history").write_text("a file where the history folder should go")
    failures = export.write_all(Batch(out, template, fp="tests-v2"), *_class(tmp_path, bob_rows=3.0), [A])
    assert failures and "could not be kept" in failures[0]
    assert (out / "grades.csv").read_bytes() == before
    assert (out / "feedback" / "bob" / A / "fixture.html").exists()


# -- the real command ----------------------------------------------------------------------------------

def _strict_course(root):
    """The fixture with a stricter hidden test of `double`: it must return a NumPy array."""
    course = H.make_course(root / "course")
    path = course / "solutions" / A / NB
    nb = nbformat.read(path, as_version=4)
    cell = H.cell(nb, "fixture_double_tests")
    cell.source = cell.source.replace(
        "### END HIDDEN TESTS",
        "if not isinstance(double(_x), np.ndarray):\n"
        "    raise grading.GradingError(\"double must return a NumPy array, not a list.\")\n"
        "### END HIDDEN TESTS")
    nbformat.write(nb, path)
    return course


@pytest.mark.slow
def test_regrading_after_a_hidden_test_changed(tmp_path):
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")
    course = _strict_course(tmp_path)
    subs, out = tmp_path / "subs", tmp_path / "out"
    H.write_student(subs, "alice", A, NB, H.honest(course, A, NB))
    listy = H.honest(course, A, NB)
    H.cell(listy, "fixture_double").source = "def double(x):\n    return [2.0 * v for v in x]\n"
    H.write_student(subs, "bob", A, NB, listy)
    first = H.grade(subs, out, course, "--jobs", "2")
    assert first.returncode == 0, first.stderr[-3000:]
    assert {r["student_id"]: r["score"] for r in H.read_csv(out / "grades.csv")} == {"alice": "5", "bob": "3"}
    first_grades = (out / "grades.csv").read_bytes()

    # The instructor decides a list is fine after all: back to the fixture's own hidden test.
    shutil.copyfile(H.FIXTURE / A / NB, course / "solutions" / A / NB)
    second = H.grade(subs, out, course, "--jobs", "2", "--regrade")
    assert second.returncode == 0, second.stderr[-3000:]
    rows = H.read_csv(out / "regrade.csv")
    assert [(r["student_id"], r["old_score"], r["new_score"], r["change"], r["grade_id"], r["reason"])
            for r in rows] == [("bob", "3", "5", "2", "fixture_double_tests", "tests changed")]
    assert "must return a NumPy array" in rows[0]["old_message"] and rows[0]["new_message"] == ""
    assert "1 test cell(s) changed score" in second.stderr
    (kept,) = (out / "history").iterdir()
    assert (kept / "grades.csv").read_bytes() == first_grades
    assert {r["student_id"]: r["score"] for r in H.read_csv(out / "grades.csv")} == {"alice": "5", "bob": "5"}
