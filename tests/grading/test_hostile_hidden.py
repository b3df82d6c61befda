"""Scores a student cannot get without earning them (issue 17, items 1-3), on a real notebook.

One batch grades notebook 02 for a class made of two honest students (graded first and last)
and one student per way of gaming the hidden tests the review found, each a category:

1. the reference, one import away: imported, loaded by file path, bound as a default argument,
   reached through the hidden-test helper;
2. IPython hooks that swallow errors: an AST transformer wrapping every statement in
   try/except, an input transformer turning every later cell into `pass`, answers that call
   `sys.displayhook` before raising (nbgrader reads an execute_result before an error as a pass);
3. tamper-guard bypasses with wrong answers: the guard's saved originals rewritten along with
   the comparisons, `tamper.verify` replaced, `ndarray.all` patched through gc.get_referents,
   answers returning an object equal to everything, a fake module for the hidden checks.

Every hostile student's notebook holds no correct answer, so each must score 0 and every
honest one full marks. The grade comes from the grader's judge, outside the student's kernel.
"""
import json

import pytest

import grading_helpers as H

pytestmark = pytest.mark.slow

A, NB = "02_causal_cnn", "causal_cnn.ipynb"
FUNCTIONS = ("causal_conv1d", "receptive_field", "conv_output_length")
VALUE_QUESTION = "causal_cnn_layers_needed"  # the think-first answer, a number: hostile students leave it blank
REFERENCE_MODULE = "course_utils.reference.causal_cnn"

# Code put in the first answer cell (the later answer cells stay as released: blank stubs that
# raise NotImplementedError), or replacing every answer cell where the attack is the answer.
FIRST_CELL = {
    # 2: hooks
    "ast_swallow": """
import ast
class _Swallow(ast.NodeTransformer):
    def visit_Module(self, node):
        node.body = [ast.Try(body=[stmt], handlers=[ast.ExceptHandler(type=None, name=None,
                     body=[ast.Pass()])], orelse=[], finalbody=[]) for stmt in node.body]
        return ast.fix_missing_locations(node)
get_ipython().ast_transformers.append(_Swallow())
""",
    "input_pass": """
get_ipython().input_transformers_post.append(lambda lines: ["pass\\n"])
""",
    # 3: the guard rewritten, with the comparisons it protects
    "tamper_originals": """
import numpy, torch
from course_utils.grading import tamper
_yes = lambda *a, **k: True
for _entry, _fake in [("numpy:allclose", _yes), ("torch:allclose", _yes), ("torch:equal", _yes),
                      ("numpy:isclose", lambda a, b, *x, **k: numpy.ones(numpy.shape(a), bool))]:
    _module, _attr = _entry.split(":")
    setattr(__import__(_module), _attr, _fake)
    tamper._originals[_entry] = _fake
""",
    "replace_verify": """
import numpy
from course_utils.grading import tamper, checks
tamper.verify = lambda: None
checks.mismatch = lambda *a, **k: None
numpy.allclose = lambda *a, **k: True
numpy.isclose = lambda a, b, *x, **k: numpy.ones(numpy.shape(a), bool)
""",
    "ndarray_all": """
import gc, numpy
gc.get_referents(numpy.ndarray.__dict__)[0]["all"] = lambda self, *a, **k: True
gc.get_referents(numpy.ndarray.__dict__)[0]["any"] = lambda self, *a, **k: False
""",
    "fake_hidden_module": """
import sys, types
_fake = types.ModuleType("course_utils.grading.hidden")
class _Nothing:
    def __init__(self, *a): pass
    def check(self, *a, **k): return None
    diagnose = check
_fake.catalogue = _Nothing
sys.modules["course_utils.grading.hidden"] = _fake
import course_utils.grading
course_utils.grading.hidden = _fake
sys.modules["course_utils.reference.mistakes.causal_cnn"] = _fake
""",
}

EVERY_ANSWER = {
    # 1: the reference, reached four ways
    "reference_import": f"from {REFERENCE_MODULE} import *\n",
    "reference_by_path": """
import importlib.util, os, course_utils
_spec = importlib.util.spec_from_file_location(
    "_ref", os.path.join(os.path.dirname(course_utils.__file__), "reference", "causal_cnn.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)
{name} = _ref.{name}
""",
    "reference_default_argument": f"""
def {{name}}(*args, _ref=__import__("{REFERENCE_MODULE}", fromlist=["x"]), **kwargs):
    return getattr(_ref, "{{name}}")(*args, **kwargs)
""",
    "reference_via_hidden": """
from course_utils.grading import hidden
import importlib
_cat = hidden.catalogue("causal_cnn")
_ex = importlib.import_module("course_utils.reference.mistakes.causal_cnn").EXERCISES
{name} = [e.reference for e in _ex.values() if e.function_name == "{name}"][0]
""",
    # 2: a value shown before raising: nbgrader alone scores the cell from it
    "displayhook": """
def {name}(*args, **kwargs):
    import sys
    sys.displayhook(1)
    raise ValueError("not done")
""",
    # 3: an answer equal to everything
    "always_equal": """
class _Everything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __array__(self, *a, **k):
        import numpy
        return numpy.zeros(0)
    shape = property(lambda self: ())
    def __len__(self): return 0
    def __getattr__(self, name): return self
    def __call__(self, *a, **k): return self
    def __float__(self): return 0.0
    def __int__(self): return 0
def {name}(*args, **kwargs):
    return _Everything()
""",
}
HOSTILE = sorted(FIRST_CELL) + sorted(EVERY_ANSWER)


