"""The grader's static reading of forbidden routes (autograder/routes.py).

Each attack category of issue 30 item 1 is put into a real solution notebook, in an answer cell
before the exercise's test cell, and must be found; the honest neighbours (every solution,
every second correct implementation, every honest wrong answer) must be read without a finding.
No kernel runs: this is the grader's reading of the text, which student code cannot reach.
"""
import ast
import functools
import importlib
import inspect
import pathlib

import nbformat
import pytest

from autograder import judge, routes

REPO = pathlib.Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((REPO / "solutions").glob("*/*.ipynb"))


def _test_cells(nb):
    for index, cell in enumerate(nb.cells):
        wanted = judge.expected(cell.source) if cell.cell_type == "code" else None
        if wanted:
            for grade_id in wanted[1]:
                yield index, judge._exercise(wanted[0], grade_id)


def _notebook(topic):
    return nbformat.read(next(p for p in SOLUTIONS if p.parent.name.endswith(topic)), 4)


def _with_answer(topic, grade_id, code):
    """The solution notebook with `code` as one more answer cell just before grade_id's test cell;
    returns (cells, index of the test cell, exercise)."""
    nb = _notebook(topic)
    index, exercise = next((i, e) for i, e in _test_cells(nb) if e.grade_id == grade_id)
    cell = nbformat.v4.new_code_cell(code)
    cell.metadata["nbgrader"] = {"solution": True, "grade": False, "locked": False, "grade_id": "extra"}
    nb.cells.insert(index, cell)
    return nb.cells, index + 1, exercise


def _finding(topic, grade_id, code):
    cells, index, exercise = _with_answer(topic, grade_id, code)
    return routes.finding(cells, index, exercise.function_name, exercise.forbidden)


# --- honest code: no finding ----------------------------------------------------------------

