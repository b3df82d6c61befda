"""Driving JupyterLab in headless Chromium as a student would.

The waits are on state, never on the clock: the kernel's websocket being open and the status
bar reading "| Idle", every code cell carrying an execution count, the DOM showing a widget.
"""
import contextlib
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat

from tests.notebook_cells import SHORT_RUN_ENV

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# User settings: no news pop-up, no update check, every cell kept in the DOM.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
STEP_TIMEOUT_MS = 120_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fill_answers(release_path, solution_path, target_path):
    """The release notebook with every answer cell replaced by the solution's (a diligent student)."""
    release = nbformat.read(release_path, as_version=4)
    solution = nbformat.read(solution_path, as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in release.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = answers[meta["grade_id"]]
    nbformat.write(release, target_path)


@contextlib.contextmanager
def jupyterlab(root, workdir, env=None, python=sys.executable, app="jupyterlab"):
    """Start JupyterLab from this environment on a free loopback port; yield its base URL.
    `env` is added to the server's environment, which its kernels inherit. `python` and `app`
    start another environment's server, or Notebook 7 (app="notebook"), instead."""
    workdir = pathlib.Path(workdir)
    settings = workdir / "lab-user-settings"
    for name, value in LAB_SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    port = free_port()
    # Kernels inherit the server's environment: short training (nbval runs the full length).
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(workdir / "lab-workspaces"), **SHORT_RUN_ENV, **(env or {}))
    log = open(workdir / "jupyterlab.log", "w")
    server = subprocess.Popen(
        [str(python), "-m", app, "--no-browser", f"--ServerApp.port={port}",
         "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
         f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0"]
        + (["--allow-root"] if os.geteuid() == 0 else []),
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"{app} exited: {(workdir / 'jupyterlab.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # polling the server's readiness, not waiting for a result
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


class Notebook:
    """One open notebook in a JupyterLab page: loaded with the page (`Notebook(page, url, path)`),
    or opened in the JupyterLab a page already shows (`Notebook.opened_in(page, path)`)."""

    def __init__(self, page, base_url, path, in_loaded_lab=False):
        self.page = page
        self.path = path
        kernel_socket = []
        listen = lambda ws: kernel_socket.append(ws.url) if "/api/kernels/" in ws.url else None  # noqa: E731
        page.on("websocket", listen)
        if in_loaded_lab:  # as a student does: File > Open from Path...
            self.menu("File", "Open from Path…")
            page.fill(".jp-Dialog input", path)
            page.keyboard.press("Enter")
        else:  # ?reset: start from an empty workspace, not the tabs a previous test left open.
            page.goto(f"{base_url}/lab/tree/{path}?reset")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=STEP_TIMEOUT_MS)
        self.wait_idle()
        page.wait_for_function("() => true")  # flush
        deadline = time.monotonic() + 60
        while not kernel_socket and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        assert kernel_socket, "the kernel's websocket never opened"
        page.remove_listener("websocket", listen)

    @classmethod
    def opened_in(cls, page, path):
        """Open `path` in the JupyterLab `page` shows (loaded by `load_lab`). Chromium spends about
        2 CPU-seconds opening a notebook there, against 5.5 loading JupyterLab again with it."""
        return cls(page, None, path, in_loaded_lab=True)

    def close_and_shut_down(self):
        """File > Close and Shut Down Notebook: the tab closes and its kernel stops."""
        self.menu("File", "Close and Shut Down Notebook…")
        self.page.click(".jp-Dialog .jp-mod-accept")  # "Shut down the notebook?"
        self.page.wait_for_function("() => document.querySelectorAll('.jp-NotebookPanel').length === 0",
                                    timeout=STEP_TIMEOUT_MS)

    def wait_idle(self):
        self.page.wait_for_function(
            """() => [...document.querySelectorAll('.jp-StatusBar-TextItem')]
                      .some(e => /\\|\\s*Idle/.test(e.textContent))""",
            timeout=STEP_TIMEOUT_MS,
        )

    def menu(self, menu, item):
        self.page.click(f".lm-MenuBar-itemLabel:text-is('{menu}')")
        self.page.click(f".lm-Menu-itemLabel:text-is('{item}')")

    def run_all(self):
        self.menu("Run", "Run All Cells")
        self.wait_all_executed()

    def wait_all_executed(self):
        self.page.wait_for_function(
            """() => {
                const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];
                return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
            }""",
            timeout=STEP_TIMEOUT_MS,
        )
        self.wait_idle()

    def code_cell(self, index):
        return self.page.locator(".jp-Notebook .jp-CodeCell").nth(index)

    def code_cell_index(self, contains):
        sources = self.page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-editor").all_inner_texts()
        for i, text in enumerate(sources):
            if contains in text:
                return i
        raise AssertionError(f"no code cell contains {contains!r}")

    def replace_source(self, index, source):
        editor = self.code_cell(index).locator(".cm-content")
        editor.click()
        self.page.keyboard.press("Control+A")
        self.page.keyboard.press("Delete")
        self.page.keyboard.insert_text(source)

    def run_cell(self, index):
        cell = self.code_cell(index)
        before = cell.locator(".jp-InputArea-prompt").inner_text()
        cell.locator(".cm-content").click()
        self.page.keyboard.press("Control+Enter")
        self.page.wait_for_function(
            """([i, before]) => {
                const p = document.querySelectorAll('.jp-Notebook .jp-CodeCell')[i].querySelector('.jp-InputArea-prompt');
                return /\\[\\d+\\]/.test(p.textContent) && p.textContent !== before;
            }""",
            arg=[index, before], timeout=STEP_TIMEOUT_MS,
        )
        self.wait_idle()
        return cell.locator(".jp-OutputArea").inner_text()

    def save(self):
        self.page.keyboard.press("Control+S")


def assert_a_students_lab(page):
    """The page's JupyterLab or Notebook 7 is a student's: Validate, and none of nbgrader's
    instructor tools (menu, sidebar panels, Formgrader's page)."""
    menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
    assert "File" in menus and "Nbgrader" not in menus, menus
    sidebar = " ".join(page.locator(".jp-SideBar .lm-TabBar-tab").evaluate_all(
        "tabs => tabs.map(t => (t.getAttribute('title') || '') + ' ' + t.textContent)"))
    assert "Create Assignment" not in sidebar and "nbgrader" not in sidebar.lower(), sidebar
    assert page.locator("button:has-text('Validate'), [title*='Validate']").count() >= 1
    assert page.evaluate("async () => (await fetch('/formgrader')).status") == 404


def load_lab(page, base_url):
    """JupyterLab in `page`, from an empty workspace, with no notebook open yet."""
    page.goto(f"{base_url}/lab?reset")
    page.wait_for_selector(".lm-MenuBar-itemLabel:text-is('File')", timeout=STEP_TIMEOUT_MS)
    page.wait_for_selector(".jp-StatusBar-TextItem", timeout=STEP_TIMEOUT_MS)


def shut_down_kernels(page):
    """End every kernel of the server, so the next test does not share the CPU with this one.
    REST calls from the page echo JupyterLab's _xsrf cookie, as the server requires."""
    page.evaluate("""async () => {
        const m = document.cookie.match(/_xsrf=([^;]+)/);
        const headers = m ? {'X-XSRFToken': decodeURIComponent(m[1])} : {};
        const sessions = await (await fetch('/api/sessions')).json();
        for (const s of sessions) await fetch('/api/sessions/' + s.id, {method: 'DELETE', headers});
    }""")


def prepare_root(tmp_path, release, solutions, filled=True):
    """A copy of the release, with answers filled in from the solutions when asked."""
    root = tmp_path / "lab-root"
    shutil.copytree(release, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    if filled:
        for path in root.glob("*/*.ipynb"):
            fill_answers(path, solutions / path.relative_to(root), path)
    return root


# The first cell of a notebook run from the student bundle. The test kernel runs in the instructor's
# environment, where course_utils is installed in editable mode; forget that install, as a student's
# environment never had it, then prove where the code comes from.
WHERE_FROM = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.path_hooks[:] = [h for h in sys.path_hooks if not getattr(h, "__module__", "").startswith("__editable__")]
sys.path_importer_cache.clear()
import importlib.util, course_utils
assert course_utils.__file__.startswith({root!r}), course_utils.__file__
assert importlib.util.find_spec("course_utils.reference") is None, "the reference leaked into the bundle"
"""


def unpack_bundle(target):
    """Build the student bundle and unpack it into `target`: (its root, the archive's names)."""
    import zipfile

    from scripts import bundle

    archive = bundle.build(target / "student-bundle.zip")
    with zipfile.ZipFile(archive) as zipped:
        names = zipped.namelist()
        zipped.extractall(target / "unpacked")
    return target / "unpacked" / bundle.PREFIX, names


def prove_bundle_origin(root):
    """Put WHERE_FROM first in every notebook of an unpacked bundle, so that running one proves
    the bundle's course_utils did the work, without the answer key."""
    for path in sorted((root / "notebooks").glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nb.cells.insert(0, nbformat.v4.new_code_cell(WHERE_FROM.format(root=str(root))))
        nbformat.write(nb, path)


def slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)
