"""The contributors' tool for trying an answer nobody catalogued (tests/exercises/try_answer.py)."""
from tests.exercises import try_answer


def _verdicts(tmp_path, capsys, source):
    answer = tmp_path / "answer.py"
    answer.write_text(source)
    assert try_answer.main([str(answer)]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("causal_cnn_")]


def test_a_right_value_equal_to_the_solutions_own_is_still_tried(tmp_path, capsys):
    # 10 is the solution's answer too, and a small int is one object in Python: it must not be
    # taken for the solution's binding and skipped.
    assert _verdicts(tmp_path, capsys, "layers_needed = 10\n") == ["causal_cnn_layers_needed: PASSED"]


def test_a_wrong_value_fails_with_the_students_message(tmp_path, capsys):
    [line] = _verdicts(tmp_path, capsys, "layers_needed = 11\n")
    assert line.startswith("causal_cnn_layers_needed: FAILED: ") and "11" in line


def test_bound_names_are_read_from_the_top_level():
    source = "import numpy as np\nfrom math import sqrt\ndef f(x):\n    y = 1\n    return y\nclass C: pass\na, (b, c) = 1, (2, 3)\n"
    assert try_answer.bound_names(source) == {"np", "sqrt", "f", "C", "a", "b", "c"}
