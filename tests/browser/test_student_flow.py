"""Notebook 05 as a student meets it: a fresh release, a widget to play with, an answer typed in,
its visible test passing, a catalogued mistake named, and nbgrader's Validate button."""
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


def test_the_widget_responds_to_the_keyboard(page, lab):
    url, _ = lab
    notebook = Notebook(page, url, PATH)
    notebook.run_all()

    slider = page.locator(".widget-slider").first
    slider.scroll_into_view_if_needed()
    output = page.locator(".widget-output").first
    page.wait_for_function(
        "() => document.querySelector('.widget-output img') !== null", timeout=60_000)
    before_html = output.inner_html()
    before_image = output.locator("img").first.get_attribute("src")
    before_value = page.locator(".widget-slider .widget-readout").first.inner_text()

    slider.locator(".noUi-handle").focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "before => document.querySelector('.widget-output img') && document.querySelector('.widget-output img').src !== before",
        arg=before_image, timeout=60_000,
    )
    assert page.locator(".widget-slider .widget-readout").first.inner_text() != before_value
    assert output.inner_html() != before_html


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
