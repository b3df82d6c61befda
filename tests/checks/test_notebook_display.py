"""In a real kernel, a failed check shows one sentence and nbgrader still sees an error."""
import nbformat

from course_utils.kernel_messages import notebook_client


def run(cells):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook_client(nb, timeout=60, kernel_name="python3", allow_errors=True).execute()
    return nb


def test_grading_error_is_one_sentence_and_still_an_error():
    nb = run(["import course_utils.grading as grading", "grading.assert_true(False, 'your weights do not sum to one.')"])
    (output,) = nb.cells[1].outputs
    assert output.output_type == "error"
    assert output.ename == "GradingError"
    assert len(output.traceback) == 1 and "your weights do not sum to one." in output.traceback[0]


def test_other_errors_keep_their_traceback():
    nb = run(["import course_utils.grading as grading", "def f():\n    return 1 / 0\nf()"])
    (output,) = nb.cells[1].outputs
    assert output.ename == "ZeroDivisionError" and len(output.traceback) > 1


def test_tampering_in_a_kernel_is_reported():
    nb = run(["import course_utils.grading as grading\nimport numpy as np",
              "np.allclose = lambda *a, **k: True",
              "grading.assert_close(np.zeros(2), np.ones(2))"])
    (output,) = nb.cells[2].outputs
    assert output.ename == "TamperError" and "numpy.allclose" in output.evalue
