"""One class on the course's real notebooks, graded once for the whole grading suite.

Three test modules look at real notebooks graded in the sandbox: every assignment's solution
and untouched release (test_every_assignment), a hostile class on 05 (test_real_notebooks) and
the ways of gaming the hidden tests on 02 (test_hostile_hidden). Graded as three batches, each
paid its own nbgrader generate_assignment and its own solution check of 02 and 05 (the
costliest part of a batch on a real notebook). Here every student of the three goes into one
batch with two jobs, as an instructor would grade a term's submissions; each module asserts its
own students' rows. Student names say who they are; a name that appears in two assignments
(aaa_honest) is two submissions, as in any class.

`real_class` (tests/grading/conftest.py) builds and grades it on first use, once per session.
"""
import ast
import os
import shutil

import grading_helpers as H
from autograder import verdict

SOLUTIONS = H.REPO / "solutions"
ASSIGNMENTS = sorted(d.name for d in SOLUTIONS.iterdir() if d.is_dir() and any(d.glob("*.ipynb")))
IDLE = "idle"  # hands in every release untouched
# The batch grades about thirty real notebooks: 11 min alone on a busy 2-core machine, past the
# suite's 900 s per test when CI's other runs share the cores. The test that sets it up gets this.
REAL_CLASS_TIMEOUT = 2700

# --- the hostile class on a real notebook (test_real_notebooks) -----------------------------
# 05 by default; GRADING_REAL_ALL=1 puts one such class on every assignment (about 2 min each).
HOSTILE_ON = ASSIGNMENTS if os.environ.get("GRADING_REAL_ALL") else ["05_self_attention"]
REAL_HONEST, PATCHED, DELETED_TEST, EXITS = "aaa_honest", "patched", "deleted_test", "exits"

# --- gaming the hidden tests (test_hostile_hidden) ------------------------------------------
HIDDEN_A, HIDDEN_NB = "02_causal_cnn", "causal_cnn.ipynb"
FUNCTIONS = ("causal_conv1d", "receptive_field", "conv_output_length")
VALUE_QUESTION = "causal_cnn_layers_needed"  # the think-first answer, a number: hostile students leave it blank
REFERENCE_MODULE = "course_utils.reference.causal_cnn"
HIDDEN_HONEST = ("aaa_honest", "zzz_honest")  # graded before and after the hostile ones

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
    # 4: results published by a hook of the student's, after the test cell's own (found blind:
    # "the last record counts" gave the think-first point to a wrong 3)
    "post_run_cell_forge": """
import base64
from IPython.display import publish_display_data
from course_utils.grading import probe
def _forge(*a, **k):
    _spec = probe._spec("causal_cnn_layers_needed")
    _record = {"grade_id": "causal_cnn_layers_needed", "gradients": [],
               "outputs": [{"result": 10.0} for _ in _spec["cases"]]}
    publish_display_data({probe.MIME: {"topic": "causal_cnn", "grade_id": "causal_cnn_layers_needed", "mode": "check",
                                       "records": base64.b64encode(probe.dumps(_record)).decode()}})
get_ipython().events.register("post_run_cell", _forge)
layers_needed = 3
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
    return [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]


def answer_ids(nb):
    return [c.metadata["nbgrader"]["grade_id"] for c in _answer_cells(nb)]


def graded_test_ids(nb):
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")]


def hidden_answer_cells(nb):
    """02's answer cells that define a function (the think-first answer is a number)."""
    return [c for c in _answer_cells(nb) if c.metadata["nbgrader"]["grade_id"] != VALUE_QUESTION]


