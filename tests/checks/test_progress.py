"""The progress summary at the end of every notebook, in a real IPython shell: each exercise
passes, fails with its test's sentence, or has not run; an unanswered stub says so in a sentence."""
import json

import pytest
from IPython.core.interactiveshell import InteractiveShell

from course_utils.grading import GradingError, assert_answered, call_without, ipython_hooks, progress


def _notebook(tmp_path):
    def md(text):
        return {"cell_type": "markdown", "metadata": {}, "source": text}

    def code(text, grade_id=None, solution=False, points=0):
        meta = {"nbgrader": {"grade": bool(points), "solution": solution, "grade_id": grade_id,
                             "points": points}} if grade_id else {}
        return {"cell_type": "code", "metadata": meta, "source": text, "outputs": [], "execution_count": None}

    cells = [
        md("### Exercise 1 · A stable softmax (2 points)\n\nWrite it."),
        code("def f():\n    return 1", "ex_f", solution=True),
        code("assert f() == 1", "ex_f_tests", points=2),
        md("### Exercise 2 — think first (1 point)"),
        code("answer = 3", "ex_answer", solution=True),
        code("assert answer == 4, 'answer should be 4'", "ex_answer_tests", points=1),
        md("### Exercise 3 · never run (1 point)"),
        code("g = 1", "ex_g", solution=True),
        code("assert g == 1", "ex_g_tests", points=1),
    ]
    path = tmp_path / "topic.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path, cells


@pytest.fixture
def shell(monkeypatch):
    monkeypatch.setattr(progress, "_results", {})
    shell = InteractiveShell.instance()
    assert progress.install()
    yield shell
    ipython_hooks.remove_cell_end(progress.HOOK)


def test_each_exercise_passes_fails_or_has_not_run(shell, tmp_path, monkeypatch):
    path, cells = _notebook(tmp_path)
    for index in (1, 2, 4, 5):
        shell.run_cell(cells[index]["source"])
    monkeypatch.chdir(tmp_path)
    summary = progress.summary()
    assert [(title, status) for title, _, status, _ in summary.rows] == [
        ("Exercise 1 · A stable softmax (2 points)", "passes"),
        ("Exercise 2 — think first (1 point)", "fails"),
        ("Exercise 3 · never run (1 point)", "not run yet"),
    ]
    assert summary.rows[1][3] == "AssertionError: answer should be 4"
    assert summary.counts() == (1, 3, 2, 4)
    assert "1 of 3 exercises pass" in repr(summary) and "answer should be 4" in repr(summary)


def test_a_fixed_answer_is_seen_on_the_next_run(shell, tmp_path, monkeypatch):
    path, cells = _notebook(tmp_path)
    shell.run_cell("answer = 3")
    shell.run_cell(cells[5]["source"])
    assert progress.summary(str(path)).rows[1][2] == "fails"
    shell.run_cell("answer = 4")
    shell.run_cell(cells[5]["source"])
    assert progress.summary(str(path)).rows[1][2] == "passes"


def test_messages_are_escaped_in_html(shell, tmp_path):
    path, cells = _notebook(tmp_path)
    shell.run_cell("answer = '<img src=x onerror=alert(1)>'")
    shell.run_cell("assert answer == 4, answer")
    cells[5]["source"] = "assert answer == 4, answer"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    page = progress.summary(str(path))._repr_html_()
    assert "<img" not in page and "&lt;img" in page


def test_no_notebook_file_gives_a_sentence(shell, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert "Could not find" in repr(progress.summary())


def test_an_unanswered_think_first_answer_is_named():
    namespace = {"assert_answered": assert_answered}
    with pytest.raises(GradingError, match=r"`layers_needed` is not answered yet"):
        exec("assert_answered('layers_needed')", namespace)
    namespace["layers_needed"] = 10
    exec("assert_answered('layers_needed')", namespace)


def test_an_untouched_stub_is_not_answered_yet_and_other_errors_are_not():
    def stub(x):
        raise NotImplementedError()

    def wrong(x):
        raise NotImplementedError("my own message")

    with pytest.raises(GradingError, match=r"^`stub` is not answered yet: it still raised NotImplementedError"):
        call_without(stub, (1.0,))
    with pytest.raises(GradingError) as raised:
        call_without(wrong, (1.0,))
    assert "not answered yet" not in str(raised.value) and "my own message" in str(raised.value)


def test_show_displays_even_when_the_output_history_was_rebound(shell, tmp_path, monkeypatch):
    path, cells = _notebook(tmp_path)
    monkeypatch.chdir(tmp_path)
    shell.run_cell("import torch\n_oh = torch.zeros(3)")
    result = shell.run_cell("from course_utils.grading import progress\nprogress.show()")
    assert result.success, result.error_in_exec
    shell.run_cell("_oh = {}")


def test_a_bare_stub_shows_as_one_sentence_and_a_students_own_raise_as_usual(shell):
    from course_utils.grading.errors import install_notebook_display
    assert install_notebook_display()
    shown = []
    original = shell._showtraceback
    shell._showtraceback = lambda etype, value, stb: shown.append(stb)
    try:
        shell.run_cell("def f():\n    raise NotImplementedError()\nf()")
        assert len(shown) == 1 and len(shown[0]) == 1 and "not answered yet" in shown[0][0]
        shell.run_cell("raise NotImplementedError('my own reason')")
        assert len(shown) == 2 and "not answered yet" not in "".join(shown[1])
    finally:
        shell._showtraceback = original


def test_a_course_check_reads_as_its_sentence_and_other_errors_keep_their_name(shell, tmp_path):
    """The table quotes a GradingError's sentence alone (as Validate does), an unanswered stub as
    'not answered yet', and any other error with its name: 'AssertionError: ...'."""
    path, cells = _notebook(tmp_path)
    shell.run_cell("from course_utils.grading import GradingError")
    shell.run_cell("def f():\n    raise GradingError('your weights sum to one along axis 0:\\n  use axis=-1.')")
    shell.run_cell(cells[2]["source"])
    shell.run_cell("answer = 3")
    shell.run_cell(cells[5]["source"])
    shell.run_cell("def g():\n    raise NotImplementedError()\ng()")
    cells[8]["source"] = "g()"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    shell.run_cell("g()")
    messages = [row[3] for row in progress.summary(str(path)).rows]
    assert messages[0] == "your weights sum to one along axis 0: use axis=-1."
    assert messages[1] == "AssertionError: answer should be 4"
    assert messages[2].startswith("not answered yet:")
    assert not any("GradingError" in m or m.startswith("NotImplementedError") for m in messages), messages


def test_the_table_reads_from_the_left(shell, tmp_path):
    """JupyterLab right-aligns table cells unless told otherwise: every cell of the table says left."""
    import re

    path, cells = _notebook(tmp_path)
    shell.run_cell("answer = 3")
    shell.run_cell(cells[5]["source"])
    page = progress.summary(str(path))._repr_html_()
    cells_html = re.findall(r"<t[hd]( style='[^']*')?>", page)
    assert cells_html and all("text-align:left" in style for style in cells_html), page


def test_code_in_a_title_shows_as_code_and_stays_escaped():
    """`causal_conv1d` in a heading reads as code in the table, not as raw backticks; whatever
    the backticks hold is still escaped."""
    summary = progress.Summary([("Exercise 1 · `causal_conv1d` and `<b>` (2 points)", 2, "passes", "")])
    page = summary._repr_html_()
    assert "<code>causal_conv1d</code>" in page and "<code>&lt;b&gt;</code>" in page
    assert "`" not in page and "<b>`" not in page
