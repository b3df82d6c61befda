"""A submission whose test cells were re-flagged in the notebook's JSON is graded, not refused
(issue 30 item 4).

Found: a student whose locked autograder-tests cells carried `solution: true` ended as
could_not_grade, nbgrader's "Inconsistent checksums" in problems.csv with "Please see the above
traceback". Now every cell with a grade_id the release knows gets the release's nbgrader metadata
and cell type back before nbgrader sees it, the tests run as released, and the instructor reads
one sentence naming the cells.
"""
import pytest

import grading_helpers as H

pytestmark = pytest.mark.slow

A, NB = "00_fixture", "fixture.ipynb"
TESTS = ("fixture_double_tests", "fixture_rows_tests")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")
    root = tmp_path_factory.mktemp("reflagged")
    course = H.make_course(root / "course")
    subs, out = root / "subs", root / "out"

    reflagged = H.honest(course, A, NB)
    for gid in TESTS:
        H.cell(reflagged, gid).metadata["nbgrader"]["solution"] = True
    H.write_student(subs, "reflagged", A, NB, reflagged)

    # the same, but double() wrong: the re-flagged tests still run and still fail it
    wrong = H.honest(course, A, NB)
    H.cell(wrong, "fixture_double").source = "def double(x):\n    return x\n"
    for gid in TESTS:
        H.cell(wrong, gid).metadata["nbgrader"].update(solution=True, locked=False, points=0)
    H.write_student(subs, "reflagged_wrong", A, NB, wrong)

    # a test cell saved as a markdown cell (its metadata says so too)
    markdown = H.honest(course, A, NB)
    tests = H.cell(markdown, "fixture_rows_tests")
    tests.cell_type = "markdown"
    del tests["outputs"], tests["execution_count"]
    tests.metadata["nbgrader"].update(cell_type="markdown", solution=True, grade=False)
    H.write_student(subs, "tests_as_markdown", A, NB, markdown)

    proc = H.grade(subs, out, course, "--jobs", "1", "--timeout", "120", "--wall", "300")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _row(out, student):
    return H.grades(out)[(student, A)]


def _said(out, student):
    said = H.problems(out, student)
    assert not any("above traceback" in p or "Inconsistent checksums" in p
                   or "could not autograde" in p for p in said), said
    return said


def test_test_cells_reflagged_as_answers_are_graded_and_the_instructor_told(graded):
    row = _row(graded, "reflagged")
    said = _said(graded, "reflagged")
    assert row["status"] == "graded", said
    assert float(row["score"]) == 5.0 and float(row["max_score"]) == 5.0, row
    assert any(p.startswith(f"{NB}: the nbgrader settings of 2 cells had been changed "
                            "('fixture_double_tests': solution; 'fixture_rows_tests': solution)")
               and "the release's were put back" in p for p in said), said
    assert len([p for p in said if "nbgrader settings" in p]) == 1, said


def test_reflagged_tests_still_run_and_score_the_honest_answer_only(graded):
    row = _row(graded, "reflagged_wrong")
    said = _said(graded, "reflagged_wrong")
    assert row["status"] == "graded", said
    assert float(row["score"]) == 3.0 and float(row["max_score"]) == 5.0, row  # rows only
    assert any("'fixture_double_tests': solution, locked, points" in p for p in said), said


def test_a_test_cell_turned_markdown_is_run_as_code_and_graded(graded):
    row = _row(graded, "tests_as_markdown")
    said = _said(graded, "tests_as_markdown")
    assert row["status"] == "graded", said
    assert float(row["score"]) == 5.0 and float(row["max_score"]) == 5.0, row
    assert any("'fixture_rows_tests' had its nbgrader settings changed" in p
               and "turned into a markdown cell" in p for p in said), said
    nb = H.graded_notebook(graded, A, "tests_as_markdown", NB)
    assert H.cell(nb, "fixture_rows_tests").cell_type == "code"