@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.parent.name)
def test_every_solution_is_read_without_a_finding(path):
    nb = nbformat.read(path, 4)
    for index, exercise in _test_cells(nb):
        assert routes.finding(nb.cells, index, exercise.function_name, exercise.forbidden) is None, exercise.grade_id


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.parent.name)
def test_every_solution_passes_the_graders_own_reading(path):
    """What the grader runs (judge.forbidden_route on each test cell, think-first ones included:
    a solution computing from grading.questions.numbers was refused when the course's helpers
    became off limits for every exercise)."""
    nb = nbformat.read(path, 4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and judge.expected(cell.source):
            assert judge.forbidden_route(nb.cells, index, cell.source) is None, (index, cell.source[:80])


def _honest_functions(prefix, table_name):
    """(exercise, function) of the table `table_name` of tests/exercises/<prefix>_<topic>.py, for
    exercises that forbid something."""
    out = []
    prefix, table_name_ = prefix, table_name
    for path in sorted((REPO / "tests" / "exercises").glob(f"{prefix}_*.py")):
        module = importlib.import_module(f"tests.exercises.{path.stem}")
        table = getattr(module, table_name_, {})
        topic = path.stem.split("_", 1)[1]
        catalogue = importlib.import_module(f"course_utils.reference.mistakes.{topic}").EXERCISES
        items = table.items() if isinstance(table, dict) else [(g, [f]) for g, f in table]
        for grade_id, functions in items:
            if grade_id not in catalogue or not catalogue[grade_id].forbidden:
                continue
            out += [(catalogue[grade_id], f) for f in functions if inspect.isfunction(f) or inspect.isclass(f)]
    return out


@functools.lru_cache(maxsize=None)
def _module_reader(module):
    source = inspect.getsource(module)
    imports = [ast.unparse(n) for n in ast.parse(source).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return imports, routes._StatementIndex([routes._CellText(0, source, readable=True)])


def _read_alone(exercise, function):
    """The finding for `function` written in a notebook cell of its own (its module's imports and
    helpers), then the exercise's name bound to it."""
    imports, reader = _module_reader(inspect.getmodule(function))
    # Only what this answer reaches: the module also holds other (hostile) answers, which a
    # student's notebook would not.
    reached = [ast.unparse(s.node) for s in reader.reach(function.__name__)]
    cells = [nbformat.v4.new_code_cell("\n".join(imports + reached[::-1])),
             nbformat.v4.new_code_cell(f"{exercise.function_name} = {function.__name__}")]
    return routes.finding(cells, len(cells), exercise.function_name, exercise.forbidden)


@pytest.mark.parametrize("prefix, table, least", [("alternatives", "ALTERNATIVES", 40),
                                                  ("uncatalogued", "NOT_WRONG", 1),
                                                  ("uncatalogued", "ACCEPTED", 1)])
def test_honest_answers_are_read_without_a_finding(prefix, table, least):
    """Second correct implementations, and the right answers written the way nobody catalogued."""
    found = []
    cases = _honest_functions(prefix, table)
    assert len(cases) >= least
    for exercise, function in cases:
        result = _read_alone(exercise, function)
        if result:
            found.append((exercise.grade_id, function.__name__, str(result)))
    assert not found


def test_a_demo_comparing_with_the_library_is_not_the_answer():
    """The same notebook may call the forbidden function outside the answer (a comparison)."""
    code = ("import scipy.special\nx = np.array([1.0, 2.0])\n"
            "print(softmax(x), scipy.special.softmax(x))\nscores = scipy.special.softmax(x)\n")
    assert _finding("05_self_attention", "self_attention_softmax", code) is None



def test_a_method_of_what_a_helper_returns_does_not_change_the_helper():
    """A scratch line calling a method of an answer's helper's result (`.item()`) leaves the
    helper as it was: reading it as a change put that line, and the course's training helpers of
    the cells it reads, in the answer's reach, failing an honest ablated_loss (notebook 14)."""
    code = (
        "def my_context_loss(logits, tokens, span):\n"
        "    return F.cross_entropy(logits[:, span:-1].reshape(-1, logits.shape[-1]), tokens[:, span + 1:].reshape(-1))\n"
        "print(my_context_loss(two_layers.models[0](clean), clean, SPAN).item())\n"
        "def ablated_loss(model, tokens, span, layer, head):\n"
        "    mask = torch.ones(len(model.layers), model.layers[0].num_heads)\n"
        "    mask[layer, head] = 0.0\n"
        "    return my_context_loss(model(tokens, head_mask=mask), tokens, span)\n")
    assert _finding("14_induction_heads", "induction_heads_ablation", code) is None


def test_a_helper_rewritten_through_what_it_returns_is_still_read():
    """...but a double-underscore method of the result may be the helper's own (`f` returning
    itself), so `helper(0).__setattr__("__code__", ...)` still changes `helper`."""
    code = ("import scipy.special\n"
            "def helper(x, axis=-1):\n    return helper\n"
            "def softmax(x, axis=-1):\n    return helper(x, axis)\n"
            "helper(0).__setattr__('__code__', scipy.special.softmax.__code__)\n")
    assert "scipy.special.softmax" in str(_finding("05_self_attention", "self_attention_softmax", code))

# --- attacks: one per category ----------------------------------------------------------------

ATTACKS = {
    "library kept in an object's attribute": ("05_self_attention", "self_attention_softmax", """
import types, scipy.special
_lib = types.SimpleNamespace(sm=scipy.special.softmax)
def softmax(x):
    return _lib.sm(x, axis=-1)
""", "scipy.special.softmax"),
    "library kept in a dict filled later": ("05_self_attention", "self_attention_softmax", """
import scipy.special as ss
_table = {}
_table.update(f=ss.softmax)
def softmax(x):
    return _table["f"](x, axis=-1)
""", "scipy.special.softmax"),
    "getattr with a constant name": ("05_self_attention", "self_attention_softmax", """
import scipy.special
def softmax(x):
    return getattr(scipy.special, "softmax")(x, axis=-1)
""", "scipy.special.softmax"),
    "getattr with a computed name": ("05_self_attention", "self_attention_softmax", """
import scipy.special
def softmax(x):
    return getattr(scipy.special, "soft" + "max")(x, axis=-1)
""", "computed name"),
    "the forbidden call in a thread": ("08_masking_transformer", "masking_transformer_masked_softmax", """
import threading
def masked_softmax(scores, mask):
    out = {}
    t = threading.Thread(target=lambda: out.update(r=torch.softmax(scores.masked_fill(~mask, float('-inf')), -1)))
    t.start(); t.join()
    return out["r"].nan_to_num(0.0)
""", "threading"),
    "the forbidden call in a thread a library helper starts": ("08_masking_transformer", "masking_transformer_masked_softmax", """
def masked_softmax(scores, mask):
    future = torch.jit.fork(torch.softmax, scores.masked_fill(~mask, float('-inf')), -1)
    return torch.jit.wait(future).nan_to_num(0.0)
""", "torch.jit.fork"),
    "a helper's thread started in another cell": ("08_masking_transformer", "masking_transformer_masked_softmax", """
_pending = torch.jit.fork(torch.softmax, torch.zeros(2, 2), -1)
""", "torch.jit.fork"),
    "a thread pool started in another cell": ("08_masking_transformer", "masking_transformer_masked_softmax", """
from concurrent.futures import ThreadPoolExecutor
POOL = ThreadPoolExecutor(1)
""", "concurrent.futures.ThreadPoolExecutor"),
    "torch function modes switched off": ("08_masking_transformer", "masking_transformer_masked_softmax", """
def masked_softmax(scores, mask):
    with torch._C.DisableTorchFunction():
        return _my_softmax(scores.masked_fill(~mask, float('-inf'))).nan_to_num(0.0)
""", "torch._C"),
    "widget function through an alias": ("02_causal_cnn", "causal_cnn_receptive_field", """
from course_utils.widgets.causal_cnn import valid_conv_stack, gradient_footprint, footprint_span
_measure = gradient_footprint
def receptive_field(kernel_sizes, dilations, strides=None):
    stack = valid_conv_stack(kernel_sizes, dilations, strides)
    return footprint_span(_measure(stack, 200))
""", "course_utils.widgets"),
    "widget function as a default argument": ("02_causal_cnn", "causal_cnn_receptive_field", """
import course_utils.widgets.causal_cnn as w
def receptive_field(kernel_sizes, dilations, strides=None, _span=w.footprint_span):
    return _span(w.gradient_footprint(w.valid_conv_stack(kernel_sizes, dilations, strides), 200))
""", "course_utils.widgets"),
    "a look-alike of the guard's internals": ("05_self_attention", "self_attention_softmax", """
def _recording(*args, **kwargs):
    pass
_recording.__module__ = "course_utils.grading.guards"
""", "__module__"),
    "the guard's internals replaced": ("05_self_attention", "self_attention_softmax", """
from course_utils.grading import guards as g
g._imported_directly = lambda fn, entries: []
""", "course_utils.grading"),
    "a library module changed": ("05_self_attention", "self_attention_softmax", """
import scipy.special
np.my_softmax = scipy.special.softmax
def softmax(x):
    return np.my_softmax(x, axis=-1)
""", "changes the module `np`"),
    "eval of a string": ("05_self_attention", "self_attention_softmax", """
def softmax(x):
    return eval("__import__('scipy.special').special.softmax")(x, axis=-1)
""", "eval"),
    "a script run into the notebook": ("05_self_attention", "self_attention_softmax", """
%run helper_softmax.py
""", "get_ipython"),
    "importing a file beside the notebook": ("05_self_attention", "self_attention_softmax", """
import helper_softmax
def softmax(x):
    return helper_softmax.f(x, axis=-1)
""", "helper_softmax"),
    "sys.modules": ("05_self_attention", "self_attention_softmax", """
import sys
def softmax(x):
    return sys.modules["scipy.special"].softmax(x, axis=-1)
""", "sys.modules"),
    "a function's globals": ("05_self_attention", "self_attention_softmax", """
def softmax(x):
    return np.exp.__class__.__call__.__globals__["x"]
""", "__globals__"),
}


@pytest.mark.parametrize("name", ATTACKS)
def test_each_route_is_found(name):
    topic, grade_id, code, words = ATTACKS[name]
    result = _finding(topic, grade_id, code)
    assert result is not None, name
    assert words in result, result


def test_a_finding_quotes_the_line_and_names_the_function_before_its_container():
    result = _finding(*ATTACKS["library kept in an object's attribute"][:3])
    assert "_lib = types.SimpleNamespace(sm=scipy.special.softmax)" in result
    assert "reaches `scipy.special.softmax`" in result and "without it" in result


def test_exercises_without_forbidden_functions_are_not_read():
    topic, grade_id, code, _ = ATTACKS["eval of a string"]
    cells, index, exercise = _with_answer(topic, grade_id, code)
    assert routes.finding(cells, index, exercise.function_name, ()) is None


def test_a_cell_after_the_test_cell_does_not_count():
    nb = _notebook("05_self_attention")
    index, exercise = next((i, e) for i, e in _test_cells(nb) if e.grade_id == "self_attention_softmax")
    nb.cells.append(nbformat.v4.new_code_cell("import threading\nthreading.Thread(target=print).start()"))
    assert routes.finding(nb.cells, index, exercise.function_name, exercise.forbidden) is None


# The answers written to game the tests (tests/exercises/uncatalogued_*.py) that reach a forbidden
# function by a route the text shows. Every other uncatalogued answer is an honest wrong answer
# and must be read without a finding: one more name here is an honest student failed.
GAMING = {
    "additive_library_in_disguise", "step_library_in_disguise", "field_measured_by_the_widget",
    "one_hot_builtin_in_disguise", "one_hot_aten_in_disguise", "cosine_builtin_in_disguise",
    "cosine_aten_in_disguise", "cosine_from_the_widget", "cosine_variable_functions_in_disguise",
    "pe_borrowed_from_notebook_12", "rotation_borrowed_from_notebook_12", "ca_sdpa_in_disguise",
    "ms_captured_softmax", "MHATorchInside", "MHASdpa", "step_rnn_cell_in_disguise",
    "step_vf_in_disguise", "step_aten_in_disguise", "step_variable_functions_in_disguise",
    "forward_nn_rnn_in_disguise", "fit_widget_slope", "jacobian_via_importlib",
    "jacobian_via_vars_jacfwd", "jacobian_dual_numbers", "softmax_via_importlib",
    "softmax_via_torch_getattr", "softmax_via_logsumexp", "attention_torch_logsumexp",
    "sdpa_via_getattr", "self_attention_forbidden", "patchify_captured_unfold", "pe_captured_conv",
}


def test_only_the_gaming_wrong_answers_are_found():
    found = {function.__name__ for exercise, function in _honest_functions("uncatalogued", "WRONG_ANSWERS")
             if _read_alone(exercise, function)}
    assert found == GAMING


def test_a_notebook_too_long_to_read_is_refused():
    code = "x = 1\n" * (routes.MAX_SOURCE_CHARS // 6 + 10)
    assert "longer than the grader reads" in _finding("05_self_attention", "self_attention_softmax", code)


def test_an_earlier_piece_is_charged_once():
    """05's attention_numpy uses the student's softmax, which the grader replaces by a correct one
    when it judges attention_numpy: a forbidden route inside softmax costs softmax's points only."""
    code = ATTACKS["library kept in an object's attribute"][2]
    cells, _, _ = _with_answer("05_self_attention", "self_attention_softmax", code)
    nb_cells = list(cells)
    index, exercise = next((i, e) for i, e in _test_cells(nbformat.v4.new_notebook(cells=nb_cells))
                           if e.grade_id == "self_attention_attention_numpy")
    assert exercise.earlier == ("softmax",)
    assert routes.finding(nb_cells, index, exercise.function_name, exercise.forbidden, exercise.earlier) is None
    assert routes.finding(nb_cells, index, exercise.function_name, exercise.forbidden) is not None


def test_magics_and_shell_commands_that_cannot_reach_the_answer_are_allowed():
    code = ("%matplotlib inline\n!pip install nothing\nfiles = !ls\n%time x = softmax(np.ones(3))\n"
            "%debug\n")
    assert _finding("05_self_attention", "self_attention_softmax", code) is None
    assert _finding("05_self_attention", "self_attention_softmax", "%%bash\necho hi\n") is None
    assert "get_ipython" in _finding("05_self_attention", "self_attention_softmax", "%run helper.py\n")


# --- honest habits (issue 37 item 8): no point lost, each line shown to the instructor ----------

HABITS = {
    "%timeit with options": ("%timeit -n 20 -r 3 np.exp(np.ones(3))\n", None),
    "help by a question mark": ("np.exp?\n", "np.exp?"),
    "%whos": ("%whos\n", "%whos"),
    "%pdoc": ("%pdoc np.exp\n", "%pdoc np.exp"),
    "%cd": ("%cd /tmp\n", "%cd /tmp"),
    "%reset": ("%reset -f\n", "%reset -f"),
    "%lsmagic": ("%lsmagic\n", "%lsmagic"),
    "cudnn made deterministic": ("torch.backends.cudnn.deterministic = True\n",
                                 "torch.backends.cudnn.deterministic = True"),
    "a figure size": ("import matplotlib.pyplot as plt\nplt.rcParams['figure.figsize'] = (6, 4)\n",
                      "plt.rcParams['figure.figsize'] = (6, 4)"),
    "an environment variable": ("import os\nos.environ['OMP_NUM_THREADS'] = '1'\n",
                                "os.environ['OMP_NUM_THREADS'] = '1'"),
}


def _with_habit(code):
    """05's solution with `code` as a scratch cell before its first answer: before every test cell."""
    nb = _notebook("05_self_attention")
    first = next(i for i, c in enumerate(nb.cells) if c.get("metadata", {}).get("nbgrader", {}).get("solution"))
    nb.cells.insert(first, nbformat.v4.new_code_cell(code))
    return nb


@pytest.mark.parametrize("name", HABITS)
def test_an_honest_habit_costs_no_point_and_is_worth_a_look(name):
    code, quoted = HABITS[name]
    nb = _with_habit(code)
    tests = list(_test_cells(nb))
    assert len(tests) >= 5
    for index, exercise in tests:
        found, notes = routes.read(nb.cells, index, exercise.function_name, exercise.forbidden,
                                   tuple(getattr(exercise, "earlier", ())))
        assert found is None, (exercise.grade_id, found)
    if quoted is None:  # read as the Python it runs: nothing left unread
        assert not notes, notes
    else:
        assert any(quoted in n and n.startswith("worth a look") for n in notes), notes


def test_a_scratch_import_replaced_by_the_students_def_costs_nothing():
    """`from scipy.special import softmax` in a scratch cell, then the student's own `def softmax`:
    the later def rebinds the name, so neither softmax nor attention_numpy reaches SciPy's."""
    nb = _notebook("05_self_attention")
    answer = next(i for i, c in enumerate(nb.cells)
                  if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "self_attention_softmax")
    nb.cells.insert(answer, nbformat.v4.new_code_cell("from scipy.special import softmax\nsoftmax(np.ones(3))\n"))
    for index, exercise in _test_cells(nb):
        assert routes.read(nb.cells, index, exercise.function_name, exercise.forbidden,
                           tuple(getattr(exercise, "earlier", ())))[0] is None, exercise.grade_id
    # the same import after the def is the answer: still found
    nb.cells.insert(answer + 2, nbformat.v4.new_code_cell("from scipy.special import softmax\n"))
    index, exercise = next((i, e) for i, e in _test_cells(nb) if e.grade_id == "self_attention_softmax")
    assert "scipy.special.softmax" in routes.finding(nb.cells, index, exercise.function_name, exercise.forbidden)


def test_a_def_in_a_cell_that_raised_does_not_replace_anything():
    nb = _notebook("05_self_attention")
    answer = next(i for i, c in enumerate(nb.cells)
                  if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "self_attention_softmax")
    cell = nbformat.v4.new_code_cell("from scipy.special import softmax\n")
    nb.cells.insert(answer + 1, cell)
    broken = nbformat.v4.new_code_cell("1 / 0\ndef softmax(x):\n    return x\n")
    broken.outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="", traceback=[])]
    nb.cells.insert(answer + 2, broken)
    index, exercise = next((i, e) for i, e in _test_cells(nb) if e.grade_id == "self_attention_softmax")
    assert "scipy.special.softmax" in routes.finding(nb.cells, index, exercise.function_name, exercise.forbidden)


def test_a_module_change_the_answer_uses_is_still_found():
    result = _finding("05_self_attention", "self_attention_softmax",
                      "import scipy.special\nnp.exp = lambda x: scipy.special.softmax(x) * 0 + 1\n")
    assert "changes the module `np`" in result


# --- determined routes (issue 37 item 9): what is closed ------------------------------------

DETERMINED = {
    "getattr under another name": ("05_self_attention", "self_attention_softmax", """
import scipy.special
g = getattr
def softmax(x):
    return g(scipy.special, "softmax")(x, axis=-1)
""", "getattr"),
    "getattr.__call__": ("05_self_attention", "self_attention_softmax", """
import scipy.special
def softmax(x):
    return getattr.__call__(scipy.special, "softmax")(x, axis=-1)
""", "__call__"),
    "functools.reduce over getattr": ("05_self_attention", "self_attention_softmax", """
import functools, scipy
def softmax(x):
    return functools.reduce(getattr, ["special", "softmax"], scipy)(x, axis=-1)
""", "getattr"),
    "pydoc.locate": ("05_self_attention", "self_attention_softmax", """
import pydoc
def softmax(x):
    return pydoc.locate("scipy.special.softmax")(x, axis=-1)
""", "pydoc.locate"),
    "string.Formatter().get_field": ("05_self_attention", "self_attention_softmax", """
import string, scipy.special
def softmax(x):
    return string.Formatter().get_field("0.special.softmax", [scipy], {})[0](x, axis=-1)
""", "string.Formatter"),
    "logging's configurator": ("05_self_attention", "self_attention_softmax", """
import logging.config
def softmax(x):
    logging.config.dictConfig({"version": 1, "filters": {"f": {"()": "scipy.special.softmax"}}})
    return logging.getLogger().filters[0](x)
""", "logging.config"),
    "torch.load of a pickled function": ("05_self_attention", "self_attention_softmax", """
import io
_f = torch.load(io.BytesIO(_blob), weights_only=False)
def softmax(x):
    return _f(x, axis=-1)
""", "torch.load"),
    "np.load with pickles": ("05_self_attention", "self_attention_softmax", """
_f = np.load("f.npy", allow_pickle=True).item()
def softmax(x):
    return _f(x, axis=-1)
""", "numpy.load"),
    "__import__ from __builtins__, encoded": ("05_self_attention", "self_attention_softmax", """
import codecs
def softmax(x):
    m = __builtins__.__dict__["__vzcbeg__"[::-1]](codecs.decode("fpvcl.fcrpvny", "rot13"))
    return m.special.softmax(x, axis=-1)
""", "__builtins__"),
    "a closure over a container a later cell fills": ("05_self_attention", "self_attention_softmax", """
def _make():
    box = []
    return (lambda x: box[0](x, axis=-1)), box
softmax, _box = _make()
import scipy.special
_box.append(scipy.special.softmax)
""", "scipy.special.softmax"),
    "%%writefile shadowing an installed package": ("05_self_attention", "self_attention_softmax", """
%%writefile tqdm.py
from scipy.special import softmax as f
""", None),
    "the guard's state through a traceback": ("05_self_attention", "self_attention_softmax", """
import sys
def softmax(x):
    try:
        raise ValueError
    except ValueError:
        frame = sys.exc_info()[2].tb_frame
    return frame.f_globals["_lib"](x)
""", "tb_frame"),
    "the answer imported from the course": ("07_multi_head", "multi_head_split_heads", """
from course_utils.grading.parts import split_heads
""", "course_utils.grading.parts.split_heads"),
}


def test_a_route_outside_the_answers_reach_is_worth_a_look():
    cells, index, exercise = _with_answer("05_self_attention", "self_attention_softmax",
                                          "import pydoc\nf = pydoc.locate('scipy.special.softmax')\n")
    found, notes = routes.read(cells, index, exercise.function_name, exercise.forbidden)
    assert found is None and any("pydoc.locate" in n and "f = pydoc.locate" in n for n in notes), notes


@pytest.mark.parametrize("name", DETERMINED)
def test_each_determined_route_is_closed(name):
    topic, grade_id, code, words = DETERMINED[name]
    if words is None:  # the file, then the answer importing it
        cells, index, exercise = _with_answer(topic, grade_id, code)
        cells.insert(index, nbformat.v4.new_code_cell("import tqdm\ndef softmax(x):\n    return tqdm.f(x, axis=-1)\n"))
        result = routes.finding(cells, index + 1, exercise.function_name, exercise.forbidden)
        assert result and "tqdm.py" in result, result
        return
    result = _finding(topic, grade_id, code)
    assert result is not None and words in result, result


def test_the_courses_pieces_are_found_even_where_nothing_is_forbidden():
    cells, index, exercise = _with_answer("07_multi_head", "multi_head_split_heads",
                                          "from course_utils.grading.parts import split_heads\n")
    found, _ = routes.read(cells, index, exercise.function_name, ())
    assert found and "course_utils.grading.parts.split_heads" in found
    assert routes.finding(cells, index, exercise.function_name, ()) is None  # routes: only where forbidden


def test_the_judge_marks_a_route_and_keeps_the_habits_for_problems_csv(tmp_path):
    """judge.forbidden_route: a decided route starts with routes.FORBIDDEN_ROUTE (the report's own
    outcome); the notes go into the test cell's metadata, which export lists in problems.csv."""
    import types as _types
    from autograder import export
    nb = _with_habit("np.exp?\n")
    index = next(i for i, e in _test_cells(nb) if e.grade_id == "self_attention_softmax")
    assert judge.forbidden_route(nb.cells, index, nb.cells[index].source) is None
    assert any("np.exp?" in n for n in nb.cells[index].metadata[judge.REVIEW_KEY])
    folder = tmp_path / "shards" / "05_self_attention" / "s1" / "autograded" / "s1" / "05_self_attention"
    folder.mkdir(parents=True)
    nbformat.write(nb, str(folder / "self_attention.ipynb"))
    result = {"status": "graded"}
    notes = export._review(_types.SimpleNamespace(work=str(tmp_path)), "s1", "05_self_attention", result)
    assert notes and all(n.startswith("self_attention.ipynb: worth a look") for n in notes)
    assert result["review"] == notes and any("np.exp?" in n for n in notes)
    cells, index, _ = _with_answer(*ATTACKS["getattr with a constant name"][:3])
    assert judge.forbidden_route(cells, index, cells[index].source).startswith(routes.FORBIDDEN_ROUTE)


def test_each_line_worth_a_look_is_listed_once(tmp_path):
    """Every test cell reads the same earlier cells, and one line can name several paths
    (`importlib`, `importlib.util`, `importlib.util.spec_from_file_location`): the instructor
    reads it once (the class overview listed it once per test cell and per path)."""
    import types as _types
    from autograder import export
    line = '_spec = importlib.util.spec_from_file_location("scratch", "scratch.py")'
    nb = _with_habit(f"import importlib.util\n{line}\n")
    for index, _ in _test_cells(nb):
        judge.forbidden_route(nb.cells, index, nb.cells[index].source)
    assert sum(line in n for c in nb.cells for n in c.metadata.get(judge.REVIEW_KEY, [])) > 1
    folder = tmp_path / "shards" / "05_self_attention" / "s1" / "autograded" / "s1" / "05_self_attention"
    folder.mkdir(parents=True)
    nbformat.write(nb, str(folder / "self_attention.ipynb"))
    notes = export._review(_types.SimpleNamespace(work=str(tmp_path)), "s1", "05_self_attention", {"status": "graded"})
    assert sum(line in n for n in notes) == 1, notes


# --- a function handed to another library, which may run it where the check cannot see ------

HANDED_OVER = {
    "a thread pool of another library, in the answer": """
from tqdm.contrib.concurrent import thread_map
def masked_softmax(scores, mask):
    return thread_map(lambda s: torch.softmax(s, -1), [scores.masked_fill(~mask, float('-inf'))])[0].nan_to_num(0.0)
""",
    "a defined function handed over in another cell": """
import tqdm.contrib.concurrent as tc
def _one(s):
    return s
tc.thread_map(_one, [1, 2])
""",
}


@pytest.mark.parametrize("name", HANDED_OVER)
def test_a_function_handed_to_another_library_is_worth_a_look_with_its_line(name):
    cells, index, exercise = _with_answer("08_masking_transformer", "masking_transformer_masked_softmax",
                                          HANDED_OVER[name])
    _, notes = routes.read(cells, index, exercise.function_name, exercise.forbidden)
    handed = [n for n in notes if "hands" in n]
    assert len(handed) == 1, notes
    assert handed[0].startswith("worth a look") and "thread_map" in handed[0] and "(`" in handed[0], handed


def test_a_function_handed_to_libraries_that_call_it_here_is_not_noted():
    code = """
import functools, itertools
def _add(a, b):
    return a + b
total = functools.reduce(_add, [1, 2, 3])
pairs = list(itertools.starmap(_add, [(1, 2)]))
batched = torch.vmap(lambda row: row * 2)(torch.ones(2, 3))
ordered = sorted([3, 1], key=lambda v: -v)
"""
    cells, index, exercise = _with_answer("08_masking_transformer", "masking_transformer_masked_softmax", code)
    found, notes = routes.read(cells, index, exercise.function_name, exercise.forbidden)
    assert found is None and not [n for n in notes if "hands" in n], (found, notes)


# --- one reader per notebook (issue 41 item 5) -----------------------------------------------

def _as_run(cells):
    """The cells as the grader's kernel leaves them one by one: yields (cells so far run, index)
    after each cell ran; the cells after it have no outputs yet."""
    running = [nbformat.from_dict(dict(c, outputs=[])) if c.get("cell_type") == "code" else c for c in cells]
    for index, cell in enumerate(cells):
        if cell.get("cell_type") == "code":
            running[index]["outputs"] = cell.get("outputs", [])
        yield running, index


def _readings_once_and_afresh(cells):
    """[(test cell, grade_id, the shared reader's (finding, notes), a fresh reading's)] for every
    test cell, asked as the grader asks while it runs the notebook: one NotebookReader for all."""
    reader, out = None, []
    for running, index in _as_run(cells):
        reader = reader or routes.NotebookReader(running)
        wanted = judge.expected(running[index].get("source", "")) if running[index].get("cell_type") == "code" else None
        for grade_id in (wanted[1] if wanted else ()):
            exercise = judge._exercise(wanted[0], grade_id)
            for substituted in {(), tuple(getattr(exercise, "earlier", ()))}:
                args = (exercise.function_name, exercise.forbidden, substituted)
                out.append((index, grade_id, reader.read(index, *args), routes.read(running, index, *args)))
    return out


def _same(pair):
    (found, notes), (fresh_found, fresh_notes) = pair
    return (str(found) if found else None, getattr(found, "rank", None), notes) == \
        (str(fresh_found) if fresh_found else None, getattr(fresh_found, "rank", None), fresh_notes)


def _attack_notebooks():
    for table in (ATTACKS, DETERMINED):
        for name, (topic, grade_id, code, _) in table.items():
            yield name, _with_answer(topic, grade_id, code)[0]
    for name, (code, _) in HABITS.items():
        yield name, _with_habit(code).cells
    for name, code in HANDED_OVER.items():
        yield name, _with_answer("08_masking_transformer", "masking_transformer_masked_softmax", code)[0]


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.parent.name)
def test_one_reader_per_notebook_reads_every_solution_as_a_fresh_reading_does(path):
    readings = _readings_once_and_afresh(nbformat.read(path, 4).cells)
    assert len(readings) >= 4
    assert [r[:2] for r in readings if not _same(r[2:])] == []


