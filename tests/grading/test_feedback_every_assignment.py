"""Every assignment gives feedback to an honest and to a wrong submission (issue 29, item 4).

Before, a hidden test that repeated a line of the visible test word for word made that line
"secret"; every page shows the visible test, so the leak scan withheld the feedback of every
student of 07, 08, 10 and 11, honest ones included ("feedback withheld because it would reveal
hidden tests"). Secret lines are now the hidden lines the release does not show (redact.secret_lines).

No new gradings: the shared real class (real_class.py) is graded once per session. Its wrong
submission on every assignment is the `idle` student (the untouched release, scored zero). Its
honest, full-marks submission on every assignment is the batch's own solution check: the
solution notebook graded in the sandbox by the same worker, redaction and leak scan as a
student's, before anyone is graded (out/.work/solution_check/<assignment>/), plus the honest
students the class has on 02 and 05.
"""
import json

import nbformat
import pytest

import grading_helpers as H
from autograder import redact
from real_class import ASSIGNMENTS, HIDDEN_A, HIDDEN_HONEST, HOSTILE_ON, IDLE, REAL_CLASS_TIMEOUT, REAL_HONEST

# The first test to ask for the shared class pays for grading it (real_class.REAL_CLASS_TIMEOUT).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(REAL_CLASS_TIMEOUT)]

WITHHELD = "feedback withheld"


def _notebooks(course, assignment):
    return sorted(p.name for p in (course / "solutions" / assignment).glob("*.ipynb"))


def _secret(course, assignment, notebook):
    return redact.secret_lines(H.solution(course, assignment, notebook), H.release(course, assignment, notebook))


def _problems(out, student, assignment):
    return [r["problem"] for r in H.read_csv(out / "problems.csv")
            if r["student_id"] == student and r["assignment"] == assignment]


def _assert_page(page, course, assignment, notebook):
    assert page.exists(), page
    text = page.read_text(encoding="utf-8")
    assert "BEGIN HIDDEN TESTS" not in text, page
    assert redact.leaks(text, _secret(course, assignment, notebook)) == [], page


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_wrong_submission_gets_its_feedback(real_class_graded, assignment):
    """The untouched release (every answer wrong) of every assignment: graded, and a page per
    notebook, none withheld."""
    out, course = real_class_graded["out"], real_class_graded["course"]
    assert real_class_graded["result"].returncode == 0, real_class_graded["result"].stderr[-2000:]
    assert real_class_graded["grades"][(IDLE, assignment)]["status"] == "graded"
    problems = _problems(out, IDLE, assignment)
    assert not [p for p in problems if WITHHELD in p], problems
    for notebook in _notebooks(course, assignment):
        _assert_page(out / "feedback" / IDLE / assignment / notebook.replace(".ipynb", ".html"),
                     course, assignment, notebook)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_an_honest_submission_gets_its_feedback(real_class_graded, assignment):
    """The solution notebook, graded in the sandbox as a student's (full marks, or the batch
    refuses): a page per notebook, none withheld."""
    out, course = real_class_graded["out"], real_class_graded["course"]
    assert real_class_graded["result"].returncode == 0, real_class_graded["result"].stderr[-2000:]
    shard = out / ".work" / "solution_check" / assignment
    result = json.loads((shard / "result.json").read_text())
    assert result["status"] == "graded", result["problems"]
    assert sum(c["score"] for c in result["cells"]) == sum(c["max_score"] for c in result["cells"]) > 0
    assert not [p for p in result["problems"] if WITHHELD in p], result["problems"]
    notebooks = _notebooks(course, assignment)
    assert sorted(result["feedback"]) == notebooks, result["problems"]
    for notebook in notebooks:
        page = shard / "feedback" / "_solution_" / assignment / notebook.replace(".ipynb", ".html")
        _assert_page(page, course, assignment, notebook)
        # what a student's page shows of a test cell: the visible part, then the placeholder
        assert "hidden tests: run by the grader, not shown" in page.read_text(encoding="utf-8")


def test_the_honest_students_of_the_class_get_their_feedback(real_class_graded):
    """The class's honest students proper (the release with the solution's answers)."""
    out, course = real_class_graded["out"], real_class_graded["course"]
    honest = [(REAL_HONEST, a) for a in HOSTILE_ON] + [(s, HIDDEN_A) for s in HIDDEN_HONEST]
    for student, assignment in sorted(set(honest)):
        row = real_class_graded["grades"][(student, assignment)]
        assert float(row["score"]) == float(row["max_score"]) > 0, (student, assignment, row)
        problems = _problems(out, student, assignment)
        assert not [p for p in problems if WITHHELD in p], (student, assignment, problems)
        for notebook in _notebooks(course, assignment):
            _assert_page(out / "feedback" / student / assignment / notebook.replace(".ipynb", ".html"),
                         course, assignment, notebook)