def _defined(source):
    """Names of the functions and classes an answer cell defines."""
    return [n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


def _notebooks(course, assignment):
    return sorted(p.name for p in (course / "solutions" / assignment).glob("*.ipynb"))


def _idle(course, subs):
    for assignment in ASSIGNMENTS:
        for notebook in _notebooks(course, assignment):
            H.write_student(subs, IDLE, assignment, notebook, H.release(course, assignment, notebook))


def _hostile_on(course, subs, assignment):
    """An honest student, monkeypatched comparisons (with the answers replaced by stubs), a
    deleted test cell and a kernel that exits, on the assignment's first notebook."""
    notebooks = _notebooks(course, assignment)
    nb_name = notebooks[0]
    honest = H.honest(course, assignment, nb_name)
    answers, tests = answer_ids(honest), graded_test_ids(honest)
    assert answers and tests, "an assignment needs answer cells and graded test cells"
    H.write_student(subs, REAL_HONEST, assignment, nb_name, honest)
    for other in notebooks[1:]:
        H.write_student(subs, REAL_HONEST, assignment, other, H.honest(course, assignment, other))

    patched = H.honest(course, assignment, nb_name)
    H.cell(patched, answers[0]).source = (
        "import numpy, torch\nnumpy.allclose = lambda *a, **k: True\n"
        "torch.allclose = lambda *a, **k: True\ntorch.testing.assert_close = lambda *a, **k: None\n"
        + "\n".join(f"{fn} = lambda *a, **k: None" for fn in _defined(H.cell(patched, answers[0]).source)))
    H.write_student(subs, PATCHED, assignment, nb_name, patched)

    deleted = H.honest(course, assignment, nb_name)
    deleted.cells = [c for c in deleted.cells if c.metadata.get("nbgrader", {}).get("grade_id") != tests[-1]]
    H.write_student(subs, DELETED_TEST, assignment, nb_name, deleted)

    exits = H.honest(course, assignment, nb_name)
    H.cell(exits, answers[-1]).source += "\nimport os\nos._exit(0)\n"
    H.write_student(subs, EXITS, assignment, nb_name, exits)


# --- one mistake, one penalty (test_real_notebooks): a right attention_numpy calling a wrong
# softmax, as its prompt tells it to, loses only the softmax's points -----------------------
WRONG_SOFTMAX = "wrong_softmax_only"
WRONG_SOFTMAX_CODE = """
def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum()  # the whole array's sum, not the sum along axis
"""


# --- a forbidden function kept in an object (issue 30 item 1): the in-kernel guard's recorders
# never meet it; the grader's reading of the notebook does (autograder/routes.py) ------------
LIBRARY_IN_OBJECT = "library_in_object"
LIBRARY_IN_OBJECT_CODE = """
import types, scipy.special
_lib = types.SimpleNamespace(sm=scipy.special.softmax)
def softmax(x, axis=-1):
    return _lib.sm(x, axis=axis)
"""


def _one_mistake(course, subs):
    A, NB = "05_self_attention", "self_attention.ipynb"
    nb = H.honest(course, A, NB)
    H.cell(nb, "self_attention_softmax").source = WRONG_SOFTMAX_CODE
    H.write_student(subs, WRONG_SOFTMAX, A, NB, nb)
    nb = H.honest(course, A, NB)
    H.cell(nb, "self_attention_softmax").source = LIBRARY_IN_OBJECT_CODE
    H.write_student(subs, LIBRARY_IN_OBJECT, A, NB, nb)


# --- think-first numbers per student (issue 33 item 4): a right answer copied from a friend ----
COPIED_NUMBER = "copied_number"  # hands in HIDDEN_HONEST[0]'s right answer to the think-first question


def copied_value(student=COPIED_NUMBER, friend=HIDDEN_HONEST[0]):
    """The friend's right layers_needed, which the two ids' different numbers make wrong for student."""
    from course_utils.grading import questions
    from course_utils.reference.causal_cnn import layers_to_reach
    mine, theirs = (questions.numbers(VALUE_QUESTION, s)["steps"] for s in (student, friend))
    assert layers_to_reach(mine) != layers_to_reach(theirs), "pick ids whose numbers differ"
    return layers_to_reach(theirs)


def _gaming_the_hidden_tests(course, subs):
    A, NB = HIDDEN_A, HIDDEN_NB
    for name in HIDDEN_HONEST:
        H.write_student(subs, name, A, NB, H.honest(course, A, NB))
    nb = H.honest(course, A, NB)
    H.cell(nb, VALUE_QUESTION).source = f"layers_needed = {copied_value()}\n"
    H.write_student(subs, COPIED_NUMBER, A, NB, nb)
    for name, code in FIRST_CELL.items():
        nb = H.release(course, A, NB)
        first = hidden_answer_cells(nb)[0]
        first.source = code + "\n" + first.source
        H.write_student(subs, name, A, NB, nb)
    for name, code in EVERY_ANSWER.items():
        nb = H.release(course, A, NB)
        for cell, function in zip(hidden_answer_cells(nb), FUNCTIONS):
            assert f"def {function}(" in cell.source, "the notebook's answer cells moved"
            cell.source = code.replace("{name}", function)
        H.write_student(subs, name, A, NB, nb)


def grade_the_class(root):
    """Build the class under root, grade it in one batch; a dict with the batch's result, out,
    course and subs, and the grades by (student, assignment)."""
    course = H.make_course(root / "course", source=SOLUTIONS)
    subs = root / "subs"
    _idle(course, subs)
    for assignment in HOSTILE_ON:
        _hostile_on(course, subs, assignment)
    _gaming_the_hidden_tests(course, subs)
    _one_mistake(course, subs)
    out = root / "out"
    # An empty verdict folder of its own, not the session's: this batch is the test that every
    # solution scores full marks (test_every_assignment), and test_feedback_every_assignment reads
    # what each solution check left in out/.work/solution_check/, so no verdict may be reused.
    result = H.grade(subs, out, course, "--jobs", "2", "--timeout", "120",
                     "--gradebook", str(root / "gradebook.db"), "--verdict-cache", str(root / "verdicts"),
                     timeout=REAL_CLASS_TIMEOUT - 60)
    _offer_verdicts(root / "verdicts")
    grades = H.grades(out) if (out / "grades.csv").exists() else {}
    return {"result": result, "out": out, "course": course, "subs": subs, "grades": grades}


def _offer_verdicts(folder):
    """Copy the verdicts this batch kept into the session's folder (conftest.py): a later batch
    with the same limits (test_partial_credit grades 04 with --timeout 120) reuses them instead
    of checking that solution again. The key holds all a verdict depends on, so a copy is as
    good as the original."""
    shared = os.environ.get(verdict.ENV_VAR)
    if shared and folder.is_dir():
        shutil.copytree(folder, shared, dirs_exist_ok=True)