def _answer_cells(nb):
    """The answer cells that define a function (the think-first answer is a number)."""
    return [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
            and c.metadata["nbgrader"]["grade_id"] != VALUE_QUESTION]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    reason = H.sandbox_unavailable()
    if reason:
        pytest.skip(f"the grading sandbox cannot run here: {reason}")
    root = tmp_path_factory.mktemp("hidden")
    course = H.make_course(root / "course", source=H.REPO / "solutions", assignments=[A])
    subs = root / "subs"
    H.write_student(subs, "aaa_honest", A, NB, H.honest(course, A, NB))
    H.write_student(subs, "zzz_honest", A, NB, H.honest(course, A, NB))
    for name, code in FIRST_CELL.items():
        nb = H.release(course, A, NB)
        _answer_cells(nb)[0].source = code + "\n" + _answer_cells(nb)[0].source
        H.write_student(subs, name, A, NB, nb)
    for name, code in EVERY_ANSWER.items():
        nb = H.release(course, A, NB)
        for cell, function in zip(_answer_cells(nb), FUNCTIONS):
            assert f"def {function}(" in cell.source, "the notebook's answer cells moved"
            cell.source = code.replace("{name}", function)
        H.write_student(subs, name, A, NB, nb)
    out = root / "out"
    result = H.grade(subs, out, course, "--jobs", "2", "--timeout", "60", "--assignment", A,
                     "--gradebook", str(root / "gradebook.db"))
    assert result.returncode == 0, result.stderr[-4000:]
    return {"out": out, "grades": H.grades(out)}


def test_honest_students_before_and_after_keep_full_marks(graded):
    for student in ("aaa_honest", "zzz_honest"):
        row = graded["grades"][(student, A)]
        assert row["status"] == "graded" and float(row["score"]) == float(row["max_score"]) > 0, (
            student, H.problems(graded["out"], student))


@pytest.mark.parametrize("student", HOSTILE)
def test_gaming_the_hidden_tests_scores_nothing(graded, student):
    row = graded["grades"][(student, A)]
    assert row["status"] == "graded", H.problems(graded["out"], student)
    assert float(row["score"]) == 0, (
        f"{student} scored {row['score']}/{row['max_score']} with no correct answer")


def test_the_reference_is_not_in_the_sandbox(graded):
    nb = H.graded_notebook(graded["out"], A, "reference_by_path", NB)
    text = H.outputs_text(nb)
    assert "No such file or directory" in text and "reference" in text
    nb = H.graded_notebook(graded["out"], A, "reference_import", NB)
    assert "No module named 'course_utils.reference'" in H.outputs_text(nb)


@pytest.mark.parametrize("student", ["ast_swallow", "input_pass", "fake_hidden_module"])
def test_a_test_cell_whose_check_did_not_report_fails_with_a_sentence(graded, student):
    """Whatever the kernel printed, a test cell passes only on the grader's own verdict: where
    the kernel reported no error (errors swallowed, the cell replaced by `pass`), the grader's
    GradingError comes first, so nbgrader scores the cell zero."""
    nb = H.graded_notebook(graded["out"], A, student, NB)
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_tests")]
    assert len(tests) == len(FUNCTIONS) + 1  # and the think-first question, left blank
    for cell in tests:
        assert cell.outputs and cell.outputs[0]["output_type"] == "error", json.dumps(cell.outputs)[:500]
    if student == "fake_hidden_module":  # there the visible tests already fail in the kernel
        return
    for cell in tests:
        first = cell.outputs[0]
        assert first["ename"] == "GradingError", first
        if cell.metadata["nbgrader"]["grade_id"] == VALUE_QUESTION + "_tests":
            continue  # a blank number: the message depends on the attack, the zero does not
        if student == "input_pass":  # nothing of the test cell ran: no results reached the grader
            assert "did not run to the end" in first["evalue"], first
        else:  # the swallowed hidden check still sent the answer's results: judged as they are
            assert "raised NotImplementedError" in first["evalue"], first


def test_results_never_reach_the_notebook_or_the_feedback(graded):
    for student in ("aaa_honest", "always_equal"):
        nb = H.graded_notebook(graded["out"], A, student, NB)
        assert "attention-course.probe" not in H.outputs_text(nb)
    for html in (graded["out"] / "feedback").rglob("*.html"):
        assert "attention-course.probe" not in html.read_text()
