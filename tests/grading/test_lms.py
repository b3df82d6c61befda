"""LMS files in the documented import formats, and late penalties that are shown, never silent."""
import csv
import datetime as dt

import pytest

from autograder import lms

UTC = dt.timezone.utc
GRADES = [
    {"student_id": "alice", "assignment": "05_self_attention", "score": 10.0, "max_score": 10.0, "status": "graded"},
    {"student_id": "bob", "assignment": "05_self_attention", "score": 6.0, "max_score": 10.0, "status": "graded"},
    {"student_id": "carol", "assignment": "05_self_attention", "score": None, "max_score": 10.0,
     "status": "could_not_grade"},
    {"student_id": "alice", "assignment": "06_scaling_dk", "score": 8.0, "max_score": 9.0, "status": "graded"},
]
MAPPING = {"alice": {"Student": "Smith, Alice", "ID": "1001", "SIS User ID": "S1", "SIS Login ID": "asmith",
                     "Section": "A", "Email address": "alice@example.edu"},
           "bob": {"Student": "Jones, Bob", "ID": "1002", "SIS User ID": "S2", "SIS Login ID": "bjones",
                   "Section": "A", "Email address": "bob@example.edu"}}


def test_canvas_import_has_the_identity_columns_points_possible_and_assignment_ids():
    rows, unmapped = lms.canvas_rows(GRADES, MAPPING, canvas_ids={"05_self_attention": 4711})
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                       "05_self_attention (4711)", "06_scaling_dk"]
    assert rows[1] == ["Points Possible", "", "", "", "", "10", "9"]
    assert rows[2] == ["Smith, Alice", "1001", "S1", "asmith", "A", "10", "8"]
    assert rows[3] == ["Jones, Bob", "1002", "S2", "bjones", "A", "6", ""]
    # carol is not in the mapping: exported under her course id, and reported.
    assert rows[4][:4] == ["carol", "", "", "carol"] and rows[4][5] == ""
    assert unmapped == ["carol"]


def test_moodle_import_identifies_users_by_the_chosen_column():
    rows, unmapped = lms.moodle_rows(GRADES, MAPPING, identifier="Email address")
    assert rows[0] == ["Email address", "05_self_attention", "06_scaling_dk"]
    assert rows[1] == ["alice@example.edu", "10", "8"]
    assert rows[2] == ["bob@example.edu", "6", ""]
    assert unmapped == ["carol"]


def test_late_penalty_per_started_day_capped_and_shown_in_its_own_columns():
    due = dt.datetime(2026, 11, 20, 23, 59, tzinfo=UTC)
    policy = lms.LatePolicy(due={"05_self_attention": due}, per_day=0.1, cap=0.3, grace_minutes=10)
    submitted = {("alice", "05_self_attention"): due + dt.timedelta(minutes=5),    # within the grace
                 ("bob", "05_self_attention"): due + dt.timedelta(hours=25)}        # 2 started days
    rows = {(r["student_id"], r["assignment"]): r for r in lms.apply_penalties(GRADES, policy, submitted)}
    assert rows[("alice", "05_self_attention")]["penalty"] == 0.0
    bob = rows[("bob", "05_self_attention")]
    assert (bob["days_late"], bob["penalty"], bob["final_score"]) == (2, pytest.approx(0.2), pytest.approx(4.8))
    assert bob["score"] == 6.0  # the raw score stays beside the penalised one
    assert rows[("alice", "06_scaling_dk")]["final_score"] == 8.0  # no due date: no penalty
    very_late = policy.penalty("05_self_attention", due + dt.timedelta(days=9))
    assert very_late == (9, 0.3)  # capped
    canvas, _ = lms.canvas_rows(list(rows.values()), MAPPING)
    assert canvas[3][5] == "4.8"


def test_times_need_a_zone_and_nbgrader_timestamps_parse():
    assert lms.parse_time("2026-11-20 17:03:01.123456 UTC") == dt.datetime(2026, 11, 20, 17, 3, 1, 123456, tzinfo=UTC)
    with pytest.raises(ValueError, match="time zone"):
        lms.parse_time("2026-11-20T23:59:00")


