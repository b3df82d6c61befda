"""The tamper guard records PyTorch's originals when PyTorch is imported, not before.

Each case runs in a fresh interpreter: this test process has PyTorch loaded long before
`course_utils.grading`, which is the other order (covered by test_guards.py).
"""
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # a fresh interpreter each, some importing PyTorch


def run(code):
    """Run `code` after the fixture notebook's setup line; return what it printed."""
    setup = "import numpy as np\nimport course_utils.grading as grading\nimport sys\n"
    done = subprocess.run([sys.executable, "-c", setup + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_notebook_without_pytorch_never_loads_it():
    out = run("""
        grading.assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
        grading.assert_shape(np.ones(3), (3,))
        print("torch" in sys.modules)
    """)
    assert out.split() == ["False"]


@pytest.mark.parametrize("entry", ["torch.allclose", "torch.equal", "torch.testing.assert_close"])
def test_pytorch_imported_later_is_recorded_before_the_notebook_can_patch_it(entry):
    out = run(f"""
        import torch, torch.testing
        grading.assert_close(torch.ones(2), torch.ones(2))  # clean: nothing reported
        print(torch.__loader__ is torch.__spec__.loader, type(torch.__loader__).__name__)
        {entry} = lambda *a, **k: True
        try:
            grading.assert_close(torch.ones(2), torch.zeros(2))
        except grading.TamperError as e:
            print(e)
    """)
    first, verdict = out.splitlines()
    assert first == "True SourceFileLoader"  # PyTorch saw its own loader, not the guard's wrapper
    assert f"reassigned {entry}." in verdict


def test_the_recording_finder_is_gone_once_pytorch_is_recorded():
    out = run("""
        print(any(type(f).__name__ == "_RecordOnImport" for f in sys.meta_path))
        import torch
        print(any(type(f).__name__ == "_RecordOnImport" for f in sys.meta_path))
    """)
    assert out.split() == ["True", "False"]


def test_pytorch_loaded_around_the_finder_fails_every_check():
    out = run("""
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_RecordOnImport"]
        import torch
        torch.allclose = lambda *a, **k: True
        for args in [(np.ones(2), np.ones(2)), (torch.ones(2), torch.ones(2))]:
            try:
                grading.assert_close(*args)
                print("passed")
            except grading.TamperError as e:
                print(e)
    """)
    lines = out.splitlines()
    assert len(lines) == 2 and "passed" not in out
    assert all("torch.allclose" in line and "torch.testing.assert_close" in line for line in lines)
