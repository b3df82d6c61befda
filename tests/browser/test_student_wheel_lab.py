"""The pip-installed course in a student's own Jupyter: JupyterLab and Notebook 7, started from
the folder `attention-course init` made, in a fresh environment holding only the student wheel
(tests/student_wheel_env.py), open a notebook and show a working widget: the sliders' views render
with the figure the kernel drew for their values. Screenshots of both go to
test-artifacts/browser/ whatever the outcome."""
import pathlib
import time

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.lab import STEP_TIMEOUT_MS, jupyterlab
from tests.student_wheel_env import build_wheel, clean_env, make_venv

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
NOTEBOOK = "06_scaling_dk/scaling_dk.ipynb"  # ends with two sliders over a figure
RUN_TIMEOUT_MS = 400_000
URLS = {"jupyterlab": "/lab/tree/{path}?reset", "notebook": "/notebooks/{path}"}


@pytest.fixture(scope="module")
def initialised(tmp_path_factory):
    work = tmp_path_factory.mktemp("wheel-lab")
    venv, seconds = make_venv(work / "venv", build_wheel(work / "dist"))
    print(f"\nfresh venv with the student wheel: {seconds:.0f} s")
    venv.run("attention-course", "init", str(work / "course"), "--student", "jdoe", cwd=work)
    return venv, work


def run_all_and_wait(page):
    """Run All, then wait until every code cell has run. Until the page's kernel connection is
    ready, Run All queues nothing (the server may call the kernel idle well before; Notebook 7's
    toolbar has no status bar to read): so Run All is chosen again until a cell shows it is queued
    or running. The first start imports PyTorch afresh: a minute or more on a busy machine."""
    deadline = time.monotonic() + RUN_TIMEOUT_MS / 1000
    dialogs = []
    while True:
        # A Run All chosen before the page's session has its kernel can open a dialog (which kernel to
        # use, say) that stops every later click: take its default answer, as a student would.
        if page.locator(".jp-Dialog").count():
            dialogs.append(page.locator(".jp-Dialog").first.inner_text()[:200])
            if page.locator(".jp-Dialog .jp-mod-accept").count():
                page.locator(".jp-Dialog .jp-mod-accept").first.click()
            else:
                page.keyboard.press("Escape")
            page.wait_for_timeout(500)
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
        try:
            page.wait_for_function(
                """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
                          .some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))""", timeout=10_000)
            break
        except PlaywrightTimeout:
            assert time.monotonic() < deadline, f"Run All never started: the kernel did not connect (dialogs: {dialogs})"
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""", timeout=RUN_TIMEOUT_MS)


@pytest.mark.slow
@pytest.mark.parametrize("app", ["jupyterlab", "notebook"])
def test_the_initialised_folder_opens_and_its_widget_works(page, initialised, app):
    venv, work = initialised
    folder = work / "course"
    with jupyterlab(folder, work / app, env={"PATH": f"{venv.bin}:{clean_env()['PATH']}"},
                    python=venv.python, app=app) as url:
        page.goto(url + URLS[app].format(path=NOTEBOOK))
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=STEP_TIMEOUT_MS)
        try:
            run_all_and_wait(page)
            cell = page.locator(".jp-CodeCell").filter(has=page.locator(".widget-slider")).last
            figure = cell.locator(".widget-output img")
            figure.wait_for(timeout=STEP_TIMEOUT_MS)  # the widget's view rendered, with the kernel's figure
            cell.scroll_into_view_if_needed()
            assert cell.locator(".widget-readout").first.inner_text() == "64"  # the slider's view, at its value
            assert "Error displaying widget" not in page.locator(".jp-Notebook").inner_text()
        finally:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"student-wheel-{app}.png"))
            page.goto("about:blank")  # leave before the server stops: nothing left for the fixture to shut down
