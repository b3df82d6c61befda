"""The real nbgrader CLI end to end: the solution scores full marks, the untouched release zero.

Plain `nbgrader autograde` (an instructor who does not use `python -m autograder`) judges the
hidden tests in the kernel, with the reference importable. Every assignment goes through the
course's own grader in tests/grading/test_every_assignment.py (sandbox, judge, solution check);
here one assignment, the quickest to run, proves the plain CLI path, which is the same for all.
"""
import shutil

import pytest
from nbgrader.api import Gradebook

from tests.course import assignments, make_course_copy, nbgrader

pytestmark = pytest.mark.slow
PLAIN = [a for a in assignments() if a.startswith("02_")]


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    course = make_course_copy(tmp_path_factory.mktemp("course"))
    for assignment in PLAIN:
        nbgrader(course, "generate_assignment", assignment, "--force")
        for student, source in [("solver", "solutions"), ("idle", "notebooks")]:
            target = course / "submitted" / student / assignment
            target.mkdir(parents=True)
            for notebook in (course / source / assignment).glob("*.ipynb"):
                shutil.copy(notebook, target / notebook.name)
        nbgrader(course, "autograde", assignment, "--force")
    return course


@pytest.mark.parametrize("assignment", PLAIN)
def test_solution_scores_full_marks_and_release_scores_zero(graded_course, assignment):
    with Gradebook(f"sqlite:///{graded_course / 'gradebook.db'}") as gradebook:
        solved = gradebook.find_submission(assignment, "solver")
        idle = gradebook.find_submission(assignment, "idle")
        assert solved.max_score > 0
        assert solved.score == solved.max_score, f"the solution scored {solved.score}/{solved.max_score}"
        assert idle.score == 0, f"the untouched release scored {idle.score}"
