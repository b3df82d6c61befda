"""The one owner of the IPython shell and the course's hooks in it
(course_utils/grading/ipython_hooks.py), in a real shell: a hook runs when each cell ends, is
registered once however often it is asked for, can be removed, and nothing happens outside IPython."""
import pytest
from IPython.core.interactiveshell import InteractiveShell

from course_utils.grading import ipython_hooks, parts

NAME = "tests: count cell ends"


@pytest.fixture
def shell():
    shell = InteractiveShell.instance()
    yield shell
    ipython_hooks.remove_cell_end(NAME)


def _ours(shell, callback):
    return sum(1 for c in shell.events.callbacks["post_run_cell"] if c is callback)


def test_a_hook_runs_at_each_cell_end_once_however_often_it_is_registered(shell):
    ends = []

    def count(result):
        ends.append(result.info.raw_cell)

    for _ in range(3):  # a cell that installs it, run three times
        assert ipython_hooks.on_cell_end(NAME, count)
    assert _ours(shell, count) == 1
    shell.run_cell("x = 1")
    assert ends == ["x = 1"]


def test_a_new_callback_under_the_same_name_replaces_the_old(shell):
    ends = []
    ipython_hooks.on_cell_end(NAME, lambda result: ends.append("old"))
    ipython_hooks.on_cell_end(NAME, lambda result: ends.append("new"))  # e.g. the module reloaded
    shell.run_cell("pass")
    assert ends == ["new"]


def test_a_removed_hook_no_longer_runs(shell):
    ends = []

    def count(result):
        ends.append(1)

    ipython_hooks.on_cell_end(NAME, count)
    assert ipython_hooks.remove_cell_end(NAME)
    assert ipython_hooks.remove_cell_end(NAME)  # removing twice is fine
    shell.run_cell("pass")
    assert ends == [] and _ours(shell, count) == 0


def test_outside_ipython_nothing_happens(monkeypatch):
    monkeypatch.setattr("IPython.get_ipython", lambda: None)
    assert ipython_hooks.running_shell() is None
    assert ipython_hooks.on_cell_end(NAME, print) is False
    assert ipython_hooks.remove_cell_end(NAME) is False


def test_use_correct_gives_the_students_piece_back_when_the_cell_ends_and_hooks_once(shell):
    shell.run_cell("import numpy as np\n"
                   "def softmax(x, axis=-1):\n    return x  # the student's own, wrong\n"
                   "def attention(q):\n    return softmax(q)")
    cell = ("from course_utils.grading import parts\n"
            "parts.use_correct(attention, {'softmax': 'Exercise 1'})\n"
            "inside = float(attention(np.array([0.0, 0.0])).sum())")
    for _ in range(2):  # the test cell run twice
        shell.run_cell(cell)
        assert shell.user_ns["inside"] == pytest.approx(1.0)  # a correct softmax in place
        assert shell.user_ns["softmax"](5) == 5  # the student's own is back
    assert _ours(shell, parts._give_back) == 1
