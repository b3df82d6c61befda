"""The grading pipeline on the course's real notebook 05_self_attention, with a small hostile class.

Graded like a class: an honest student (full marks), monkeypatched comparisons (with the answer
functions replaced by stubs), a deleted test cell and a kernel that exits. (Loops that ignore SIGINT, and the rest
of the corpus, run on the fast fixture in test_hostile.py; each costs a full cell timeout.)
Set GRADING_REAL_ALL=1 to grade every assignment in solutions/ this way (about 2 min each).
Skipped, with the reason, while the notebook is absent.
"""
import os

import pytest

import grading_helpers as H

pytestmark = pytest.mark.slow

SOLUTIONS = H.REPO / "solutions"
PRESENT = sorted(d.name for d in SOLUTIONS.iterdir()
                 if d.is_dir() and any(d.glob("*.ipynb"))) if SOLUTIONS.is_dir() else []


def _answer_ids(nb):
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]


def _test_ids(nb):
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")]


CHOSEN = PRESENT if os.environ.get("GRADING_REAL_ALL") else ["05_self_attention"]


@pytest.mark.parametrize("assignment", CHOSEN)
def test_real_assignment_hostile_class(tmp_path, assignment):
    if assignment not in PRESENT:
        pytest.skip(f"solutions/{assignment}/ has no notebook yet (it is being written)")
    reason = H.sandbox_unavailable()
    if reason:
        pytest.skip(f"the grading sandbox cannot run here: {reason}")
    course = H.make_course(tmp_path / "course", source=SOLUTIONS, assignments=[assignment])
    notebooks = sorted(p.name for p in (course / "solutions" / assignment).glob("*.ipynb"))
    nb_name = notebooks[0]
    honest = H.honest(course, assignment, nb_name)
    answers, tests = _answer_ids(honest), _test_ids(honest)
    assert answers and tests, "an assignment needs answer cells and graded test cells"
    subs = tmp_path / "subs"
    for name in ("aaa_honest",):
        H.write_student(subs, name, assignment, nb_name, honest)
        for other in notebooks[1:]:
            H.write_student(subs, name, assignment, other, H.honest(course, assignment, other))

    patched = H.honest(course, assignment, nb_name)
    H.cell(patched, answers[0]).source = (
        "import numpy, torch\nnumpy.allclose = lambda *a, **k: True\n"
        "torch.allclose = lambda *a, **k: True\ntorch.testing.assert_close = lambda *a, **k: None\n"
        + "\n".join(f"{fn} = lambda *a, **k: None" for fn in _defined(H.cell(patched, answers[0]).source)))
    H.write_student(subs, "patched", assignment, nb_name, patched)

    deleted = H.honest(course, assignment, nb_name)
    deleted.cells = [c for c in deleted.cells
                     if c.metadata.get("nbgrader", {}).get("grade_id") != tests[-1]]
    H.write_student(subs, "deleted_test", assignment, nb_name, deleted)

    exits = H.honest(course, assignment, nb_name)
    H.cell(exits, answers[-1]).source += "\nimport os\nos._exit(0)\n"
    H.write_student(subs, "exits", assignment, nb_name, exits)

    out = tmp_path / "out"
    r = H.grade(subs, out, course, "--jobs", "2", "--timeout", "60", "--assignment", assignment,
                "--gradebook", str(tmp_path / "gradebook.db"))
    assert r.returncode == 0, r.stderr[-4000:]
    g = H.grades(out)
    full = float(g[("aaa_honest", assignment)]["max_score"])
    for name in ("aaa_honest", "deleted_test"):
        assert float(g[(name, assignment)]["score"]) == full, (name, H.problems(out, name))
    for name in ("patched", "exits"):
        assert g[(name, assignment)]["status"] == "graded"
        assert float(g[(name, assignment)]["score"]) < full, name
    assert any("Tampering detected" in p for p in H.problems(out, "patched"))
    assert any("kernel died" in p for p in H.problems(out, "exits"))
    assert any("was deleted" in p for p in H.problems(out, "deleted_test"))
    for html in (out / "feedback").rglob("*.html"):
        text = html.read_text()
        assert "BEGIN HIDDEN TESTS" not in text
        assert "course_utils.reference" not in text, html


def _defined(source):
    """Names of the functions and classes an answer cell defines."""
    import ast
    return [n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
