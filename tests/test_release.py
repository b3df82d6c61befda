"""notebooks/ is nbgrader's output from solutions/, never edited by hand, and holds no answer.

Like fastbook's `clean/` check: regenerate the release in a temporary copy of the course and
compare it byte for byte with the committed one.
"""
import pathlib

import nbformat
import pytest

from tests.course import ROOT, assignments, make_course_copy, nbgrader

RELEASE = ROOT / "notebooks"
SECRETS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
           "course_utils.reference", "catalogue")


def files_below(folder):
    return sorted(p.relative_to(folder) for p in folder.rglob("*")
                  if p.is_file() and ".ipynb_checkpoints" not in p.parts)


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    course = make_course_copy(tmp_path_factory.mktemp("course"))
    # What `make release` runs: one nbgrader process for every assignment (it globs the id).
    nbgrader(course, "generate_assignment", "[0-9][0-9]_*", "--force")
    return course / "notebooks"


def test_every_assignment_is_released():
    assert assignments(), "no assignment in solutions/"
    for assignment in assignments():
        assert (RELEASE / assignment).is_dir(), f"run `make release`: notebooks/{assignment} is missing"


@pytest.mark.slow
def test_release_is_in_sync_with_solutions(regenerated):
    assert files_below(regenerated) == files_below(RELEASE), "run `make release` and commit notebooks/"
    for relative in files_below(RELEASE):
        assert (RELEASE / relative).read_bytes() == (regenerated / relative).read_bytes(), (
            f"notebooks/{relative} differs from what `make release` makes from solutions/: "
            "never edit notebooks/ by hand; run `make release`"
        )


@pytest.mark.parametrize("path", sorted(RELEASE.rglob("*.ipynb")), ids=str)
def test_release_holds_no_answer(path):
    text = path.read_text()
    for secret in SECRETS:
        assert secret not in text, f"{path.relative_to(ROOT)} contains {secret!r}"
    nb = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), "outputs leaked"


@pytest.mark.parametrize("path", sorted(RELEASE.rglob("*.ipynb")), ids=str)
def test_release_answer_cells_are_stubs(path):
    nb = nbformat.read(path, as_version=4)
    answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]
    assert answers, "no answer cell in the release"
    for cell in answers:
        assert "raise NotImplementedError" in cell.source, cell.source


def test_the_secret_scan_can_fail(tmp_path):
    leaky = "x = 1\n### BEGIN SOLUTION\n"
    assert any(secret in leaky for secret in SECRETS)


@pytest.mark.parametrize("path", sorted(ROOT.glob("solutions/*/*.ipynb")) + sorted(RELEASE.rglob("*.ipynb")), ids=str)
def test_no_saved_widget_state(path):
    nb = nbformat.read(path, as_version=4)
    assert "widgets" not in nb.metadata, f"run `python scripts/strip_widget_state.py {path.relative_to(ROOT)}`"


@pytest.mark.parametrize("path", sorted(RELEASE.rglob("*.ipynb")), ids=str)
def test_run_all_goes_past_every_exercise(path):
    """JupyterLab's Run All stops at a cell that raises unless it is tagged `raises-exception`:
    every graded test cell, and every answer cell whose stub raises where it stands (a think-first
    value), carries the tag, and the notebook ends with the summary of its exercises."""
    import re
    nb = nbformat.read(path, as_version=4)
    untagged = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        is_test = meta.get("grade") and not meta.get("solution")
        raises_where_it_stands = meta.get("solution") and re.search(r"^raise NotImplementedError", cell.source, re.M)
        if (is_test or raises_where_it_stands) and "raises-exception" not in cell.metadata.get("tags", []):
            untagged.append(meta.get("grade_id"))
    assert not untagged, f"tag these cells `raises-exception` in solutions/ (then make release): {untagged}"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[-1].source.strip() == "grading.progress.show()", "the last cell must list the exercises"


@pytest.mark.parametrize("path", sorted(RELEASE.rglob("*.ipynb")), ids=str)
def test_an_unanswered_think_first_question_says_so(path):
    """A think-first answer's stub raises before it binds its name; its test starts by saying
    'not answered yet' instead of stopping on a bare NameError."""
    import re
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    for answer, test in zip(cells, cells[1:]):
        if answer.metadata.get("nbgrader", {}).get("solution") and re.search(r"^raise NotImplementedError", answer.source, re.M):
            assert re.match(r'grading\.assert_answered\("\w+"\)', test.source), test.source[:120]


IPYTHON_HISTORY = ("_oh", "_ih", "_dh", "Out", "In", "_ii", "_iii")


@pytest.mark.parametrize("path", sorted(ROOT.glob("solutions/*/*.ipynb")), ids=str)
def test_no_cell_rebinds_ipythons_history(path):
    """`_oh = ...` in a test cell (03 had one) makes every later cell that ends in a value fail
    in IPython's display hook ("can't assign a ... to a torch.FloatTensor")."""
    import ast
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        names = {t.id for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                 for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                 for t in ast.walk(t) if isinstance(t, ast.Name)}
        assert not names & set(IPYTHON_HISTORY), f"a cell rebinds {names & set(IPYTHON_HISTORY)}: {cell.source[:80]}"
