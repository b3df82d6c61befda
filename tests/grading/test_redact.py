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