def test_one_reader_per_notebook_reads_every_attack_as_a_fresh_reading_does():
    compared, found = 0, 0
    for name, cells in _attack_notebooks():
        for index, grade_id, shared, fresh in _readings_once_and_afresh(cells):
            assert _same((shared, fresh)), (name, index, grade_id, shared, fresh)
            compared, found = compared + 1, found + bool(shared[0])
    assert compared > 100 and found >= len(ATTACKS) + len(DETERMINED) - 1  # the attacks are there


def test_the_reader_rereads_a_cell_whose_source_or_outcome_changed():
    """The shared reader keeps what it read of each cell: a cell changed since (its source, or
    whether it raised) is read again, so each test cell sees the cells as they are."""
    nb = _notebook("05_self_attention")
    index, exercise = next((i, e) for i, e in _test_cells(nb) if e.grade_id == "self_attention_softmax")
    answer = next(i for i in range(index, -1, -1) if "def softmax" in nb.cells[i].source)
    reader = routes.NotebookReader(nb.cells)
    assert reader.finding(index, exercise.function_name, exercise.forbidden) is None
    original = nb.cells[answer].source
    nb.cells[answer].source = "from scipy.special import softmax\n" + original  # replaced by the def: honest
    assert reader.finding(index, exercise.function_name, exercise.forbidden) is None
    nb.cells[answer].source = original + "\nfrom scipy.special import softmax\n"
    assert "scipy.special.softmax" in reader.finding(index, exercise.function_name, exercise.forbidden)
    # the def raised after the import: the scratch import is still what `softmax` may be
    nb.cells[answer].source = "from scipy.special import softmax\n" + original
    nb.cells[answer].outputs = [nbformat.v4.new_output("error", ename="ValueError", evalue="x", traceback=[])]
    assert "scipy.special.softmax" in reader.finding(index, exercise.function_name, exercise.forbidden)
