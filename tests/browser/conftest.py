"""Fixtures for the browser tests: one JupyterLab server and one Chromium per module, a fresh
page per test (or one loaded JupyterLab shared by the module's tests that ask for `lab_page`),
and a screenshot of the page in test-artifacts/browser/ when a test fails."""
import pathlib

import pytest

from tests.browser.lab import CHROMIUM, CHROMIUM_FLAGS, jupyterlab, load_lab, prepare_root, shut_down_kernels, slug

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.failed_call = report.failed


@pytest.fixture(scope="module")
def browser():
    if not pathlib.Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install chromium` (done by .ci/run)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab over a copy of the release whose answer cells hold the solutions."""
    work = tmp_path_factory.mktemp("lab")
    root = prepare_root(work, ROOT / "notebooks", ROOT / "solutions", filled=True)
    with jupyterlab(root, work) as url:
        yield url, root


def _new_page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    return page


def _screenshot_if_failed(page, request):
    if getattr(request.node, "failed_call", False):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{slug(request.node.name)}.png"), full_page=True)


@pytest.fixture
def page(browser, request):
    page = _new_page(browser)
    yield page
    _screenshot_if_failed(page, request)
    if page.url.startswith("http"):
        shut_down_kernels(page)
    page.context.close()


@pytest.fixture(scope="module")
def _module_page(browser):
    page = _new_page(browser)
    yield page
    page.context.close()


@pytest.fixture
def lab_page(_module_page, request):
    """A page of the module's one loaded JupyterLab, `lab_page(url)`, for tests that open their
    notebook in it (`Notebook.opened_in`) instead of loading JupyterLab again. Each test leaves
    the lab as it found it: its notebooks closed and their kernels shut down (or, after a
    failure, JupyterLab loaded afresh)."""
    page, loaded = _module_page, []

    def at(base_url):
        if page.url.split("/lab")[0] != base_url:
            load_lab(page, base_url)
        loaded.append(base_url)
        return page

    yield at
    _screenshot_if_failed(page, request)
    if loaded and (getattr(request.node, "failed_call", True)
                   or page.locator(".jp-NotebookPanel").count() or page.locator(".jp-Dialog").count()):
        shut_down_kernels(page)
        load_lab(page, loaded[-1])
