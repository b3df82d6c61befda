"""The hostile corpus of the security review (issue 17): one batch, one job, in student order.

One job makes every student share the grading worker and its kernel-socket folder, so whatever
a hostile student leaves behind meets the students after it; honest students graded first and
last (and `solution-check`, once a reserved name) must keep full marks. Item numbers are the
issue's.
"""
import base64
import json
import re
import shutil

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell

import grading_helpers as H

pytestmark = pytest.mark.slow

A, NB = "00_fixture", "fixture.ipynb"
FULL = 5.0
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5f3d8c10000000049454e44ae426082")).decode()

# Every classic way to run script from markdown or output metadata; each would set __pwned.
XSS_MARKDOWN = """# Heading stays

| a | b |
|---|---|
| 1 | 2 |

Math stays as text: $\\sqrt{d_k}$

<script>window.__pwned = 'script'; alert('script')</script>
<img src="x" onerror="window.__pwned = 'img'; alert('img')">
<a id="jslink" href="javascript:window.__pwned = 'link'; alert('link')">click me</a>
<svg onload="window.__pwned = 'svg'; alert('svg')"></svg>
<meta http-equiv="refresh" content="0;url=about:blank#navigated">
<iframe src="javascript:parent.__pwned = 'iframe'"></iframe>
"""
XSS_CODE = (
    "from IPython.display import display\n"
    f"display({{'image/png': {PNG!r}}}, raw=True,\n"
    "        metadata={'image/png': {'width': \"1 onerror=window.__pwned='png';alert(5)\"}})\n")


def _append(nb, grade_id, code):
    c = H.cell(nb, grade_id)
    c.source = c.source + "\n" + code
    return nb


def _socket_dir_code():
    return ("import json, os\n"
            "_d = os.path.dirname(json.load(open('/tmp/.kernel-connection.json'))['ip'])\n"
            "os.makedirs(os.path.join(_d, 'leftover-dir', 'deeper'), exist_ok=True)\n"
            "open(os.path.join(_d, 'leftover-file'), 'w').write('x')\n"
            "print('SOCKDIR', sorted(os.listdir(_d)))\n")


@pytest.fixture(scope="module")
def review(tmp_path_factory):
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")
    root = tmp_path_factory.mktemp("review")
    course = H.make_course(root / "course")
    subs, out = root / "subs", root / "out"

    def honest():
        return H.honest(course, A, NB)

    students = {"aaa_honest": honest(), "zzz_honest": honest(), "solution-check": honest()}
    # 4: the last cell prints ~400 kB of base64 (a file carried out through feedback)
    students["exfil"] = _append(honest(), "fixture_rows",
                                "import base64, os\nprint(base64.b64encode(os.urandom(300_000)).decode())\n")
    # 5: scripts in markdown and in output metadata
    xss = honest()
    xss.cells.insert(1, new_markdown_cell(XSS_MARKDOWN))
    xss.cells.append(new_code_cell(XSS_CODE))
    students["xss"] = xss
    # 6a: a folder left in the kernel's socket folder; 6b: the worker's log through fd 2
    students["socket_litter"] = _append(honest(), "fixture_rows", _socket_dir_code())
    students["log_truncate"] = _append(honest(), "fixture_rows", (
        # every regular file the kernel holds open that is not its own (/tmp, its folder)
        "import os, stat\n_hit = []\n"
        "for _fd in sorted(int(f) for f in os.listdir('/proc/self/fd')):\n"
        "    try:\n"
        "        _path = os.readlink(f'/proc/self/fd/{_fd}')\n"
        "        if stat.S_ISREG(os.fstat(_fd).st_mode) and not _path.startswith(('/tmp/', os.getcwd())):\n"
        "            os.write(_fd, b'FD2-MARKER-FROM-STUDENT'); os.ftruncate(_fd, 0); _hit.append(_path)\n"
        "    except OSError:\n"
        "        pass\n"
        "print('FILES_HELD', _hit)\n"))
    # 6c: 1 GB written to the working folder
    students["disk_filler"] = _append(honest(), "fixture_rows", (
        "_chunk = b'x' * 2**20\n_written = 0\n"
        "try:\n"
        "    with open('filler.bin', 'wb') as _f:\n"
        "        for _ in range(1024):\n"
        "            _f.write(_chunk); _f.flush(); _written += 1\n"
        "except OSError as _e:\n"
        "    print('DISK', type(_e).__name__, _e.errno)\n"
        "print('WROTE_MB', _written)\n"
        "os.remove('filler.bin')\n"))
    # 7: 300 MB printed, in 1 MB lines
    students["big_printer"] = _append(honest(), "fixture_rows",
                                      "for _ in range(300):\n    print('y' * 2**20)\n")
    # 8a: an honest answer that warns: stderr inside the test cells
    warns = honest()
    H.cell(warns, "fixture_double").source = (
        "import warnings, logging\n"
        "def double(x):\n"
        "    warnings.warn('converting a list to an array', UserWarning)\n"
        "    logging.warning('double() was called')\n"
        "    return 2 * np.asarray(x, dtype=float)\n")
    students["warns"] = warns
    # 10: saved by Colab (every nbgrader metadata gone); a cell copied from another assignment
    colab = honest()
    for c in colab.cells:
        c.metadata.pop("nbgrader", None)
    students["colab"] = colab
    foreign = honest()
    stray = new_code_cell("print('from another assignment')")
    stray.metadata["nbgrader"] = {"grade": True, "grade_id": "other_assignment_tests", "locked": True,
                                  "points": 4, "schema_version": 3, "solution": False, "task": False}
    foreign.cells.insert(3, stray)
    students["foreign_cell"] = foreign
    # 10b (found blind): an answer cell re-marked as a graded cell with points; nbgrader refuses such
    # a notebook, which cost the student every point
    claims = honest()
    H.cell(claims, "fixture_double").metadata["nbgrader"].update(grade=True, points=3, locked=True)
    students["answer_claims_points"] = claims

    for name, nb in students.items():
        H.write_student(subs, name, A, NB, nb)
    proc = H.grade(subs, out, course, "--jobs", "1", "--timeout", "120", "--wall", "300")
    k = type("Review", (), {})()
    k.root, k.course, k.subs, k.out, k.proc = root, course, subs, out, proc
    k.grades = H.grades(out)
    yield k


