"""A grading worker that grades a notebook without hidden checks never loads PyTorch.

Why: PyTorch's import costs about 2 CPU-seconds, in every worker. The probe's constants, the
class report's sentences and the lookup of a catalogue are all reachable without it; a tensor
arriving (a real notebook's hidden checks) loads it then. Each case runs in a fresh interpreter,
since this test process has PyTorch loaded already.
"""
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow


def loads_torch(code):
    """Whether running `code` in a fresh interpreter left PyTorch in sys.modules."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code) + "\nimport sys\nprint('torch' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1] == "True"


def test_the_workers_modules_do_not_load_pytorch():
    assert not loads_torch("import autograder.worker, autograder.execute, autograder.judge, autograder.report")


def test_a_notebook_without_a_catalogue_is_reported_and_cased_without_pytorch(tmp_path):
    nb = tmp_path / "plain.ipynb"
    nb.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    assert not loads_torch(f"""
        from autograder import hidden_cases, report
        assert report.load_catalogue("00_fixture") == {{}}
        outcome = report.classify({{"max_score": 1, "score": 0, "message": "GradingError: You summed the columns."}})
        assert outcome.kind != report.PASSED, outcome
        hidden_cases.write_cases([{str(nb)!r}], {str(tmp_path / "cases.pt")!r})
    """)
    assert (tmp_path / "cases.pt").read_bytes() == b""


def test_a_catalogue_and_its_cases_still_load_pytorch(tmp_path):
    """The other half: the same calls on a notebook with a catalogue do load it."""
    assert loads_torch('from autograder import report\nassert report.load_catalogue("05_self_attention")')
