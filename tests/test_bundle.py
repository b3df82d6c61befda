"""The student bundle: everything a student needs, and no answers.

That it works without the reference is proven in the browser: tests/browser/test_first_hour.py
runs every notebook of the unpacked bundle, untouched, in the student's JupyterLab, with
`course_utils` imported from the bundle (one run of each notebook checks both); answered, every
notebook runs from the student wheel's own environment (tests/test_student_wheel.py).
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
                   "course_utils/grading/__init__.py", "student_lab/labconfig/page_config.json",
                   "student_lab/jupyter_server_config.json", "student_lab/overrides.json"):
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


def _answer_everything(release_dir, solutions_dir):
    """Fill every answer cell of every notebook below release_dir with the solution (a student's work)."""
    from tests.browser.lab import fill_answers
    for path in sorted(release_dir.glob("*/*.ipynb")):
        fill_answers(path, solutions_dir / path.relative_to(release_dir), path)


@pytest.mark.slow
def test_a_students_answers_never_reach_the_bundle(tmp_path):
    """A student answered every exercise in workspace/ and (the old way) in notebooks/ too; the
    zip still holds exactly nbgrader's fresh release of the committed solutions."""
    import shutil
    import subprocess
    import zipfile

    from scripts import workspace
    from tests.course import nbgrader

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    workspace.seed(clone / "notebooks", clone / "workspace")
    _answer_everything(clone / "workspace", clone / "solutions")
    _answer_everything(clone / "notebooks", clone / "solutions")
    assert subprocess.run(["git", "diff", "--quiet", "--", "notebooks"], cwd=clone).returncode == 1

    archive = bundle.build(tmp_path / "student-bundle.zip", root=clone)

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    for name in ("solutions", "autograder", "nbgrader_config.py"):
        source = clone / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, fresh / name)
    nbgrader(fresh, "generate_assignment", "[0-9][0-9]_*", "--force")
    expected = {f"notebooks/{p.relative_to(fresh / 'notebooks').as_posix()}": p.read_bytes()
                for p in (fresh / "notebooks").rglob("*") if p.is_file()}
    with zipfile.ZipFile(archive) as zipped:
        shipped = {name.split("/", 1)[1]: zipped.read(name) for name in zipped.namelist()
                   if name.split("/", 1)[1].startswith("notebooks/")}
    assert sorted(shipped) == sorted(expected)
    for name, data in expected.items():
        assert shipped[name] == data, f"{name} in the bundle is not nbgrader's fresh release"


def test_the_student_lab_configuration_ships():
    from scripts.bundle import STUDENT_LAB
    assert (ROOT / STUDENT_LAB / "labconfig" / "page_config.json").is_file()
    makefile = (ROOT / "scripts" / "student" / "Makefile").read_text()
    assert "JUPYTER_CONFIG_PATH=$(CURDIR)/student_lab" in makefile and "overrides.json" in makefile
