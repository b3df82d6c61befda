import os

import pytest

import grading_helpers as H
import real_class
from autograder import verdict

# The fixture notebook is nbgrader source for the grading tests, not a course notebook to run.
collect_ignore_glob = ["fixtures/*"]


@pytest.fixture(scope="session")
def real_class_graded(tmp_path_factory):
    """The class of real_class.py, graded once in one batch (see there why)."""
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")
    return real_class.grade_the_class(tmp_path_factory.mktemp("real-class"))


@pytest.fixture(scope="session", autouse=True)
def shared_solution_verdicts(tmp_path_factory):
    """One verdict folder for every batch of the session (AUTOGRADER_VERDICT_CACHE, which the
    grader's subprocesses inherit): an assignment's solution, with the same limits and isolation,
    is checked once, not by every test that grades it. A test of the check itself gives its batch
    a folder of its own (real_class.py, test_verdict_cache.py) or an input that is never kept
    (a failing solution, a grader_failure)."""
    saved = os.environ.get(verdict.ENV_VAR)
    os.environ[verdict.ENV_VAR] = str(tmp_path_factory.mktemp("solution-verdicts"))
    yield
    if saved is None:
        os.environ.pop(verdict.ENV_VAR, None)
    else:
        os.environ[verdict.ENV_VAR] = saved
