"""The numeric tolerance of nbval: a CPU's rounding passes, a worse model, a changed table or text
fails; and no stored output of the course carries a tolerance loose enough to hide a 2 % drop."""
import os
import pathlib
import subprocess
import sys

import nbformat
import pytest

from tests import nbval_tolerance as tol

ROOT = pathlib.Path(__file__).resolve().parents[1]
ACCURACY = {"abs": 0.005}


@pytest.mark.parametrize("new, stored, spec, expected", [
    ("0.9919", "0.9917", ACCURACY, True),       # another CPU's rounding
    ("0.9717", "0.9917", ACCURACY, False),      # a model that trains 2 % worse
    ("-6.0061", "-6.0059", {"abs": 1e-3}, True),
    ("-6.0161", "-6.0059", {"abs": 1e-3}, False),
    ("0.8712", "0.8700", {"rel": 1e-3}, False),  # 0.14 % off a loss with a 0.1 % tolerance
    ("0.8708", "0.8700", {"rel": 1e-3}, True),
    ("992", "991", ACCURACY, False),            # integers stay exact unless asked for
    ("992", "991", {"abs": 2, "integers": True}, True),
    ("nan", "0.5", ACCURACY, False),
])
def test_within(new, stored, spec, expected):
    assert tol.within(new, stored, spec.get("abs", 0), spec.get("rel", 0), spec.get("integers", False)) is expected


def test_align_replaces_only_the_numbers_within_tolerance():
    stored = "held-out accuracy: 0.9917 after 600 steps (loss 0.0312)\n"
    assert tol.align("held-out accuracy: 0.9919 after 600 steps (loss 0.0312)\n", stored, ACCURACY) == stored
    worse = "held-out accuracy: 0.9717 after 600 steps (loss 0.0312)\n"
    assert tol.align(worse, stored, ACCURACY) == worse
    # Words or the count of numbers differ: nothing is touched, nbval shows the whole difference.
    other_words = "held-out exact match: 0.9919 after 600 steps (loss 0.0312)\n"
    assert tol.align(other_words, stored, ACCURACY) == other_words
    one_more = "held-out accuracy: 0.9919 after 600 steps (loss 0.0312) 0.5\n"
    assert tol.align(one_more, stored, ACCURACY) == one_more


def test_a_table_keeps_its_exact_parts():
    stored = "fraction   ViT    CNN\n 10 %   0.822  0.914\n100 %   0.992  0.989\n"
    wobble = "fraction   ViT    CNN\n 10 %   0.823  0.913\n100 %   0.992  0.989\n"
    assert tol.align(wobble, stored, {"abs": 0.005}) == stored
    changed_row = "fraction   ViT    CNN\n 20 %   0.823  0.913\n100 %   0.992  0.989\n"
    assert tol.align(changed_row, stored, {"abs": 0.005}) != stored


def test_a_malformed_tolerance_is_an_error_not_an_exact_comparison():
    with pytest.raises(ValueError, match="nbval_tolerance"):
        tol.validate_spec({"absolute": 0.1}, "cell 3")
    with pytest.raises(ValueError, match="non-negative"):
        tol.validate_spec({"abs": -1}, "cell 3")


def _notebook(path, printed_now, stored_output, tolerance):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(f"print({printed_now!r})", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored_output)]
    if tolerance is not None:
        cell.metadata[tol.KEY] = tolerance
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.mark.slow
@pytest.mark.parametrize("printed_now, tolerance, passes", [
    ("accuracy: 0.9919", ACCURACY, True),
    ("accuracy: 0.9717", ACCURACY, False),   # 2 % worse: caught
    ("accuracy: 0.9919", None, False),       # no tolerance: exact, as before
    ("accuracy (train): 0.9917", ACCURACY, False),  # the text changed
])
def test_nbval_with_the_plugin(tmp_path, printed_now, tolerance, passes):
    """The plugin inside a real nbval run, on a one-cell notebook whose stored output says
    'accuracy: 0.9917'."""
    path = tmp_path / "nb.ipynb"
    _notebook(path, printed_now, "accuracy: 0.9917\n", tolerance)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.nbval_tolerance", "-p", "no:cacheprovider",
         "-p", "no:xdist", "--nbval", "--nbval-current-env", "-q", str(path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert (result.returncode == 0) is passes, result.stdout[-3000:] + result.stderr[-2000:]


def _last_digit(token):
    """The value of one unit in the last printed digit: 0.0001 for '0.9917', 1e-05 for '1.5e-04'."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 10.0 ** (int(exponent or 0) - decimals)


def _tolerant_cells():
    for path in sorted(ROOT.glob("solutions/[0-9][0-9]_*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)  # joins the stored lists of lines into strings
        for index, cell in enumerate(nb.cells):
            if tol.KEY in cell.get("metadata", {}):
                yield pytest.param(path, index, cell, id=f"{path.parent.name}-cell{index}")


@pytest.mark.parametrize("path, index, cell", list(_tolerant_cells()))
def test_no_tolerance_hides_a_two_percent_change(path, index, cell):
    """Every number a tolerant cell prints must fail when it moves by 2 % of its value, or by 2
    points (0.02) for numbers below 1 such as accuracies: the tolerance absorbs a CPU's rounding,
    never a model that trains worse or a changed result."""
    spec = cell["metadata"][tol.KEY]
    tol.validate_spec(spec, f"{path.name} cell {index}")
    numbers = [token for output in cell.get("outputs", []) for container, key in tol._texts(output)
               for token in tol.NUMBER.findall(container[key])]
    assert numbers, f"{path.name} cell {index} has a tolerance but prints no number"
    for token in numbers:
        value = float(token)
        if tol._is_integer(token) and not spec.get("integers"):
            continue  # integers are compared exactly anyway
        delta = 0.02 * max(abs(value), 1.0)
        if delta < 2 * _last_digit(token):
            continue  # a change this small is below what the number's printed digits can show
        for moved in (value - 0.999 * delta, value + 0.999 * delta):  # a tolerance of exactly delta is too loose
            assert not tol.within(f"{moved:.6g}", token, spec.get("abs", 0), spec.get("rel", 0),
                                  spec.get("integers", False)), (
                f"{path.name} cell {index}: its tolerance {spec} would accept {moved:.6g} for {token}")
