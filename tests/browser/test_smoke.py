"""Every released notebook, answered, runs in JupyterLab from the student bundle without an
error and shows its widget.

The kernels import course_utils from the unpacked bundle, where `course_utils.reference` does
not exist (a first cell proves both): every visible test passes and every demo runs with what a
student has. One run of each notebook checks the bundle and the browser together; nbval runs
every notebook at full length in the instructor's environment.
"""
import pathlib

import nbformat
import pytest

from tests.browser.lab import Notebook, answer_in_bundle, error_outputs_in_file, jupyterlab, unpack_bundle

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(str(p.relative_to(ROOT / "notebooks")) for p in (ROOT / "notebooks").glob("*/*.ipynb"))


@pytest.fixture(scope="module")
def bundle_lab(tmp_path_factory):
    work = tmp_path_factory.mktemp("bundle-lab")
    root, _ = unpack_bundle(work)
    answer_in_bundle(root, ROOT / "solutions")
    with jupyterlab(root / "notebooks", work, env={"PYTHONPATH": str(root)}) as url:
        yield url, root / "notebooks"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_notebook_runs_from_the_bundle_and_widget_renders(page, bundle_lab, path):
    url, root = bundle_lab
    notebook = Notebook(page, url, path)
    notebook.run_all()
    page.wait_for_selector(".jupyter-widgets", timeout=60_000)
    assert page.locator(".jupyter-widgets").count() > 0
    notebook.save()
    page.wait_for_function("() => !document.querySelector('.jp-mod-current.jp-mod-dirty')")
    assert not notebook.error_outputs(), notebook.error_outputs()
    assert error_outputs_in_file(root / path) == []
    first = nbformat.read(root / path, as_version=4).cells[0]
    assert "the reference leaked" in first.source and first.execution_count, "the bundle check did not run"
