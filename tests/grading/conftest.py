import pytest

import grading_helpers as H
import real_class

# The fixture notebook is nbgrader source for the grading tests, not a course notebook to run.
collect_ignore_glob = ["fixtures/*"]


@pytest.fixture(scope="session")
def real_class_graded(tmp_path_factory):
    """The class of real_class.py, graded once in one batch (see there why)."""
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")
    return real_class.grade_the_class(tmp_path_factory.mktemp("real-class"))
