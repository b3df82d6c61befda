"""Scores a student cannot get without earning them (issue 17, items 1-3), on a real notebook.

Notebook 02 is graded for two honest students (graded first and last) and one student per way
of gaming the hidden tests the review found, each a category:

1. the reference, one import away: imported, loaded by file path, bound as a default argument,
   reached through the hidden-test helper;
2. IPython hooks that swallow errors: an AST transformer wrapping every statement in
   try/except, an input transformer turning every later cell into `pass`, answers that call
   `sys.displayhook` before raising (nbgrader reads an execute_result before an error as a pass);
3. tamper-guard bypasses with wrong answers: the guard's saved originals rewritten along with
   the comparisons, `tamper.verify` replaced, `ndarray.all` patched through gc.get_referents,
   answers returning an object equal to everything, a fake module for the hidden checks;
4. results of its own published by an IPython post_run_cell hook after the test cell's real ones
   (found blind): the judge takes as many records as the cell makes checks, no more.

Every hostile student's notebook holds no correct answer, so each must score 0 and every
honest one full marks. The grade comes from the grader's judge, outside the student's kernel.
The students (their code is in real_class.py) are graded in the one batch of the shared real
class.
"""
import json

import pytest

import grading_helpers as H
from real_class import COPIED_NUMBER, REAL_CLASS_TIMEOUT, FUNCTIONS, HIDDEN_A as A, HIDDEN_HONEST, HIDDEN_NB as NB, HOSTILE, VALUE_QUESTION

# The first test to ask for the shared class pays for grading it (real_class.REAL_CLASS_TIMEOUT).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(REAL_CLASS_TIMEOUT)]


@pytest.fixture(scope="module")
def graded(real_class_graded):
    assert real_class_graded["result"].returncode == 0, real_class_graded["result"].stderr[-4000:]
    return real_class_graded


def test_honest_students_before_and_after_keep_full_marks(graded):
    for student in HIDDEN_HONEST:
        row = graded["grades"][(student, A)]
        assert row["status"] == "graded" and float(row["score"]) == float(row["max_score"]) > 0, (
            student, H.problems(graded["out"], student))


@pytest.mark.parametrize("student", HOSTILE)
def test_gaming_the_hidden_tests_scores_nothing(graded, student):
    row = graded["grades"][(student, A)]
    assert row["status"] == "graded", H.problems(graded["out"], student)
    assert float(row["score"]) == 0, (
        f"{student} scored {row['score']}/{row['max_score']} with no correct answer")


def test_the_reference_is_not_in_the_sandbox(graded):
    nb = H.graded_notebook(graded["out"], A, "reference_by_path", NB)
    text = H.outputs_text(nb)
    assert "No such file or directory" in text and "reference" in text
    nb = H.graded_notebook(graded["out"], A, "reference_import", NB)
    assert "No module named 'course_utils.reference'" in H.outputs_text(nb)


@pytest.mark.parametrize("student", ["ast_swallow", "input_pass", "fake_hidden_module"])
def test_a_test_cell_whose_check_did_not_report_fails_with_a_sentence(graded, student):
    """Whatever the kernel printed, a test cell passes only on the grader's own verdict: where
    the kernel reported no error (errors swallowed, the cell replaced by `pass`), the grader's
    GradingError comes first, so nbgrader scores the cell zero."""
    nb = H.graded_notebook(graded["out"], A, student, NB)
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_tests")]
    assert len(tests) == len(FUNCTIONS) + 1  # and the think-first question, left blank
    for cell in tests:
        assert cell.outputs and cell.outputs[0]["output_type"] == "error", json.dumps(cell.outputs)[:500]
    if student == "fake_hidden_module":  # there the visible tests already fail in the kernel
        return
    for cell in tests:
        first = cell.outputs[0]
        assert first["ename"] == "GradingError", first
        if cell.metadata["nbgrader"]["grade_id"] == VALUE_QUESTION + "_tests":
            continue  # a blank number: the message depends on the attack, the zero does not
        if "your notebook uses `get_ipython`" in first["evalue"]:
            # an exercise that forbids something: the grader's reading of the notebook names the
            # hook first (autograder/routes.py), whatever the kernel reported
            continue
        if student == "input_pass":  # nothing of the test cell ran: no results reached the grader
            assert "did not run to the end" in first["evalue"], first
        else:  # the swallowed hidden check still sent the answer's results: judged as they are
            assert "raised NotImplementedError" in first["evalue"], first


def test_results_never_reach_the_notebook_or_the_feedback(graded):
    for student in ("aaa_honest", "always_equal"):
        nb = H.graded_notebook(graded["out"], A, student, NB)
        assert "attention-course.probe" not in H.outputs_text(nb)
    for html in (graded["out"] / "feedback").rglob("*.html"):
        assert "attention-course.probe" not in html.read_text()


def test_results_published_by_a_hook_are_refused_with_a_sentence(graded):
    """The hook's right results reach the grader beside the cell's own wrong ones: the cell fails
    because of the extra record, not because the forge went missing."""
    nb = H.graded_notebook(graded["out"], A, "post_run_cell_forge", NB)
    [cell] = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == VALUE_QUESTION + "_tests"]
    first = cell.outputs[0]
    assert first["output_type"] == "error" and first["ename"] == "GradingError", first
    assert "sent results of its own" in first["evalue"], first


def test_a_think_first_answer_copied_from_another_student_is_named(graded):
    """Each student's think-first question has numbers of their own, from the id the grader knows
    them by: the honest students' own answers pass (above); a friend's right number scores 0 with
    a sentence saying it answers another student's question, and costs nothing else."""
    out = graded["out"]
    cells = {(r["student_id"], r["grade_id"]): r for r in H.read_csv(out / "grades_by_cell.csv")}
    copied = cells[(COPIED_NUMBER, VALUE_QUESTION + "_tests")]
    assert float(copied["score"]) == 0, copied
    row = graded["grades"][(COPIED_NUMBER, A)]
    assert float(row["score"]) == float(row["max_score"]) - float(copied["max_score"]), row
    text = H.outputs_text(H.graded_notebook(out, A, COPIED_NUMBER, NB))
    assert "another student's question" in text, text[-3000:]
