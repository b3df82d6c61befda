"""Every assignment of the course through the course's grader: the solution scores full marks in
the sandbox (the batch's own solution check refuses to grade otherwise) and the untouched
release scores zero, with the hidden tests judged outside the student's kernel.

One batch, two jobs: the solution checks and the students share the workers.
"""
import pytest

import grading_helpers as H

pytestmark = pytest.mark.slow

SOLUTIONS = H.REPO / "solutions"
ASSIGNMENTS = sorted(d.name for d in SOLUTIONS.iterdir() if d.is_dir() and any(d.glob("*.ipynb")))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    reason = H.sandbox_unavailable()
    if reason:
        pytest.skip(f"the grading sandbox cannot run here: {reason}")
    root = tmp_path_factory.mktemp("every")
    course = H.make_course(root / "course", source=SOLUTIONS)
    subs = root / "subs"
    for assignment in ASSIGNMENTS:
        for notebook in sorted(p.name for p in (course / "solutions" / assignment).glob("*.ipynb")):
            H.write_student(subs, "idle", assignment, notebook, H.release(course, assignment, notebook))
    out = root / "out"
    result = H.grade(subs, out, course, "--jobs", "2", "--timeout", "120",
                     "--gradebook", str(root / "gradebook.db"), timeout=1800)
    return {"result": result, "out": out}


def test_every_solution_scores_full_marks_in_the_sandbox(graded):
    """The batch grades only after each solution notebook scored full marks (exit 2 otherwise)."""
    result = graded["result"]
    assert result.returncode == 0, result.stderr[-4000:]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_untouched_release_scores_zero(graded, assignment):
    assert graded["result"].returncode == 0, graded["result"].stderr[-2000:]
    row = H.grades(graded["out"])[("idle", assignment)]
    assert row["status"] == "graded", H.problems(graded["out"], "idle")
    assert float(row["max_score"]) > 0 and float(row["score"]) == 0, row
