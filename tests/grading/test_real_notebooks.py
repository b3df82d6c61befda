"""The grading pipeline on the course's real notebook 05_self_attention, with a small hostile class.

Graded like a class: an honest student (full marks), monkeypatched comparisons (with the answer
functions replaced by stubs), a deleted test cell and a kernel that exits. (Loops that ignore SIGINT, and the rest
of the corpus, run on the fast fixture in test_hostile.py; each costs a full cell timeout.)
The students are part of the shared real class (real_class.py), graded in one batch.
Set GRADING_REAL_ALL=1 to put such a class on every assignment in solutions/ (about 2 min each).
"""
import pytest

import grading_helpers as H
from real_class import REAL_CLASS_TIMEOUT, DELETED_TEST, EXITS, HOSTILE, HOSTILE_ON, PATCHED, REAL_HONEST, WRONG_SOFTMAX, LIBRARY_IN_OBJECT

# The first test to ask for the shared class pays for grading it (real_class.REAL_CLASS_TIMEOUT).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(REAL_CLASS_TIMEOUT)]


@pytest.mark.parametrize("assignment", HOSTILE_ON)
def test_real_assignment_hostile_class(real_class_graded, assignment):
    r, out, g = real_class_graded["result"], real_class_graded["out"], real_class_graded["grades"]
    assert r.returncode == 0, r.stderr[-4000:]
    full = float(g[(REAL_HONEST, assignment)]["max_score"])
    for name in (REAL_HONEST, DELETED_TEST):
        assert float(g[(name, assignment)]["score"]) == full, (name, H.problems(out, name))
    for name in (PATCHED, EXITS):
        assert g[(name, assignment)]["status"] == "graded"
        assert float(g[(name, assignment)]["score"]) < full, name
    assert any("Tampering detected" in p for p in H.problems(out, PATCHED))
    assert any("kernel died" in p for p in H.problems(out, EXITS))
    assert any("was deleted" in p for p in H.problems(out, DELETED_TEST))


def test_no_feedback_page_shows_hidden_tests_or_the_reference(real_class_graded):
    """Checked on every page of the class; the reference's name only on pages whose student did
    not write it into their own answers (test_hostile_hidden's students reach for it)."""
    feedback = real_class_graded["out"] / "feedback"
    pages = list(feedback.rglob("*.html"))
    withheld = [p for p in H.problems(real_class_graded["out"]) if "feedback withheld" in p]
    # a page per notebook handed in, unless withheld (a page that would have shown the secrets)
    assert len(pages) + len(withheld) == len(list(real_class_graded["subs"].rglob("*.ipynb")))
    for html in pages:
        text = html.read_text()
        assert "BEGIN HIDDEN TESTS" not in text, html
        if html.relative_to(feedback).parts[0] not in HOSTILE:
            assert "course_utils.reference" not in text, html


def test_one_mistake_costs_points_once(real_class_graded):
    """A right attention_numpy that calls a wrong softmax, as its prompt says to: the softmax loses
    its 2 points, attention_numpy keeps its 3 (it is judged with a correct softmax in place)."""
    out = real_class_graded["out"]
    cells = {(r["student_id"], r["grade_id"]): r for r in H.read_csv(out / "grades_by_cell.csv")}
    softmax = cells[(WRONG_SOFTMAX, "self_attention_softmax_tests")]
    attention = cells[(WRONG_SOFTMAX, "self_attention_attention_numpy_tests")]
    assert float(softmax["score"]) == 0, softmax
    assert float(attention["score"]) == float(attention["max_score"]) == 3, (attention, H.problems(out, WRONG_SOFTMAX))
    row = real_class_graded["grades"][(WRONG_SOFTMAX, "05_self_attention")]
    assert float(row["score"]) == float(row["max_score"]) - 2, row


def test_a_library_function_kept_in_an_object_scores_nothing(real_class_graded):
    """SciPy's softmax held in a SimpleNamespace passes the in-kernel guard; the grader reads the
    notebook, fails the softmax's cell with a sentence quoting the line, and charges nothing
    else (attention_numpy is judged with a correct softmax in place)."""
    out = real_class_graded["out"]
    cells = {(r["student_id"], r["grade_id"]): r for r in H.read_csv(out / "grades_by_cell.csv")}
    softmax = cells[(LIBRARY_IN_OBJECT, "self_attention_softmax_tests")]
    attention = cells[(LIBRARY_IN_OBJECT, "self_attention_attention_numpy_tests")]
    assert float(softmax["score"]) == 0, softmax
    assert float(attention["score"]) == float(attention["max_score"]), attention
    page = next((out / "feedback" / LIBRARY_IN_OBJECT).rglob("*.html")).read_text()
    assert "this exercise asks you to write it without it" in page, page[:3000]