def score(k, student):
    row = k.grades[(student, A)]
    return float(row["score"]) if row["score"] else None


def feedback(k, student):
    return (k.out / "feedback" / student / A / "fixture.html").read_text()


def test_batch_finishes(review):
    assert review.proc.returncode == 0, review.proc.stderr[-3000:]


@pytest.mark.parametrize("student", ["aaa_honest", "zzz_honest", "solution-check"])
def test_honest_students_before_and_after_keep_full_marks(review, student):
    # 8c: `solution-check` is an ordinary student id now: it is graded and listed
    assert review.grades[(student, A)]["status"] == "graded"
    assert score(review, student) == FULL
    assert H.problems(review.out, student) == []


def test_item4_feedback_output_is_capped_per_cell_and_says_so(review):
    from autograder.redact import CELL_TEXT
    assert score(review, "exfil") == FULL
    html = feedback(review, "exfil")
    runs = re.findall(r"[A-Za-z0-9+/=]{200,}", html)
    assert runs and max(len(r) for r in runs) <= CELL_TEXT, [len(r) for r in runs]
    assert f"feedback shows at most {CELL_TEXT:,} characters of output per cell" in html


def test_item5_feedback_page_has_no_live_script(review):
    assert score(review, "xss") == FULL
    html = feedback(review, "xss")
    live = _live_markup(html)
    assert live == [], live
    assert "onerror=window.__pwned" in html  # the code is still shown, as escaped text
    assert "<table" in html and "Heading stays" in html and "\\sqrt{d_k}" in html
    assert 'src="data:image/png;base64,' in html
    assert "Content-Security-Policy" in html


