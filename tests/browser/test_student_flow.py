"""Notebook 05 as a student meets it: a fresh release, an answer typed in, its visible test
passing, a catalogued mistake named, and nbgrader's Validate button. (Its slider answering the
keyboard is checked in tests/browser/test_first_hour.py, during the Run All every notebook gets.)"""
import pathlib

import pytest

from tests.browser.lab import Notebook, jupyterlab, prepare_root

ROOT = pathlib.Path(__file__).resolve().parents[2]
PATH = "05_self_attention/self_attention.ipynb"

CORRECT_SOFTMAX = '''def softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)
'''
# A catalogued mistake: no subtraction of the maximum, so exp overflows on large scores.
UNSTABLE_SOFTMAX = '''def softmax(x, axis=-1):
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)
'''

pytestmark = pytest.mark.skipif(not (ROOT / "notebooks" / PATH).exists(), reason="notebook 05 not released")


@pytest.fixture(scope="module")
def fresh_lab(tmp_path_factory):
    """JupyterLab over an untouched copy of the release, as a student downloads it."""
    work = tmp_path_factory.mktemp("fresh-lab")
    root = prepare_root(work, ROOT / "notebooks", ROOT / "solutions", filled=False)
    with jupyterlab(root, work) as url:
        yield url


def test_typed_answer_passes_and_a_mistake_is_named(page, fresh_lab):
    notebook = Notebook(page, fresh_lab, PATH)
    setup = notebook.code_cell_index("import course_utils.grading as grading")
    notebook.run_cell(setup)
    answer = notebook.code_cell_index("def softmax(")
    tests = answer + 1

    notebook.replace_source(answer, CORRECT_SOFTMAX)
    notebook.run_cell(answer)
    passed = notebook.run_cell(tests)
    assert "passed" in passed and "Error" not in passed, passed

    notebook.replace_source(answer, UNSTABLE_SOFTMAX)
    notebook.run_cell(answer)
    failed = notebook.run_cell(tests)
    assert "GradingError" in failed, failed
    assert "Traceback" not in failed and "course_utils/" not in failed, "course internals leaked into the message"
    assert "max" in failed.lower(), f"the message should point at subtracting the maximum: {failed}"


def test_validate_button_reports_success_on_a_finished_notebook(page, lab):
    url, _ = lab
    notebook = Notebook(page, url, PATH)
    page.locator(".jp-NotebookPanel-toolbar button:has-text('Validate'), .jp-Toolbar-item:has-text('Validate')").first.click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=180_000)
    page.wait_for_function(
        "() => /Success|passes|failed|error/i.test(document.querySelector('.jp-Dialog').innerText)",
        timeout=180_000)
    text = dialog.inner_text()
    assert "Success" in text, text
