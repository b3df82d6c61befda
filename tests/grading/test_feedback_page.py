"""The feedback page a student reads (issue 29 item 1): diagnoses wrap, formulas are MathML,
a summary opens the page, and nothing a student wrote can run.

The unit tests render a small graded notebook with nbgrader's own feedback template (as
`generate_feedback` does, the gradebook's scores put in the cells' metadata by hand) and compare
the page before and after `feedback_page.improve`: each check fails on the old page. The browser
test grades a real submission and measures the page in Chromium at 1280 px.
"""
import html
import os
import pathlib
import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

import grading_helpers as H
from autograder import feedback_page, redact, sanitize
from real_class import REAL_CLASS_TIMEOUT, WRONG_SOFTMAX

LONG = ("the rows of softmax(x) should sum to one along axis -1 (over the keys), but the slice at "
        "(0,) sums to 1.758. They sum to one only when you divide by the sum along the same axis "
        "that you took the maximum over; check keepdims=True on both reductions.")
INTRO = r"""## 4. A softmax that does not overflow

$$\operatorname{softmax}(z)_j = \frac{e^{z_j}}{\sum_i e^{z_i}}$$

For very negative scores every $e^{z_i}$ underflows to $0$, and `$keep$ me` stays code.

    $$\operatorname{in\ a\ code\ block}$$
"""
EXERCISE = r"""### Exercise 1 · A stable softmax (2 points)

Write `softmax(x, axis=-1)`: $m = \max_i x_i$ and a broken one $\frac{1}{$ stays TeX.
"""
EXERCISE2 = "### Exercise 2 · Where the $n^2$ term takes over (1 point)\n\nAnswer below."


def _meta(grade_id, points=None, solution=False, grade=False, score=None):
    meta = {"grade_id": grade_id, "solution": solution, "grade": grade, "locked": not solution,
            "schema_version": 3, "task": False}
    if points is not None:
        meta["points"] = points
        meta["score"] = score
    return {"nbgrader": meta}


def graded_notebook(extra_markdown=""):
    cells = [
        new_markdown_cell(INTRO + extra_markdown),
        new_markdown_cell(EXERCISE),
        new_code_cell("def softmax(x, axis=-1):\n    e = np.exp(x - x.max())\n    return e / e.sum()\n",
                      metadata=_meta("ex1")),
        new_code_cell("grading.assert_sums_to_one(softmax(_x), axis=-1, name='the rows of softmax(x)', "
                      "hint='Divide by the sum along the same axis you took the maximum over.')\n"
                      "### BEGIN HIDDEN TESTS\nsecret_check_of_the_hidden_kind(softmax)\n### END HIDDEN TESTS",
                      metadata=_meta("ex1_tests", points=2, grade=True, score=0.0)),
        new_markdown_cell(EXERCISE2),
        new_code_cell("crossover = 1000", metadata=_meta("ex2")),
        new_code_cell("assert crossover == 1000", metadata=_meta("ex2_tests", points=1, grade=True, score=1.0)),
    ]
    cells[3].outputs = [new_output("error", ename="GradingError", evalue=LONG, traceback=[
        "\x1b[0;31mGradingError\x1b[0m", "secret_check_of_the_hidden_kind(softmax)"])]
    cells[3].execution_count = 2
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    redact.redact_notebook(nb, redact.hidden_lines(cells[3].source))
    return nb


def render(nb, score=1.0, max_score=3.0):
    """The page nbgrader's GenerateFeedback writes for `nb` (its template, its exporter)."""
    import nbgrader
    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config
    base = pathlib.Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    c = Config()
    c.HTMLExporter.template_name = "feedback"
    c.HTMLExporter.extra_template_basedirs = [str(base / "templates")]
    c.HTMLExporter.extra_template_paths = [str(base / "static" / "node_modules" / "bootstrap" / "dist" / "css")]
    c.HTMLExporter.sanitize_html = True  # as the worker configures it
    resources = {"nbgrader": {"notebook": "softmax", "score": score, "max_score": max_score,
                              "late_penalty": 0}}
    body, _ = HTMLExporter(config=c).from_notebook_node(nb, resources=resources)
    return body


ROWS = [{"notebook": "softmax", "grade_id": "ex1_tests", "score": 0.0, "max_score": 2.0},
        {"notebook": "softmax", "grade_id": "ex2_tests", "score": 1.0, "max_score": 1.0}]


@pytest.fixture(scope="module")
def pages():
    raw = render(graded_notebook())
    return {"old": sanitize.clean_page(raw),
            "new": sanitize.clean_page(feedback_page.improve(raw, ROWS))}