def test_mapping_file_must_start_with_the_course_ids(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("student_id,Student,ID,SIS User ID,SIS Login ID,Section\nalice,\"Smith, Alice\",1001,S1,asmith,A\n")
    assert lms.read_mapping(str(path))["alice"]["SIS Login ID"] == "asmith"
    bad = tmp_path / "bad.csv"
    bad.write_text("login,Student\nasmith,Alice\n")
    with pytest.raises(ValueError, match="student_id"):
        lms.read_mapping(str(bad))
    out = tmp_path / "canvas.csv"
    lms.write_csv(str(out), lms.canvas_rows(GRADES, MAPPING)[0])
    with open(out, newline="") as fh:
        assert next(csv.reader(fh))[:5] == list(lms.CANVAS_IDENTITY)


# -- the configuration, refused when wrong ---------------------------------------------------------

def _roster(tmp_path):
    (tmp_path / "roster.csv").write_text(
        "student_id,Student,ID,SIS User ID,SIS Login ID,Section,Email address\n"
        "alice,\"Smith, Alice\",1001,S1,asmith,A,alice@example.edu\n")
    return "roster.csv"


def test_settings_from_the_course_config(tmp_path):
    s = lms.Settings.load({"LMSExport": {"roster": _roster(tmp_path), "canvas_assignment_ids": {"05_self_attention": 4711},
                                         "zip_timezone": "Europe/Berlin"},
                           "LatePolicy": {"due": {"05_self_attention": "2026-11-20T23:59:00+01:00"}, "per_day": 0.25}},
                          str(tmp_path), assignments={"05_self_attention"})
    assert s.roster["alice"]["SIS Login ID"] == "asmith" and s.canvas_ids == {"05_self_attention": "4711"}
    assert s.moodle_identifier == "Email address"  # with a roster, Moodle matches users by email
    assert s.late.due["05_self_attention"] == dt.datetime(2026, 11, 20, 22, 59, tzinfo=UTC)
    assert s.late.per_day == 0.25 and s.late.cap == 0.5
    naive = dt.datetime(2026, 11, 21, 0, 30)  # a zip's zone-less time, read in Berlin: 23:30 UTC
    assert lms.aware(naive, s.zip_timezone) == dt.datetime(2026, 11, 20, 23, 30, tzinfo=UTC)
    plain = lms.Settings.load({}, str(tmp_path))
    assert (plain.roster, plain.late, plain.moodle_identifier) == ({}, None, "Username")


@pytest.mark.parametrize("sections, message", [
    ({"LatePolicy": {"due": {"05_self_attention": "2026-11-20T23:59:00"}}}, "has no time zone"),
    ({"LatePolicy": {"due": {"05_self_attention": "Friday"}}}, r"c.LatePolicy.due\['05_self_attention'\]"),
    ({"LatePolicy": {"due": {"5_self_attention": "2026-11-20T23:59:00Z"}}}, "not an assignment of this course"),
    ({"LatePolicy": {"per_day": 10}}, r"per_day = 10 is out of range"),
    ({"LatePolicy": {"cap": "half"}}, "must be a number"),
    ({"LatePolicy": {"due_date": {}}}, "has no setting due_date"),
    ({"LMSExport": {"roster": "missing.csv"}}, "does not exist"),
    ({"LMSExport": {"zip_timezone": "Mars/Olympus"}}, "unknown time zone"),
    ({"LMSExport": {"roster": "roster.csv", "moodle_identifier": "ID number"}}, "no column 'ID number'"),
    ({"LMSExport": {"canvas_assignment_ids": {"06_nope": 1}}}, "not an assignment of this course"),
])
def test_a_wrong_setting_is_refused_with_its_name(tmp_path, sections, message):
    _roster(tmp_path)
    with pytest.raises(ValueError, match=message):
        lms.Settings.load(sections, str(tmp_path), assignments={"05_self_attention"})


def test_the_command_refuses_a_wrong_config_before_grading(tmp_path):
    """Exit 2 and the setting's name, before any submission is read."""
    import grading_helpers as H
    (tmp_path / "solutions" / "05_self_attention").mkdir(parents=True)
    (tmp_path / "solutions" / "05_self_attention" / "self_attention.ipynb").write_text("{}")
    (tmp_path / "autograder").mkdir()
    (tmp_path / "autograder" / "nbgrader_config.py").write_text(
        "c = get_config()\nc.LatePolicy.due = {'05_self_attention': '2026-11-20 23:59'}\n")
    done = H.grade(tmp_path / "nowhere", tmp_path / "out", tmp_path)
    assert done.returncode == 2
    assert "c.LatePolicy.due['05_self_attention']" in done.stderr and "time zone" in done.stderr
    assert not (tmp_path / "out").exists()


# -- per-student extensions (c.LatePolicy.extensions) ------------------------------------------------

DUE5 = "2026-11-20T23:59:00+00:00"
DUE6 = "2026-11-27T23:59:00+00:00"


def _policy(extensions, **more):
    return lms.LatePolicy.from_config({"due": {"05_self_attention": DUE5, "06_scaling_dk": DUE6},
                                       "extensions": extensions, **more},
                                      {"05_self_attention", "06_scaling_dk"})


def test_an_extension_for_a_student_moves_every_due_date():
    policy = _policy({"alice": "2 days"})
    due5, due6 = lms.parse_time(DUE5), lms.parse_time(DUE6)
    assert policy.extension("alice", "05_self_attention") == dt.timedelta(days=2)
    assert policy.due_for("alice", "05_self_attention") == due5 + dt.timedelta(days=2)
    assert policy.due_for("alice", "06_scaling_dk") == due6 + dt.timedelta(days=2)
    assert policy.extension("bob", "05_self_attention") is None and policy.due_for("bob", "06_scaling_dk") == due6
    # 1 day late for bob is 1 day late; for alice it is inside her extension; 3 days is 1 past it
    assert policy.penalty("05_self_attention", due5 + dt.timedelta(days=1), "bob") == (1, 0.1)
    assert policy.penalty("05_self_attention", due5 + dt.timedelta(days=1), "alice") == (0, 0.0)
    assert policy.penalty("06_scaling_dk", due6 + dt.timedelta(days=3), "alice") == (1, 0.1)
    assert policy.describe_extension("alice", "05_self_attention") == \
        "extension of 2 days: due 2026-11-22T23:59:00+00:00"
    assert policy.describe_extension("bob", "05_self_attention") == ""


def test_an_extension_for_one_assignment_moves_that_one_only():
    policy = _policy({"alice": {"05_self_attention": "36 hours"}})
    assert policy.extension("alice", "05_self_attention") == dt.timedelta(hours=36)
    assert policy.extension("alice", "06_scaling_dk") is None
    assert policy.penalty("06_scaling_dk", lms.parse_time(DUE6) + dt.timedelta(hours=1), "alice") == (1, 0.1)


def test_the_assignments_own_extension_wins_over_the_students():
    policy = _policy({"alice": {"*": "1 day", "05_self_attention": "3 days 12 hours"}})
    assert policy.extension("alice", "05_self_attention") == dt.timedelta(days=3, hours=12)
    assert policy.extension("alice", "06_scaling_dk") == dt.timedelta(days=1)
    assert policy.describe_extension("alice", "05_self_attention").startswith("extension of 3 days 12 hours")


@pytest.mark.parametrize("text, expected", [
    ("2 days", dt.timedelta(days=2)), ("1 day", dt.timedelta(days=1)), ("36 hours", dt.timedelta(hours=36)),
    ("90 minutes", dt.timedelta(minutes=90)), ("1 day 12 hours", dt.timedelta(hours=36)),
    ("1.5 days", dt.timedelta(hours=36)), ("2d 3h", dt.timedelta(hours=51)), (" 10 Min ", dt.timedelta(minutes=10)),
])
def test_durations_are_written_in_words(text, expected):
    assert lms.parse_duration(text) == expected


def test_a_student_on_time_thanks_to_the_extension_gets_no_penalty():
    policy = _policy({"bob": "2 days"}, per_day=0.1, cap=0.5)
    late = lms.parse_time(DUE5) + dt.timedelta(hours=30)
    submitted = {("alice", "05_self_attention"): late, ("bob", "05_self_attention"): late}
    rows = {(r["student_id"], r["assignment"]): r for r in lms.apply_penalties(GRADES, policy, submitted)}
    bob, alice = rows[("bob", "05_self_attention")], rows[("alice", "05_self_attention")]
    assert (bob["days_late"], bob["penalty"], bob["final_score"], bob["extension"]) == (0, 0.0, 6.0, "2 days")
    assert (alice["days_late"], alice["penalty"], alice["final_score"], alice["extension"]) == (2, 0.2, 8.0, "")
    canvas, _ = lms.canvas_rows(list(rows.values()), MAPPING)
    assert canvas[3][5] == "6"  # the LMS gets bob's full score


@pytest.mark.parametrize("extensions, message", [
    ({"alice": "2 dayz"}, r"c.LatePolicy.extensions\['alice'\]: '2 dayz' is not a duration \(write e.g. '2 days'"),
    ({"alice": "2"}, r"c.LatePolicy.extensions\['alice'\]: '2' is not a duration"),
    ({"alice": "-1 day"}, "is not a duration"),
    ({"alice": {"05_self_attention": "3 weeks"}},
     r"c.LatePolicy.extensions\['alice'\]\['05_self_attention'\]: '3 weeks' is not a duration"),
    ({"alice": {"5_self_attention": "1 day"}},
     r"c.LatePolicy.extensions\['alice'\] names 5_self_attention, not an assignment of this course"),
    ({"alice": {"06_scaling_dk": "1 day"}}, "06_scaling_dk has no due date in c.LatePolicy.due"),
    ({"alice": {}}, r"c.LatePolicy.extensions\['alice'\] is empty"),
    (["alice"], "c.LatePolicy.extensions must be a dict"),
])
def test_a_wrong_extension_is_refused_with_its_name(tmp_path, extensions, message):
    with pytest.raises(ValueError, match=message):
        lms.Settings.load({"LatePolicy": {"due": {"05_self_attention": DUE5}, "extensions": extensions}},
                          str(tmp_path), assignments={"05_self_attention", "06_scaling_dk"})


def test_extensions_reach_grades_csv_and_problems_csv(tmp_path):
    """The export: an `extension` column in grades.csv, the moved due date in problems.csv, a line
    for a submission the extension kept on time, and one for an extension nobody in the run has."""
    import grading_helpers as H
    from autograder import export, intake
    from autograder.batch import _generate
    A, NB = "00_fixture", "fixture.ipynb"
    db = tmp_path / "template.db"
    _generate(str(H.FIXTURE), str(tmp_path / "release"), str(db), A, str(tmp_path))
    due = lms.parse_time(DUE5)
    settings = lms.Settings.load({"LatePolicy": {"due": {A: DUE5}, "extensions": {
        "alice": "2 days", "bob": {A: "1 day"}, "zed": "1 day"}}}, str(tmp_path), {A})

    class Batch:
        out, problems, export_settings = str(tmp_path / "out"), [], settings
        prepared = {A: {"template_db": str(db), "fp": "v1"}}

        def known_students(self):
            return set()

    subs, results = [], {}
    for student, hours in (("alice", 30), ("bob", 30), ("carol", 30)):
        path = tmp_path / "staged" / student / NB
        path.parent.mkdir(parents=True)
        path.write_text(student)
        subs.append(intake.Submission(student, A, files={NB: str(path)}, submitted_at=due + dt.timedelta(hours=hours),
                                      timestamp_from="timestamp.txt"))
        results[(student, A)] = {"student": student, "assignment": A, "status": "graded", "problems": [],
                                 "feedback": {}, "cells": [
                                     {"notebook": "fixture", "grade_id": "fixture_double_tests", "score": 2.0},
                                     {"notebook": "fixture", "grade_id": "fixture_rows_tests", "score": 3.0}]}
    taken = intake.IntakeResult(subs, [], {s.student_id for s in subs}, {(s.student_id, A) for s in subs})
    assert export.write_all(Batch(), taken, results, [A]) == []
    grades = {r["student_id"]: r for r in H.read_csv(tmp_path / "out" / "grades.csv")}
    assert list(grades["alice"])[-5:] == ["submitted_at", "days_late", "penalty", "final_score", "extension"]
    assert [grades["alice"][k] for k in ("days_late", "final_score", "extension")] == ["0", "5", "2 days"]
    assert [grades["bob"][k] for k in ("days_late", "final_score", "extension")] == ["1", "4.5", "1 day"]
    assert [grades["carol"][k] for k in ("days_late", "final_score", "extension")] == ["2", "4", ""]
    problems = {(r["student_id"], r["problem"]) for r in H.read_csv(tmp_path / "out" / "problems.csv")}
    assert any(s == "alice" and "within the extension of 2 days (due 2026-11-22T23:59:00+00:00): no late penalty"
               in p for s, p in problems), problems
    assert any(s == "bob" and "1 started day(s) after the due date 2026-11-21T23:59:00+00:00 "
               "(2026-11-20T23:59:00+00:00 with an extension of 1 day)" in p for s, p in problems), problems
    assert any(s == "carol" and "2 started day(s) after the due date 2026-11-20T23:59:00+00:00:" in p
               for s, p in problems), problems
    assert any(s == "zed" and "no such student is in this run" in p for s, p in problems), problems
