"""Fixtures shared by the checks' tests."""
import pytest


@pytest.fixture
def no_student_id(monkeypatch, tmp_path):
    """No student id anywhere (environment, or a student_id.txt above the working folder): the
    questions show the example's numbers unless a test names a student."""
    for variable in ("COURSE_STUDENT_ID", "JUPYTERHUB_USER"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