def _prose(page):
    """The text a reader sees outside code: no tags, no code/pre, no TeX annotations."""
    body = page[page.find("<body"):]
    body = re.sub(r"<annotation\b.*?</annotation>", "", body, flags=re.S)
    body = re.sub(r"<(pre|code)\b.*?</\1>", "", body, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def _style(page):
    return "\n".join(re.findall(r"<style[^>]*>(.*?)</style>", page, re.S))


def test_every_pre_wraps_in_the_page_style(pages):
    wraps = re.compile(r"white-space:\s*pre-wrap[^}]*overflow-wrap:\s*anywhere", re.S)
    assert not wraps.search(_style(pages["old"]))
    style = _style(pages["new"])
    assert wraps.search(style)
    rule = style[style.find("feedback_page.py"):]
    selectors = rule[:rule.find("{")]
    for selector in ("div.output_subarea pre", "div.input_area pre", "div.highlight pre"):
        assert selector in selectors


def test_display_and_inline_math_become_mathml(pages):
    old, new = _prose(pages["old"]), _prose(pages["new"])
    assert "$$" in old and r"\operatorname" in old and "$0$" in old
    assert "$$" not in new and r"\operatorname" not in new and "$0$" not in new
    assert '<math display="block">' in pages["new"] and '<math display="inline">' in pages["new"]
    assert "<mfrac>" in pages["new"] and "<msup>" in pages["new"]
    # the TeX stays as the formula's annotation (copyable, not drawn)
    assert '<annotation encoding="application/x-tex">\\operatorname{softmax}(z)_j' in pages["new"]


def test_code_is_left_alone_and_bad_tex_stays_escaped(pages):
    new = pages["new"]
    assert "<code>$keep$ me</code>" in new
    assert "$$\\operatorname{in\\ a\\ code\\ block}$$" in new  # an indented code block
    assert "$\\frac{1}{$" in new and "<math" not in new.split("$\\frac{1}{$")[0][-30:]


def test_summary_opens_the_page_with_title_points_and_diagnosis(pages):
    old, new = pages["old"], pages["new"]
    assert 'class="fb-summary"' not in old and LONG not in old.split('id="notebook"')[0]
    top = new.split('id="notebook"')[0]  # before the first cell
    rows = re.findall(r"<tr class=\"(fb-\w+)\">(.*?)</tr>", top, re.S)
    assert [cls for cls, _ in rows] == ["fb-failed", "fb-passed"]
    first, second = (html.unescape(re.sub(r"<[^>]+>", " ", r)) for _, r in rows)
    assert "Exercise 1 · A stable softmax (2 points)" in first and "ex1_tests" in first
    assert "0 / 2" in first and LONG in first and "GradingError" not in first
    assert "ex2_tests" in second and "1 / 1" in second and "passed" in second
    assert "<math" in rows[1][1] and "$n^2$" not in rows[1][1]  # the title's formula, drawn
    assert 'href="#ex1_tests"' in top


def test_summary_titles_each_cell_by_the_exercise_heading_over_it():
    """A Think first question is titled by its own heading, not by the exercise before it (the page
    used to keep the last "Exercise" heading), and a new section ends an exercise's title: the same
    reading as the report's, the platforms' and the progress table's (course_utils.grading.headings)."""
    nb = new_notebook(cells=[
        new_markdown_cell(EXERCISE),
        new_code_cell("x = 1", metadata=_meta("ex1_tests", points=2, grade=True, score=2.0)),
        new_markdown_cell("### Think first · How many weights? (1 point)"),
        new_code_cell("guess = 4", metadata=_meta("guess_tests", points=1, grade=True, score=1.0)),
        new_markdown_cell("## 5. What comes next"),
        new_code_cell("y = 2", metadata=_meta("later_tests", points=1, grade=True, score=1.0)),
    ])
    rows = feedback_page.summary_rows(render(nb))
    assert [(r["grade_id"], r["title"]) for r in rows] == [
        ("ex1_tests", "Exercise 1 · A stable softmax (2 points)"),
        ("guess_tests", "Think first · How many weights? (1 point)"),
        ("later_tests", None)]


def test_summary_points_come_from_the_gradebook_rows():
    raw = render(graded_notebook())
    rows = [dict(ROWS[0], score=1.5), ROWS[1]]
    top = feedback_page.improve(raw, rows).split('id="notebook"')[0]
    assert "1.5 / 2" in top
    # without rows, the page's own scores
    assert "0 / 2" in feedback_page.improve(raw).split('id="notebook"')[0]


def test_hidden_tests_stay_hidden(pages):
    assert "secret_check_of_the_hidden_kind" not in pages["new"]


@pytest.mark.parametrize("tex", [
    r"\text{<script>window.__pwned=1</script>}",
    r"\text{<img src=x onerror=alert(1)>}",
    r"x</math><script>window.__pwned=1</script><math>",
    r"\href{javascript:alert(1)}{x}",
    r"\mathrm{<img src=x onerror=alert(1)>}",
    r'\text{" onmouseover="alert(1)}',
])
def test_nothing_inside_a_formula_runs(tex):
    for md in (f"Inline ${tex}$ here.", f"$${tex}$$"):
        page = sanitize.clean_page(feedback_page.improve(render(graded_notebook("\n\n" + md + "\n")), ROWS))
        body = page[page.find("<body"):].lower()
        assert "<script" not in body and not re.search(r"<[^>]*javascript:", body)
        assert not re.search(r"<[^>]*\son\w+\s*=", body), re.findall(r"<[^>]*\son\w+\s*=[^>]*>", body)
        hrefs = re.findall(r"\shref\s*=\s*[\"']([^\"']*)", body)
        assert hrefs and all(re.match(r"#|https?:|mailto:", h) for h in hrefs), hrefs


def test_converter_output_is_checked_not_trusted():
    assert feedback_page.tex_to_mathml(r"\frac{") is None
    # latex2mathml's own string output un-escapes text: `\text{<b>x</b>}` would be markup
    for tex in (r"\text{<b>x</b>}", r"\text{a < b & c}"):
        safe = feedback_page.tex_to_mathml(tex)
        assert "<b" not in safe and "&lt;" in safe and "<mtext>" in safe
    href = feedback_page.tex_to_mathml(r"\href{javascript:alert(1)}{x}")
    assert href.startswith("<math") and " href" not in href  # the attribute is dropped


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.timeout(REAL_CLASS_TIMEOUT)  # the first test to ask for the shared class grades it
def test_real_feedback_page_reads_in_chromium(real_class_graded, tmp_path):
    """A graded submission's page at 1280 px: no message is cut, no TeX is left in the prose,
    and the summary is at the top with the diagnosis. The submission is the shared real class's
    student on 05 whose softmax divides by the whole array's sum (real_class.WRONG_SOFTMAX): no
    batch of its own."""
    from playwright.sync_api import sync_playwright
    from tests.browser.lab import CHROMIUM, CHROMIUM_FLAGS
    if not pathlib.Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing (make test-tools installs it)")
    page_path = real_class_graded["out"] / "feedback" / WRONG_SOFTMAX / "05_self_attention" / "self_attention.html"
    assert page_path.exists(), H.problems(real_class_graded["out"], WRONG_SOFTMAX)
    # the same page with a diagnosis longer than the window, as a failing check may write
    # (beside the test's own files: the shared class's feedback folder is read by other tests)
    long_path = tmp_path / "long.html"
    text = page_path.read_text()
    assert "GradingError: " in text
    long_path.write_text(text.replace("GradingError: ", "GradingError: " + LONG + " ", 1))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            for path in (page_path, long_path):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(path.as_uri())
                cut = page.evaluate("""() => [...document.querySelectorAll(
                        '.output_error pre, .output_subarea pre, .input_area pre, .fb-summary td')]
                    .filter(e => e.scrollWidth > e.clientWidth)
                    .map(e => [e.scrollWidth, e.clientWidth, e.textContent.slice(0, 80)])""")
                assert cut == []
                messages = page.locator(".output_error pre").all_inner_texts()
                assert messages and any("GradingError" in m for m in messages)
                prose = page.evaluate("""() => [...document.querySelectorAll('.text_cell_render, .fb-summary')]
                    .map(e => e.innerText).join('\\n')""")
                assert "$$" not in prose and "\\operatorname" not in prose and "\\frac" not in prose
                assert page.locator("math").count() > 50
                summary = page.locator(".fb-summary")
                assert summary.count() == 1
                box = summary.bounding_box()
                assert box["y"] < 200 and box["x"] + box["width"] <= 1280
                first = page.locator(".fb-summary tbody tr").first.inner_text()
                assert "Exercise 1" in first and "0 / 2" in first and "axis" in first
                page.close()
            if os.environ.get("FEEDBACK_SCREENSHOT"):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(long_path.as_uri())
                page.screenshot(path=os.environ["FEEDBACK_SCREENSHOT"])
        finally:
            browser.close()


def test_dollars_that_are_not_math_stay_prose():
    page = feedback_page.improve(render(graded_notebook("\n\nIt costs \\$5 and \\$10; $x_1$ is math.\n")), ROWS)
    assert "It costs $5 and $10; <math" in page


@pytest.mark.parametrize("notebook", sorted(p.relative_to(H.REPO / "notebooks").as_posix()
                                            for p in (H.REPO / "notebooks").glob("*/*.ipynb")))
def test_every_course_formula_converts(notebook):
    """Each released notebook's page: formulas drawn, no TeX left in the prose."""
    nb = nbformat.read(H.REPO / "notebooks" / notebook, as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            meta["score"] = 0.0
    raw = render(nb)
    old, new = _prose(sanitize.clean_page(raw)), sanitize.clean_page(feedback_page.improve(raw))
    assert "$" in old
    assert new.count("<math") > 20
    left = re.findall(r".{0,30}(?:\$|\\[a-zA-Z]+).{0,30}", _prose(new))
    assert left == []
