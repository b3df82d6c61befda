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