def _live_markup(page):
    """Elements and attributes of a page that could run script or navigate."""
    from html.parser import HTMLParser
    found = []

    class Scan(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag in ("script", "iframe", "svg", "object", "embed", "meta", "form", "base", "link"):
                if not (tag == "meta" and dict(attrs).keys() <= {"charset", "http-equiv", "content"}
                        and dict(attrs).get("http-equiv", "").lower() in ("", "content-security-policy")):
                    found.append(tag)
            for name, value in attrs:
                if name.startswith("on") or "javascript:" in (value or "").lower().replace(" ", ""):
                    found.append(f"{tag} {name}={value}")
    Scan().feed(page)
    return found


def test_item6a_litter_in_the_socket_folder_reaches_no_later_student(review):
    assert "leftover-dir" in H.outputs_text(H.graded_notebook(review.out, A, "socket_litter", NB))
    assert score(review, "socket_litter") == FULL
    assert score(review, "zzz_honest") == FULL  # graded after it, on the same worker and slot


def test_item6b_kernel_cannot_reach_the_workers_log(review):
    text = H.outputs_text(H.graded_notebook(review.out, A, "log_truncate", NB))
    assert "FILES_HELD []" in text, text[-500:]
    logs = list((review.out / ".work").glob("worker*.log"))
    assert logs
    assert all("FD2-MARKER-FROM-STUDENT" not in p.read_text(errors="replace") for p in logs)
    assert score(review, "log_truncate") == FULL


def test_item6c_scratch_is_bounded_and_deleted(review):
    text = H.outputs_text(H.graded_notebook(review.out, A, "disk_filler", NB))
    assert "DISK OSError 28" in text  # ENOSPC from the private, size-limited working folder
    wrote = int(re.search(r"WROTE_MB (\d+)", text).group(1))
    assert wrote <= 300
    assert score(review, "disk_filler") == FULL
    shards = review.out / ".work" / "shards" / A
    assert not list(shards.glob("*/scratch")) and not list(shards.glob("*/submitted"))
    sizes = sum(p.stat().st_size for p in review.out.rglob("*") if p.is_file())
    assert sizes < 100 * 2**20, sizes


def test_item7_printing_hundreds_of_megabytes_costs_the_worker_little(review):
    from autograder.execute import CUT_NOTE
    result = json.loads((review.out / ".work" / "shards" / A / "big_printer" / "result.json").read_text())
    assert score(review, "big_printer") == FULL
    # 300 MB printed; before the fix the worker held all of it (several times over)
    assert result["worker_peak_rss_mb"] < 1024, result["worker_peak_rss_mb"]
    text = H.outputs_text(H.graded_notebook(review.out, A, "big_printer", NB))
    assert len(text) < 8 * 2**20  # what was kept: the budget, or less when frames were refused
    assert CUT_NOTE.split("{")[0] in text or text.count("y" * 2**20) < 4


def test_item8a_warnings_in_test_cells_cost_no_points(review):
    assert score(review, "warns") == FULL
    rows = [r for r in H.read_csv(review.out / "grades_by_cell.csv") if r["student_id"] == "warns"]
    assert all(r["score"] == r["max_score"] for r in rows), rows


def test_item10_colab_notebook_is_restored_and_graded(review):
    assert review.grades[("colab", A)]["status"] == "graded"
    assert score(review, "colab") == FULL
    said = H.problems(review.out, "colab")
    assert any("lost nbgrader's cell metadata" in p for p in said), said
    assert not any("KeyError" in p for p in said)


def test_item10_cell_from_another_assignment_is_named_and_the_rest_graded(review):
    assert score(review, "foreign_cell") == FULL
    said = H.problems(review.out, "foreign_cell")
    assert any("'other_assignment_tests' does not belong to this notebook" in p for p in said), said


def test_item10b_an_answer_cell_that_claims_points_is_graded_as_released(review):
    row = review.grades[("answer_claims_points", A)]
    assert row["status"] == "graded", H.problems(review.out, "answer_claims_points")
    assert score(review, "answer_claims_points") == FULL and float(row["max_score"]) == FULL, row
    said = H.problems(review.out, "answer_claims_points")
    assert any("'fixture_double' had its nbgrader settings changed" in p for p in said), said


@pytest.mark.browser
def test_item5_no_script_runs_in_a_real_browser(review, tmp_path):
    """Chromium opens the hostile student's feedback page: no dialog, no global, no navigation.
    The same payloads unsanitized do fire, so the harness would notice."""
    import pathlib
    from playwright.sync_api import sync_playwright
    from tests.browser.lab import CHROMIUM, CHROMIUM_FLAGS
    if not pathlib.Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing (make test-tools installs it)")
    page_path = tmp_path / "feedback.html"
    shutil.copyfile(review.out / "feedback" / "xss" / A / "fixture.html", page_path)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            def visit(load):
                page = browser.new_page()
                dialogs, navigations = [], []
                page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
                page.on("framenavigated", lambda f: navigations.append(f.url))
                load(page)
                page.wait_for_timeout(1500)  # a refresh of 0 s or an onerror would have fired
                if page.locator("#jslink[href]").count():
                    page.click("#jslink")
                    page.wait_for_timeout(500)
                pwned = page.evaluate("() => window.__pwned || null")
                return page, dialogs, navigations, pwned

            payloads = [line for line in XSS_MARKDOWN.split("\n\n", 3)[3].splitlines()
                        if "refresh" not in line]  # a navigation would end this check early
            raw = "<html><body>" + "\n".join(payloads) + "</body></html>"
            _, dialogs, _, pwned = visit(lambda pg: pg.set_content(raw))
            assert dialogs and pwned, "the harness must see the unsanitized payloads run"

            page, dialogs, navigations, pwned = visit(lambda pg: pg.goto(page_path.as_uri()))
            assert dialogs == [] and pwned is None
            assert page.url == page_path.as_uri()
            assert all(url == page_path.as_uri() for url in navigations), navigations
            assert page.locator("table").count() >= 1
            assert "Heading stays" in page.inner_text("body")
            assert page.locator("img[src^='data:image/png']").count() >= 1
        finally:
            browser.close()
