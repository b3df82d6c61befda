"""Every released notebook, answered, runs in JupyterLab without an error and shows its widget."""
import pathlib

import pytest

from tests.browser.lab import Notebook, error_outputs_in_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(str(p.relative_to(ROOT / "notebooks")) for p in (ROOT / "notebooks").glob("*/*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_notebook_runs_and_widget_renders(page, lab, path):
    url, root = lab
    notebook = Notebook(page, url, path)
    notebook.run_all()
    page.wait_for_selector(".jupyter-widgets", timeout=60_000)
    assert page.locator(".jupyter-widgets").count() > 0
    notebook.save()
    page.wait_for_function("() => !document.querySelector('.jp-mod-current.jp-mod-dirty')")
    assert not notebook.error_outputs(), notebook.error_outputs()
    assert error_outputs_in_file(root / path) == []
