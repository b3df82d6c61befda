"""Every assignment of the course through the course's grader: the solution scores full marks in
the sandbox (the batch's own solution check refuses to grade otherwise) and the untouched
release scores zero, with the hidden tests judged outside the student's kernel.

The students are the `idle` student of the shared real class (real_class.py): one batch, two
jobs, with the other real-notebook students of the suite.
"""
import pytest

import grading_helpers as H
from real_class import REAL_CLASS_TIMEOUT, ASSIGNMENTS, IDLE

# The first test to ask for the shared class pays for grading it (real_class.REAL_CLASS_TIMEOUT).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(REAL_CLASS_TIMEOUT)]


def test_every_solution_scores_full_marks_in_the_sandbox(real_class_graded):
    """The batch grades only after each solution notebook scored full marks (exit 2 otherwise)."""
    result = real_class_graded["result"]
    assert result.returncode == 0, result.stderr[-4000:]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_untouched_release_scores_zero(real_class_graded, assignment):
    assert real_class_graded["result"].returncode == 0, real_class_graded["result"].stderr[-2000:]
    row = real_class_graded["grades"][(IDLE, assignment)]
    assert row["status"] == "graded", H.problems(real_class_graded["out"], IDLE)
    assert float(row["max_score"]) > 0 and float(row["score"]) == 0, row
