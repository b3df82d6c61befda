"""Options of `python -m autograder grade` tested through nbgrader as an instructor runs them:
the whole-notebook wall limit, and --unsafe-no-sandbox (which must do what it says)."""
import pytest

import grading_helpers as H

A, NB = "00_fixture", "fixture.ipynb"


@pytest.fixture
def course(tmp_path):
    if H.sandbox_unavailable():
        pytest.fail("the grading sandbox cannot run here (make test-tools sets it up)")
    return H.make_course(tmp_path / "course")


@pytest.mark.slow
def test_the_wall_limit_stops_a_notebook_whose_cells_each_stay_under_the_cell_limit(tmp_path, course):
    """Three answer cells of 12 s each stay under a 15 s cell limit, but not under a 20 s limit
    for the whole notebook: the kernel is stopped, what ran keeps its points, the rest scores
    zero, and problems.csv says which limit it was. (sleep guarantees the minimum duration, so
    the outcome does not depend on how fast the machine is.)"""
    slow = H.honest(course, A, NB)
    H.cell(slow, "fixture_double").source += "\nimport time\ntime.sleep(12)\n"
    H.cell(slow, "fixture_rows").source += "\nimport time\ntime.sleep(12)\n"
    H.write_student(tmp_path / "subs", "sleeper", A, NB, slow)
    r = H.grade(tmp_path / "subs", tmp_path / "out", course, "--timeout", "15", "--wall", "20", "--jobs", "1")
    assert r.returncode == 0, r.stderr
    row = H.grades(tmp_path / "out")[("sleeper", A)]
    assert row["status"] == "graded"
    assert float(row["score"]) < float(row["max_score"])
    said = " ".join(H.problems(tmp_path / "out", "sleeper"))
    assert "time limit for the whole notebook" in said, said


@pytest.mark.slow
def test_unsafe_no_sandbox_grades_and_really_runs_unconfined(tmp_path, course):
    """Without the sandbox an honest student still gets full marks, and student code can write
    outside its folder: the flag is for trusted submissions only, as its name says."""
    marker = tmp_path / "written-by-student-code.txt"
    escaping = H.honest(course, A, NB)
    H.cell(escaping, "fixture_double").source += f"\nopen({str(marker)!r}, 'w').write('outside')\n"
    H.write_student(tmp_path / "subs", "alice", A, NB, H.honest(course, A, NB))
    H.write_student(tmp_path / "subs", "mallory", A, NB, escaping)
    r = H.grade(tmp_path / "subs", tmp_path / "out", course, "--unsafe-no-sandbox", "--jobs", "1")
    assert r.returncode == 0, r.stderr
    rows = H.grades(tmp_path / "out")
    assert rows[("alice", A)]["score"] == rows[("alice", A)]["max_score"]
    assert marker.read_text() == "outside"
