"""Fixtures for the browser tests: one JupyterLab server and one Chromium per module, a fresh
page per test, and a screenshot of the page in test-artifacts/browser/ when a test fails."""
import pathlib

import pytest

from tests.browser.lab import CHROMIUM, CHROMIUM_FLAGS, jupyterlab, prepare_root, shut_down_kernels, slug

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


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page
    if getattr(request.node, "failed_call", False):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{slug(request.node.name)}.png"), full_page=True)
    if page.url.startswith("http"):
        shut_down_kernels(page)
    context.close()
