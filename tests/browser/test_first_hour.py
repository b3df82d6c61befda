"""The first hour of a student, in the student's lab (`make lab`'s configuration) on the untouched
release as the student bundle holds it: Restart and Run All reaches the last cell of every
notebook, with `course_utils` imported from the bundle, without the answer key (a first cell
proves both), only the graded test cells (and the think-first answers still to write) failing,
each in one sentence, and the widgets shown (05's slider answers the keyboard); the last cell
lists every exercise; a reopened notebook renders its widgets; the instructor's tools are absent.

Each notebook runs once here and once more, answered, from the student wheel's own environment
(tests/test_student_wheel.py), where every visible test must pass; nbval runs the solutions at
full length in the instructor's environment."""
import json
import pathlib
import time

import nbformat
import pytest

from tests.browser.lab import (STEP_TIMEOUT_MS, Notebook, assert_a_students_lab, jupyterlab, prove_bundle_origin,
                               unpack_bundle)
from tests.notebook_cells import check_untouched_run

ROOT = pathlib.Path(__file__).resolve().parents[2]
STUDENT_LAB = ROOT / "scripts" / "student_lab"
RELEASED = sorted(str(p.relative_to(ROOT / "notebooks")) for p in (ROOT / "notebooks").glob("*/*.ipynb"))


@pytest.fixture(scope="module")
def student_lab(tmp_path_factory):
    """JupyterLab as `make lab` starts it, over the untouched notebooks of the unpacked student
    bundle, its kernels importing the bundle's course_utils."""
    work = tmp_path_factory.mktemp("student-lab")
    bundle_root, _ = unpack_bundle(work)
    prove_bundle_origin(bundle_root)
    root = bundle_root / "notebooks"
    with jupyterlab(root, work, env={"JUPYTER_CONFIG_PATH": str(STUDENT_LAB), "PYTHONPATH": str(bundle_root)}) as url:
        yield url, root


# Its first slider redraws a figure drawn by the course's own code, so it works before any answer.
SLIDER_NOTEBOOK = "05_self_attention/self_attention.ipynb"


def a_slider_redraws_its_figure_from_the_keyboard(page):
    """Focus the page's first slider, press the right arrow three times: the readout changes and
    the figure below is drawn again (checked here, in the run every notebook gets, rather than by
    running 05 once more)."""
    slider = page.locator(".widget-slider").first
    slider.scroll_into_view_if_needed()
    output = page.locator(".widget-output").first
    page.wait_for_function("() => document.querySelector('.widget-output img') !== null", timeout=60_000)
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


def restart_and_run_all(notebook):
    notebook.menu("Kernel", "Restart Kernel and Run All Cells…")
    notebook.page.click(".jp-Dialog .jp-mod-accept")
    notebook.wait_all_executed()


def saved(notebook, path, previous_mtime):
    """Save, and wait until the file on disk is newer than `previous_mtime`; return it read."""
    notebook.save()
    deadline = time.monotonic() + 60
    while path.stat().st_mtime <= previous_mtime and time.monotonic() < deadline:
        notebook.page.wait_for_timeout(200)
    assert path.stat().st_mtime > previous_mtime, "the notebook was not saved"
    while True:  # the server may still be writing it: read until it parses
        try:
            return nbformat.read(path, as_version=4)
        except (nbformat.reader.NotJSONError, ValueError):
            if time.monotonic() > deadline:
                raise
            notebook.page.wait_for_timeout(200)


@pytest.mark.parametrize("path", RELEASED)
def test_restart_and_run_all_reaches_the_last_cell(lab_page, student_lab, path):
    url, root = student_lab
    page = lab_page(url)  # one JupyterLab for every notebook, as a student keeps it open
    file = root / path
    before = file.stat().st_mtime
    notebook = Notebook.opened_in(page, path)
    restart_and_run_all(notebook)
    if path == SLIDER_NOTEBOOK:
        a_slider_redraws_its_figure_from_the_keyboard(page)
    nb = saved(notebook, file, before)

    code, tests, summary = check_untouched_run(nb)
    assert "the reference leaked" in code[0].source and code[0].execution_count, "the bundle check did not run"
    assert page.locator(".jupyter-widgets").count() > 0, "no widget on the page"
    for cell in tests:  # what JupyterLab shows of each: one line, one sentence
        error = next(o for o in cell.outputs if o.output_type == "error")
        assert len(error.traceback) == 1 and "\n" not in error.traceback[0].strip(), error.traceback
    assert summary.count("fails") == len(tests), summary
    # The page shows the summary at the end, where Run All leaves the student.
    assert f"0 of {len(tests)} exercises pass" in notebook.code_cell(len(code) - 1).inner_text()
    notebook.close_and_shut_down()


def test_a_reopened_notebook_renders_its_widgets(page, student_lab):
    """Progress bars and sliders after a save and a reload: never 'Error displaying widget'."""
    url, root = student_lab
    path = "08_masking_transformer/masking_transformer.ipynb"  # training bars and sliders
    file = root / path
    before = file.stat().st_mtime
    notebook = Notebook(page, url, path)
    notebook.run_all()
    saved(notebook, file, before)
    page.reload()
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=STEP_TIMEOUT_MS)
    notebook.wait_idle()
    page.wait_for_function("() => document.querySelectorAll('.jp-OutputArea-output').length > 0")
    page.wait_for_timeout(2000)  # let the widget renderers settle: what the student sees
    text = page.locator(".jp-Notebook").inner_text()
    assert "Error displaying widget" not in text
    assert "language models:" in text or "training" in text


def test_the_student_lab_has_no_instructor_tools(lab_page, student_lab):
    url, _ = student_lab
    page = lab_page(url)
    notebook = Notebook.opened_in(page, RELEASED[0])
    assert_a_students_lab(page)
    notebook.close_and_shut_down()
