"""The student bundle: everything a student needs, and no answers.

That it works without the reference is proven in the browser: tests/browser/test_smoke.py runs
every notebook of the unpacked bundle, answered, in JupyterLab, with `course_utils` imported from
the bundle (one run of each notebook checks both).
"""
import pytest

from scripts import bundle
from tests.browser.lab import unpack_bundle
from tests.notebook_cells import ROOT

FORBIDDEN_PATHS = ("solutions/", "course_utils/reference/", "tests/", "autograder/", "gradebook")


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    return unpack_bundle(tmp_path_factory.mktemp("bundle"))


def test_bundle_has_what_a_student_needs(unpacked):
    root, _ = unpacked
    for needed in ("README.md", "Makefile", "requirements.txt", "environment.yml", "pyproject.toml",
                   "course_utils/grading/__init__.py"):
        assert (root / needed).is_file(), needed
    released = sorted(p.relative_to(ROOT / "notebooks") for p in (ROOT / "notebooks").glob("*/*.ipynb"))
    assert released and sorted(p.relative_to(root / "notebooks") for p in (root / "notebooks").glob("*/*.ipynb")) == released
    assert "make lab" in (root / "README.md").read_text()


def test_bundle_holds_no_answer(unpacked):
    root, names = unpacked
    for name in names:
        relative = name.split("/", 1)[1]
        assert not relative.startswith(FORBIDDEN_PATHS), name
    for path in root.rglob("*"):
        if path.is_file():
            assert not bundle.secrets_in(path.name, path.read_bytes()), path


def test_the_leak_scan_can_fail():
    assert bundle.secrets_in("a.py", b"x = 1\n### BEGIN SOLUTION\n")
    assert bundle.secrets_in("a.py", b"from course_utils.reference import patchify\n")
    assert bundle.secrets_in("a.ipynb", b'"source": ["import course_utils.reference as r"]')
    # Naming the package in order to forbid it is not a leak.
    assert not bundle.secrets_in("a.py", b'importlib.import_module("course_utils.reference")\n')
