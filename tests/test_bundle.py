"""The student bundle: everything a student needs, no answers, and it works without the reference.

The bundle is unpacked into a temporary folder; with nothing new installed, every notebook, its
answer cells filled with the solution, runs top to bottom with `course_utils` imported from the
bundle, where `course_utils.reference` does not exist: every visible test passes, every demo runs.
"""
import os
import pathlib
import zipfile

import nbformat
import pytest
from nbclient import NotebookClient

from scripts import bundle
from tests.browser.lab import fill_answers
from tests.notebook_cells import ROOT, SHORT_RUN_ENV

FORBIDDEN_PATHS = ("solutions/", "course_utils/reference/", "tests/", "autograder/", "gradebook")


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    target = tmp_path_factory.mktemp("bundle")
    archive = bundle.build(target / "student-bundle.zip")
    with zipfile.ZipFile(archive) as zipped:
        names = zipped.namelist()
        zipped.extractall(target / "unpacked")
    return target / "unpacked" / bundle.PREFIX, names


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


# The test kernel runs in the instructor's environment, where course_utils is installed in editable
# mode; forget that install, as a student's environment never had it, then prove where code comes from.
WHERE_FROM = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.path_hooks[:] = [h for h in sys.path_hooks if not getattr(h, "__module__", "").startswith("__editable__")]
sys.path_importer_cache.clear()
import importlib.util, course_utils
assert course_utils.__file__.startswith({root!r}), course_utils.__file__
assert importlib.util.find_spec("course_utils.reference") is None, "the reference leaked into the bundle"
"""


@pytest.mark.slow
@pytest.mark.parametrize("notebook", sorted(str(p.relative_to(ROOT / "notebooks"))
                                            for p in (ROOT / "notebooks").glob("*/*.ipynb")))
def test_answered_notebook_runs_without_the_reference(unpacked, notebook):
    root, _ = unpacked
    path = root / "notebooks" / notebook
    fill_answers(path, ROOT / "solutions" / notebook, path)
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(WHERE_FROM.format(root=str(root))))
    # the bundle's course_utils, not the instructor's; short training (nbval runs the full length)
    env = dict(os.environ, PYTHONPATH=str(root), **SHORT_RUN_ENV)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.km = client.create_kernel_manager()
    client.start_new_kernel(env=env, cwd=str(path.parent))
    try:
        client.start_new_kernel_client()
        client.execute(cleanup_kc=False, reset_kc=False)
    finally:
        client._cleanup_kernel()
    errors = [f"cell {i}: {o.ename}: {o.evalue}" for i, c in enumerate(nb.cells) if c.cell_type == "code"
              for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
