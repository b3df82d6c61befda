"""Redaction on its own: hidden tests and their tracebacks never reach a student (fast)."""
import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

import grading_helpers  # noqa: F401
from autograder import redact

TEST_SOURCE = ("assert_close(f(1), 2)\n### BEGIN HIDDEN TESTS\n"
               "secret_value = reference.f(torch.randn(3))  # top secret\n"
               "### END HIDDEN TESTS")


def graded_nb(outputs):
    cell = new_code_cell(TEST_SOURCE, metadata={"nbgrader": {"grade": True, "solution": False,
                                                            "grade_id": "t", "points": 1}})
    cell.outputs = outputs
    return new_notebook(cells=[cell])


def test_hidden_lines_and_strip():
    assert redact.hidden_lines(TEST_SOURCE) == [
        "secret_value = reference.f(torch.randn(3))  # top secret"]
    stripped = redact.strip_hidden(TEST_SOURCE)
    assert "secret_value" not in stripped and redact.PLACEHOLDER in stripped
    assert stripped.startswith("assert_close(f(1), 2)")


def test_grading_error_keeps_only_its_sentence():
    nb = graded_nb([new_output("error", ename="GradingError",
                               evalue="Your weights sum to 2 on axis -1: did you forget softmax?",
                               traceback=["\x1b[0;31mGradingError\x1b[0m: Your weights ...",
                                          "secret_value = reference.f(torch.randn(3))  # top secret"])])
    secret = redact.hidden_lines(TEST_SOURCE)
    redact.redact_notebook(nb, secret)
    out = nb.cells[0].outputs[0]
    assert out.traceback == ["GradingError: Your weights sum to 2 on axis -1: did you forget softmax?"]
    assert "secret_value" not in nbformat.writes(nb)


def test_other_errors_are_one_line_and_quoting_outputs_are_removed():
    secret = redact.hidden_lines(TEST_SOURCE)
    nb = graded_nb([new_output("error", ename="NameError", evalue="name 'f' is not defined\nmore",
                               traceback=["long", "traceback", secret[0]])])
    answer = new_code_cell("print(In)", metadata={})
    answer.outputs = [new_output("stream", name="stdout", text="... " + secret[0] + " ...")]
    nb.cells.insert(0, answer)
    removed = redact.redact_notebook(nb, secret)
    assert removed == 1
    assert nb.cells[1].outputs[0].traceback == ["NameError: name 'f' is not defined"]
    assert "top secret" not in nbformat.writes(nb)


def test_long_output_is_cut():
    cell = new_code_cell("print('x' * 10**7)")
    cell.outputs = [new_output("stream", name="stdout", text="x" * 10**7)]
    nb = new_notebook(cells=[cell])
    redact.redact_notebook(nb, [])
    assert len(nb.cells[0].outputs[0].text) < 20_000


def test_leak_scan_sees_through_html_markup():
    secret = ["secret_value = reference.f(torch.randn(3))"]
    html = ('<span class="n">secret_value</span> <span class="o">=</span> '
            '<span class="n">reference</span>.f(torch.randn(3))')
    assert redact.leaks(html, secret) == secret
    assert redact.leaks("<p>nothing here</p>", secret) == []


# A hidden region that repeats the visible test's setup word for word (as 08's block test did):
# the repeated line is in the release, so it is no secret; only the hidden-only lines are.
SHARED = "_block = TransformerBlock(_d_model, 3, 20, norm_first=True)"
HIDDEN_ONLY = "for _seed in range(7):  # the hidden seeds"
REPEATING_SOURCE = (f"{SHARED}\nassert_close(_block(_x), _torch_layer(_x))\n"
                    f"### BEGIN HIDDEN TESTS\n{SHARED}\n{HIDDEN_ONLY}\n"
                    "    check_block_against_torch(_block, _seed)\n### END HIDDEN TESTS")


def _test_cell(source):
    return new_code_cell(source, metadata={"nbgrader": {"grade": True, "solution": False,
                                                        "grade_id": "block", "points": 1}})


def test_a_hidden_line_the_release_shows_is_not_secret_and_its_page_is_sent():
    from nbconvert import HTMLExporter
    source_nb = new_notebook(cells=[_test_cell(REPEATING_SOURCE)])
    release_nb = new_notebook(cells=[_test_cell(redact.strip_hidden(REPEATING_SOURCE))])
    secret = redact.secret_lines(source_nb, release_nb)
    assert SHARED not in secret
    assert HIDDEN_ONLY in secret and "check_block_against_torch(_block, _seed)" in secret
    # without the release every hidden line is secret (the backstop's worst case)
    assert SHARED in redact.secret_lines(source_nb)

    # the graded notebook (nbgrader restores the full test cell): its page quotes the shared line
    # in the visible part and the failure message; it is sent, with nothing of the hidden region
    graded = new_notebook(cells=[_test_cell(REPEATING_SOURCE)])
    graded.cells[0].outputs = [new_output("error", ename="AssertionError",
                                          evalue=f"at {SHARED}", traceback=[SHARED])]
    assert redact.redact_notebook(graded, secret) == 0
    page, _ = HTMLExporter().from_notebook_node(graded)
    assert "TransformerBlock" in page and "_seed" not in page
    assert redact.leaks(page, secret) == []
    # the text rule it replaces withheld this page from every student
    assert redact.leaks(page, redact.hidden_lines(REPEATING_SOURCE))

    # a hidden-only line quoted by an output is still removed, and still caught in a page
    answer = new_code_cell("print(In)")
    answer.outputs = [new_output("stream", name="stdout", text=f"{SHARED}\n{HIDDEN_ONLY}\n")]
    graded.cells.insert(0, answer)
    assert redact.redact_notebook(graded, secret) == 1
    assert HIDDEN_ONLY not in nbformat.writes(graded)
    assert redact.leaks(f"<pre>{HIDDEN_ONLY}</pre>", secret) == [HIDDEN_ONLY]


def test_no_release_shows_a_secret_line_of_its_solution():
    """Over the course's own notebooks: whatever a release shows (an untouched submission's
    page) never counts as a secret, so no page is withheld for text the student was given."""
    solutions = grading_helpers.REPO / "solutions"
    checked = 0
    for source in sorted(solutions.glob("*/*.ipynb")):
        release = grading_helpers.REPO / "notebooks" / source.parent.name / source.name
        source_nb, release_nb = nbformat.read(source, as_version=4), nbformat.read(release, as_version=4)
        secret = redact.secret_lines(source_nb, release_nb)
        hidden = {line for cell in source_nb.cells for line in redact.hidden_lines(cell.source)}
        assert secret and set(secret) <= hidden, source
        assert redact.leaks(redact.visible_text(release_nb), secret) == [], source
        checked += 1
    assert checked >= 12
