"""Forbidden routes, read from the source: which functions an answer can reach, decided in the
grader's process from the notebook's text, where student code cannot hide anything.

Why: the forbidden-API guard (course_utils.grading.guards) runs inside the student's kernel. It
gives the precise message ("you called torch.softmax"), but everything in that kernel is the
student's to change: a library function kept in an object's attribute, called from a thread, or
under `torch._C.DisableTorchFunction()` with PyTorch's modes switched off, never meets its
recorders. This module decides the same question without running anything: it reads every
cell the grader ran before the test cell (test and locked cells excluded: nbgrader restored
them from the release), follows the names the answer uses to the statements that bind them,
and looks at what those statements name.

An exercise that forbids something fails, with a sentence that quotes the line, when the code
its answer can reach

* names a forbidden function, under any import alias, attribute chain, `getattr` with a
  constant name, default argument or container (`SimpleNamespace(sm=scipy.special.softmax)`);
* names the course's own widgets, reference or grading helpers (a widget that measures a
  receptive field is the answer key to 02, not a tool for writing it);
* takes a route the reader cannot follow: `getattr` with a computed name, `eval`, `exec`,
  `__import__`, `importlib`, `sys.modules`, `__dict__`/`__globals__`-style attributes, PyTorch's
  private namespaces (`torch._C`, `torch._VF`, ...), threads and processes; or names an
  attribute a library module does not have (one the notebook put there).

* changes a library module in an attribute the reach uses;

and, anywhere in the notebook before the test cell, when a cell starts threads or processes, uses
IPython's shell or a magic that runs unread code (%run), touches the grader's internals, or
rewrites a `__module__`-style attribute. Bindings are followed in the notebook's order (a later
`def softmax` replaces a scratch import); what the reader cannot tell from a habit and no reach
shows (magics it does not read, a module changed elsewhere, a route outside the reach) is a
`Note` for the instructor, never a failure. An exercise that forbids nothing is still read for
the course's own pieces (`read`).

Over-approximation is deliberate within that order: a name bound in several places after its
last fresh binding reaches every one. Honest
answers never need these routes; every solution, every second correct implementation in
tests/exercises/alternatives_*.py and the real class's notebooks are read without a finding
(tests/grading/test_routes.py).
"""
import ast
import copy
import functools
import importlib
import importlib.util
import symtable
import sys
import types

from course_utils.grading import guards

# Packages whose attributes are resolved to objects in the grader (imported if needed): the
# libraries the course uses, and the course itself. Anything else is only named, never imported.
RESOLVED_ROOTS = ("torch", "numpy", "scipy", "sklearn", "math", "course_utils")

# The course's modules an answer may never reach.
# (course_utils.models is not: 08's block is built on the model's attention, given by the notebook.)
COURSE_OFF_LIMITS = ("course_utils.widgets", "course_utils.reference", "course_utils.grading")
# ... except what says which question is the student's: a think-first answer computes from the
# numbers `questions.numbers` gives it, as the solutions do (no answer is in there).
COURSE_ALLOWED = ("course_utils.grading.questions",)

# Modules whose use an answer's reach may not contain: each can run or find code by a route the
# reader cannot follow.
DYNAMIC_MODULES = (
    "threading", "_thread", "concurrent", "multiprocessing", "asyncio", "subprocess", "signal",
    "importlib", "imp", "builtins", "types", "inspect", "gc", "ctypes", "marshal", "pickle",
    "dill", "cloudpickle", "copyreg", "code", "codeop", "runpy", "pkgutil",
    "sys.modules", "sys.settrace", "sys.setprofile", "sys._getframe", "sys.meta_path", "sys.path_hooks",
    "sys.addaudithook", "operator.attrgetter", "operator.methodcaller", "functools.partial.__call__",
    "pydoc", "string.Formatter", "logging.config", "shelve", "joblib", "copy_reg", "traceback", "sys.exc_info",
    "sys.exception", "sys.last_traceback", "sys.last_value", "sys.last_exc", "sys._current_frames",
    # library helpers that run a function in other threads or processes (issue 37 item 9)
    "torch.jit.fork", "torch.jit._fork", "torch.multiprocessing", "torch.futures", "torch.utils.data",
)
# Names that start one of these run other programs or processes (os.execv, os.spawnl, ...).
DYNAMIC_PREFIXES = ("os.system", "os.fork", "os.popen", "os.exec", "os.spawn", "os.posix_spawn", "os.kill")
# Of those, the ones a cell may not even use outside the answer's reach: they run code beside it.
CONCURRENT_MODULES = ("threading", "_thread", "concurrent", "multiprocessing", "asyncio", "subprocess", "signal",
                      # PyTorch's own ways to run a function in another thread or process
                      "torch.jit.fork", "torch.jit._fork", "torch.multiprocessing", "torch.futures")

DYNAMIC_BUILTINS = ("eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint",
                    "get_ipython", "open", "__builtins__", "__loader__", "__spec__")
NAME_TAKING_BUILTINS = ("getattr", "setattr", "delattr", "hasattr")
DYNAMIC_ATTRIBUTES = (
    "__dict__", "__globals__", "__builtins__", "__subclasses__", "__getattribute__", "__getattr__",
    "__code__", "__closure__", "__wrapped__", "__func__", "__self__", "__mro__",
    "__bases__", "__base__", "__reduce__", "__reduce_ex__", "__setattr__", "__delattr__", "__defaults__",
    "__kwdefaults__", "__loader__", "__spec__", "__import__", "__call__", "__traceback__",
    "tb_frame", "tb_next", "f_back", "f_locals", "f_globals", "f_builtins", "gi_frame", "cr_frame", "ag_frame",
)
# Attributes whose rewriting disguises one function as another (the in-kernel guard trusts them):
# a finding anywhere. Any other double-underscore attribute rewritten is worth a look only.
DISGUISE_ATTRIBUTES = ("__module__", "__code__", "__globals__", "__class__", "__builtins__", "__dict__",
                       "__closure__", "__defaults__", "__kwdefaults__", "__call__", "__getattr__",
                       "__getattribute__", "__import__", "__spec__", "__loader__", "__wrapped__", "__func__")
# Routes that can fetch any function, named to the instructor wherever they appear (inside an
# answer's reach they fail it, as DYNAMIC_MODULES).
REVIEWED_MODULES = ("pydoc.locate", "string.Formatter", "logging.config", "pickle", "dill", "cloudpickle",
                    "shelve", "marshal", "importlib", "builtins", "sys.modules", "operator.attrgetter")
# Running code's frames: the in-kernel guard's state, reached through a traceback.
FRAME_ATTRIBUTES = ("tb_frame", "tb_next", "f_back", "f_locals", "f_globals", "f_builtins", "f_code",
                    "gi_frame", "cr_frame", "ag_frame", "__traceback__")
# Libraries that call a function they are given here, in this thread, when they are called
# (functools.reduce, itertools.starmap, sorted's key, torch.vmap): handing them one of the
# notebook's functions is ordinary. A function handed to any other library's function may be run
# somewhere the in-kernel guard cannot see (tqdm.contrib.concurrent.thread_map runs it in a thread
# pool): worth the instructor's look, with the line (issue 37 item 9).
CALLS_IN_THIS_THREAD = RESOLVED_ROOTS + (
    "functools", "itertools", "operator", "collections", "heapq", "bisect", "contextlib", "typing",
    "dataclasses", "copy", "statistics", "random", "re", "string", "enum", "abc", "warnings", "time",
    "timeit", "cmath", "numbers", "fractions", "decimal", "json", "textwrap", "unittest", "hypothesis",
    "matplotlib", "ipywidgets", "IPython.display",
)
TORCH_HIDDEN_NAMESPACES = ("torch.ops", "torch.overrides", "torch.library", "torch.utils._python_dispatch",
                           "torch.compiler", "torch.jit", "torch.fx")


# How a test cell's failing sentence starts when the reader decided it (report.py counts these
# apart from wrong answers: an integrity finding, not a misconception).
FORBIDDEN_ROUTE = "Forbidden route: "

# An honest notebook holds well under 100,000 characters of code.
MAX_SOURCE_CHARS = 2_000_000


class Finding(str):
    """A sentence saying which route an answer takes and where; `rank` orders findings by how
    much they tell (0: a forbidden function, 1: the course's helpers, 2: a route)."""

    def __new__(cls, sentence, rank=2):
        self = super().__new__(cls, sentence)
        self.rank = rank
        return self


def _ipython_to_python(source):
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - IPython cannot read it either: the cell did not run
        return source


# IPython magics whose only effect is on timing or display; %time and %%capture run their
# argument or body as Python, which is read as if written without the magic (their options
# first: `%timeit -n 20 -r 3 f(x)` reads `f(x)`). Magics that put code the grader cannot read
# into the kernel (%run, %load_ext of a file, ...) stay a `get_ipython()` call, a route read like
# any other. Every other magic (inspection, `%cd`, `%reset`, `%who`, one the reader does not
# know) cannot reach an answer: it is dropped, and named in the instructor's "worth a look" list.
# Shell commands (!pip, %%bash, %%writefile) are harmless here: they cannot change the kernel's
# Python except through a file, and an answer that imports or opens one is refused anyway.
HARMLESS_MAGICS = ("matplotlib", "config", "precision", "pip", "conda", "mamba", "debug", "pdb", "xmode",
                   "history", "pwd", "ls", "env", "file", "bash", "sh", "script", "html", "HTML", "markdown",
                   "latex", "javascript", "js", "svg", "autoreload", "aimport", "load_ext", "reload_ext")
TRANSPARENT_MAGICS = ("time", "timeit", "capture", "prun")
# Magics that run code in the kernel which the notebook's text does not show.
CODE_MAGICS = ("run", "rerun", "recall", "macro", "paste", "cpaste", "edit", "store", "load", "pylab",
               "autocall", "loadpy", "ed", "r", "rep", "R")
# Options of the transparent magics that take a value (`-n 20`), which come before the code.
_MAGIC_VALUE_OPTIONS = {"timeit": "nrp", "time": "", "prun": "lrsTD", "capture": ""}
SHELL_CALLS = ("system", "getoutput")  # !cmd and x = !cmd


def _magic_code(name, line):
    """The Python a transparent magic runs, its options (`-n 20 -r 3`) taken off."""
    takes_value = _MAGIC_VALUE_OPTIONS.get(name, "")
    rest = line.lstrip()
    while rest.startswith("-"):
        option, _, rest = rest.partition(" ")
        rest = rest.lstrip()
        if option[1:2] in takes_value and len(option) == 2:  # `-n 20`; `-n20` carries its value
            _, _, rest = rest.partition(" ")
            rest = rest.lstrip()
    return rest


def _magic_free(tree):
    """The module with the magics IPython turned into get_ipython() calls replaced by the Python
    they run (transparent ones) or by nothing (harmless ones, and the ones that cannot reach an
    answer: those are listed in `tree.unread_magics` as (line number, magic name) for review)."""
    body, unread = [], []
    for node in tree.body:
        if isinstance(node, (ast.Expr, ast.Assign)) and _is_ipython_call(node.value, SHELL_CALLS):
            if isinstance(node, ast.Assign):  # x = !ls: x is bound, to text
                node.value = ast.Constant("")
                body.append(node)
            continue
        call = node.value if isinstance(node, (ast.Expr, ast.Assign)) and isinstance(node.value, ast.Call) else None
        magic = call.func.attr if call is not None and isinstance(call.func, ast.Attribute) else None
        if (magic in ("run_line_magic", "run_cell_magic") and isinstance(call.func.value, ast.Call)
                and _chain(call.func.value.func) == ["get_ipython"]
                and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args)
                and call.args):
            name, *rest = [a.value for a in call.args]
            if name in TRANSPARENT_MAGICS and isinstance(node, ast.Expr):
                if magic == "run_cell_magic":
                    setup = _magic_code(name, rest[0]) if rest else ""
                    inner = _parse("\n".join(r for r in (setup, *rest[1:]) if r))
                else:
                    inner = _parse(_magic_code(name, rest[0]) if rest else "")
                if inner is not None:
                    for sub in inner.body:  # the line numbers of the magic's line
                        for n in ast.walk(sub):
                            if hasattr(n, "lineno"):
                                n.lineno = node.lineno
                    body.extend(inner.body)
                    continue
            elif name in HARMLESS_MAGICS and not (name in ("load_ext", "reload_ext", "aimport") and rest
                                                   and not all(_installed(m.split(".")[0]) for m in rest[0].split()
                                                               if not m.startswith("-"))):
                if isinstance(node, ast.Assign):
                    node.value = ast.Constant("")
                    body.append(node)
                continue
            elif name not in CODE_MAGICS and name not in TRANSPARENT_MAGICS:
                unread.append((node.lineno, name))
                if name == "writefile" and rest:
                    unread[-1] = (node.lineno, "writefile " + rest[0].split()[-1] if rest[0].split() else "writefile")
                if isinstance(node, ast.Assign):
                    node.value = ast.Constant("")
                    body.append(node)
                continue
        body.append(node)
    tree.body = body
    tree.unread_magics = unread
    return tree


@functools.lru_cache(maxsize=512)
def _is_ipython_call(node, methods):
    """`get_ipython().<method>("constant", ...)`, as IPython writes a magic or a shell command."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in methods
            and isinstance(node.func.value, ast.Call) and _chain(node.func.value.func) == ["get_ipython"]
            and all(isinstance(a, ast.Constant) for a in node.args))


@functools.lru_cache(maxsize=2048)
def _parse(source):
    """The cell's module, magics read through (cached: every test cell rereads the cells before
    it; callers must not change the tree)."""
    try:
        return _magic_free(ast.parse(_ipython_to_python(source)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def readable_cells(cells, before):
    """(index, source) of the code cells before `before` that the student could have written:
    every code cell but nbgrader's test and locked cells (restored from the release)."""
    out = []
    for index, cell in enumerate(cells[:before]):
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
        if meta.get("locked") or (meta.get("grade") and not meta.get("solution")):
            continue
        out.append((index, cell.get("source", "") or ""))
    return out


class _Statement:
    """One top-level statement: what it binds, which global names it reads, its text."""

    def __init__(self, node, lines, position=0, ran=True):
        self.node = node
        self.lines = lines
        self.position = position  # its place among the notebook's statements
        self.ran = ran  # False: its cell raised, so it may have stopped before binding anything
        self.binds = set()
        self.assigns = set()  # names bound to a new object (not by import, not by changing it)
        self.kills = set()  # names it binds afresh, unconditionally: earlier bindings are gone
        self.reads = set()  # every global name it reads, now or when its functions run
        self.deferred = set()  # the names it reads only inside functions and classes
        self.late_binds = set()  # names its functions rebind (`global x; x = ...`) when called
        self.receivers = set()  # names whose method this statement calls at the top level
        self.stores = {}  # root name -> [(node, changed attribute or None)] of x.a = ..., x[k] = ...
        self.imports = {}  # name -> dotted path, for every import anywhere inside
        self.wildcard = False  # binds names the text does not show (`from helper import *`)
        self._read_names()

    def line(self, node):
        number = getattr(node, "lineno", self.node.lineno) - 1
        text = self.lines[number].strip() if 0 <= number < len(self.lines) else ""
        return text if len(text) <= 100 else text[:97] + "..."

    def _read_names(self):
        node = self.node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.binds.add(node.name)
            self.assigns.add(node.name)
            self.kills.add(node.name)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                for alias in sub.names:
                    name = alias.asname or alias.name.split(".")[0]
                    self.imports[name] = alias.name if alias.asname else alias.name.split(".")[0]
            elif isinstance(sub, ast.ImportFrom) and sub.module and not sub.level:
                for alias in sub.names:
                    if alias.name == "*":
                        names = _public_names(sub.module)
                        if names is None:
                            self.wildcard = True
                        for name in names or ():
                            self.imports[name] = f"{sub.module}.{name}"
                    else:
                        self.imports[alias.asname or alias.name] = f"{sub.module}.{alias.name}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.binds.update(self.imports)
            self.kills.update(self.imports)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and getattr(node, "value", None) is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name) and not isinstance(sub, ast.Starred):
                        self.kills.add(sub.id)
                    if isinstance(sub, (ast.Attribute, ast.Subscript)):
                        break  # x.a = ...: x is changed, not bound afresh
        # Names bound at the top level (assignments, for targets, with ... as, walrus) and the
        # names whose objects the statement changes (x.a = ..., x[k] = ..., x.append(...), setattr(x, ...)).
        for sub in _top_level_nodes(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                self.binds.add(sub.id)
                self.assigns.add(sub.id)
            elif isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                root = _root_name(sub)
                if root:
                    self.binds.add(root)
                    target = sub if isinstance(sub, ast.Attribute) else sub.value
                    self.stores.setdefault(root, []).append(
                        (sub, target.attr if isinstance(target, ast.Attribute) else None))
            elif isinstance(sub, ast.Call):
                if isinstance(sub.func, ast.Attribute):
                    root = _receiver_root(sub.func)
                    if root:  # bound here unless it names a module (torch.manual_seed(0))
                        self.receivers.add(root)
                elif isinstance(sub.func, ast.Name) and sub.func.id in ("setattr", "delattr") and sub.args:
                    root = _root_name(sub.args[0])
                    if root:
                        self.binds.add(root)
                        name = sub.args[1] if len(sub.args) > 1 else None
                        self.stores.setdefault(root, []).append(
                            (sub, name.value if isinstance(name, ast.Constant) and isinstance(name.value, str)
                             else "*"))
        self.kills &= self.binds | set(self.imports)
        try:
            table = symtable.symtable(ast.unparse(node), "cell", "exec")
        except (SyntaxError, ValueError, RecursionError):
            table = None
        if table is not None:
            self.reads = _global_reads(table)
            self.deferred = set().union(*(_global_reads(child) for child in table.get_children()))
            self.late_binds = _global_writes(table)
            self.binds |= self.late_binds


@functools.lru_cache(maxsize=256)
def _public_names(module):
    """The names `from module import *` binds, for the modules the grader resolves; None for
    any other (a file beside the notebook: what it binds cannot be read)."""
    obj = _resolve(module)
    if not isinstance(obj, types.ModuleType):
        return None
    names = getattr(obj, "__all__", None)
    if names is None:
        names = [n for n in dir(obj) if not n.startswith("_")]
    return tuple(str(n) for n in names)


def _global_writes(table):
    """Names that the functions inside declare `global` and assign: bound whenever they run."""
    out, stack = set(), list(table.get_children())
    while stack:
        scope = stack.pop()
        for symbol in scope.get_symbols():
            if symbol.is_declared_global() and symbol.is_assigned():
                out.add(symbol.get_name())
        stack.extend(scope.get_children())
    return out


def _top_level_nodes(node):
    """The nodes of a statement that run at the notebook's top level: not inside a function,
    lambda or class body (a class body's names are its own)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        parts = list(node.decorator_list)
        if not isinstance(node, ast.ClassDef):
            parts += list(node.args.defaults) + [d for d in node.args.kw_defaults if d is not None]
        else:
            parts += list(node.bases) + [k.value for k in node.keywords]
        stack = parts
    else:
        stack = [node]
    while stack:
        sub = stack.pop()
        yield sub
        for child in ast.iter_child_nodes(sub):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            stack.append(child)


def _global_reads(table):
    """Every name the code reads from the module's namespace, in any function or class inside."""
    reads = set()
    stack = [table]
    while stack:
        scope = stack.pop()
        kind = scope.get_type()
        for symbol in scope.get_symbols():
            if not symbol.is_referenced():
                continue
            if kind == "module" or symbol.is_global() or (kind == "class" and not symbol.is_local()):
                reads.add(symbol.get_name())
        stack.extend(scope.get_children())
    return reads


def _root_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _receiver_root(method):
    """The name whose object the method call `method(...)` may change: `x` for x.m(), x[0].m(),
    x.a.m(). Through the result of a call only when a double-underscore attribute is on the way
    (f(0).__setattr__(...), f(0).__dict__.update(...): f may return itself): an honest
    `per_token_loss(logits, tokens).mean()` in a demo cell calls a method of a new tensor and
    changes nothing named `per_token_loss`. Read as a change, it put the demo cell, and every
    course helper the cells before it call, in the reach of any answer using that function."""
    node, through_call, dunder = method, False, False
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(node, ast.Call):
            through_call, node = True, node.func
        else:
            dunder |= isinstance(node, ast.Attribute) and node.attr.startswith("__")
            node = node.value
    if not isinstance(node, ast.Name) or (through_call and not dunder):
        return None
    return node.id


def _chain(node):
    """["scipy", "special", "softmax"] for `scipy.special.softmax`, `getattr(scipy.special,
    "softmax")`; None when the chain has a computed link or does not start at a name."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str)):
            parts.append(node.args[1].value)
            node = node.args[0]
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return parts[::-1]
        else:
            return None


_MISSING = object()


@functools.lru_cache(maxsize=4096)
def _resolve(path):
    """The object a dotted path names, for paths under RESOLVED_ROOTS; _MISSING when a library
    module has no such attribute; None when the path is outside what the grader resolves."""
    parts = path.split(".")
    if parts[0] not in RESOLVED_ROOTS:
        return None
    obj, start = None, len(parts)
    for end in range(len(parts), 0, -1):  # the longest importable module prefix
        name = ".".join(parts[:end])
        if name in sys.modules or end == 1 or _importable(name):
            try:
                obj = importlib.import_module(name)
            except Exception:  # noqa: BLE001 - not a module: try a shorter prefix
                continue
            start = end
            break
    if obj is None:
        return None
    for attr in parts[start:]:
        try:
            obj = getattr(obj, attr)
        except Exception:  # noqa: BLE001 - includes lazy imports that fail
            # A module without it: something in the notebook put it there. An instance
            # attribute named on a class (nn.Linear.weight): nothing to say.
            return _MISSING if isinstance(obj, types.ModuleType) else None
    return obj


def _importable(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError, AttributeError):
        return False


@functools.lru_cache(maxsize=1024)
def _installed(root):
    """Whether a top-level module is Python's own or an installed package (not a file beside
    the notebook)."""
    if root in sys.builtin_module_names or root in getattr(sys, "stdlib_module_names", ()):
        return True
    try:
        spec = importlib.util.find_spec(root)
    except (ImportError, ValueError, AttributeError):
        return False
    origin = getattr(spec, "origin", None) or ""
    roots = [p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix} if p]
    return spec is not None and any(origin.startswith(r) for r in roots)


def _startswith(path, prefixes):
    return any(path == p or path.startswith(p + ".") for p in prefixes)


class Note(str):
    """A line worth the instructor's look: something the reader cannot tell from a habit, which
    no answer's reach shows, so it costs no point (problems.csv, the class overview)."""


class _CellText:
    """One code cell read once, whatever test cell later asks about it: its statements as the
    text shows them (what they bind and read, before any other cell is known), the magics it
    leaves unread, and, for a cell nbgrader restored, the imports it gives the student's cells."""

    def __init__(self, index, source, readable):
        self.index, self.source, self.readable = index, source, readable
        self.statements, self.unread, self.given_imports = [], [], {}
        tree = _parse(source)
        if tree is None:
            return
        if not readable:
            for node in tree.body:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for name, path in _Statement(node, []).imports.items():
                        self.given_imports.setdefault(name, set()).add(path)
            return
        lines = _ipython_to_python(source).splitlines()
        original = source.splitlines()
        for number, name in getattr(tree, "unread_magics", ()):
            text = original[number - 1].strip() if 0 < number <= len(original) else ""
            text = text or next((ln.strip() for ln in original if ln.strip()), f"%{name}")
            self.unread.append((index, text[:100], name))
        self.statements = [_Statement(node, lines) for node in tree.body]


class _StatementIndex:
    """The readable cells before one test cell as a list of statements in the notebook's order,
    and the names they bind: what every question about a route is asked of. It judges nothing
    (that is _RouteJudge's job) and is the same for every exercise the test cell checks."""

    def __init__(self, cell_texts, given_imports=None, failed=()):
        """cell_texts: the readable cells' _CellText in order; failed: indices of the cells that
        raised (their statements may not all have run, so they unbind nothing)."""
        self.statements = []
        self.given = {name: set(paths) for name, paths in (given_imports or {}).items()}
        self.imports = {name: set(paths) for name, paths in self.given.items()}
        self.unread = []  # (cell index, line, magic name): magics dropped unread
        for text in cell_texts:
            self.unread += text.unread
            for base in text.statements:
                self.statements.append(self._placed(base, text.index, text.index not in failed))
        for statement in self.statements:
            for name, path in statement.imports.items():
                self.imports.setdefault(name, set()).add(path)
        self.follow_assigned_aliases(self.statements, self.imports)
        for statement in self.statements:
            statement.binds |= {name for name in statement.receivers if not self._is_module(name)}
            # x.a = ... on a module changes the library, not a name: `torch.backends.cudnn.deterministic
            # = True` is not part of every answer that uses torch (see module_changes).
            statement.module_stores = {root: v for root, v in statement.stores.items() if self._is_module(root)}
            for root in statement.module_stores:
                if root not in statement.assigns and root not in statement.imports:
                    statement.binds.discard(root)

    def _placed(self, base, cell, ran):
        """A statement of a cell put in its place in this prefix: what it binds depends on the
        whole prefix (a name is a module if some cell imports it), so each prefix has its own copy
        of the (shared, unchanged) statement read from the text."""
        statement = copy.copy(base)
        statement.binds = set(base.binds)
        statement.position, statement.ran, statement.cell = len(self.statements), ran, cell
        return statement

    def follow_assigned_aliases(self, statements, imports):
        """`g = guards` or `sm = scipy.special.softmax` at the top level: g and sm name what the
        chain names, for the checks that look at names (a module changed through an alias)."""
        for _ in range(3):
            for statement in statements:
                node = statement.node
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name)):
                    parts = _chain(node.value)
                    for path in (self._paths(parts, imports) if parts else []):
                        imports.setdefault(node.targets[0].id, set()).add(path)

    def _is_module(self, name):
        """Whether the name stands for a module (imported, or given another name for one)."""
        for path in self._paths([name], self.imports) if name else []:
            obj = _resolve(path)
            if isinstance(obj, types.ModuleType) or (obj is None and path.split(".")[0] not in RESOLVED_ROOTS
                                                      and path in self.imports.get(name, ())):
                return True
        return False

    def _bindings(self, name, position, deferred):
        """The statements whose binding of `name` the code at `position` can see: the last
        statement that bound it afresh before `position` (in a cell that ran through) and every
        binding after that one; for code that runs later (a function's body: `deferred`), also
        every binding after `position`; object changes (x.a = ..., x.append(...)) and functions
        that rebind it (`global`) whenever they are."""
        start = 0
        for statement in self.statements[:position]:
            if name in statement.kills and statement.ran:
                start = statement.position
        out = []
        for statement in self.statements[start:]:
            if not (name in statement.binds or statement.wildcard):
                continue
            if statement.position < position or deferred or name not in statement.kills:
                out.append(statement)
        out += [s for s in self.statements[:start] if name in s.late_binds]
        return out

    def reach(self, name, substituted=()):
        """The statements the answer `name` can reach, following names to the bindings that
        code can see, in the notebook's order (a later `def softmax` replaces a scratch `from
        scipy.special import softmax`); not through `substituted`, the earlier exercises' pieces
        the grader replaces by correct ones when it runs this answer (their own test cells judge
        them: one mistake, one penalty). Also the module changes (x.a = ... on a library) whose
        attribute the reach uses."""
        end = len(self.statements)
        seen, reached, todo = set(), [], [(name, end, False)]
        used = {name}
        changes = [(s, root, attr) for s in self.statements for root, stores in s.module_stores.items()
                   for _, attr in stores]
        while todo:
            while todo:
                current, position, deferred = todo.pop()
                if current in substituted or (current, position, deferred) in seen:
                    continue
                seen.add((current, position, deferred))
                for statement in self._bindings(current, position, deferred):
                    if statement in reached:
                        continue
                    reached.append(statement)
                    used |= _names_used(statement.node)
                    todo += [(n, statement.position, False) for n in statement.reads - statement.deferred]
                    todo += [(n, statement.position, True) for n in statement.deferred]
                    # names bound by the same statement share its objects (`f, box = make()`):
                    # whatever later fills `box` reaches `f`
                    todo += [(n, statement.position + 1, True) for n in statement.assigns if n != current]
            for statement, root, attr in changes:
                if statement not in reached and root in used and (attr in used or attr in ("*", None)):
                    reached.append(statement)
                    todo += [(n, statement.position, True) for n in statement.reads]
        return reached

    def paths(self, parts, imports=None):
        """Dotted paths a chain may name, through every import of its first name (anywhere in
        the prefix, unless `imports` says which)."""
        return self._paths(parts, self.imports if imports is None else imports)

    @staticmethod
    def _paths(parts, imports):
        if parts[0] not in imports:
            return []
        return [".".join([base] + parts[1:]) for base in sorted(imports[parts[0]])]

    def binds_anywhere(self, name):
        """Whether some statement of the prefix binds `name` (then it is not the builtin)."""
        return any(name in s.binds for s in self.statements)

    @functools.cached_property
    def written(self):
        """{module name: the magic's line} of the files %%writefile puts beside the notebook
        (`%%writefile scipy.py`), which an import of that name would load in the kernel."""
        out = {}
        for _, line, name in self.unread:
            if name.startswith("writefile ") and (module := _written_module(name.split(" ", 1)[1])):
                out[module] = line
        return out

    @functools.cached_property
    def defined_functions(self):
        """Names the notebook binds to a function or class it defines (`def f`, `f = lambda ...`)."""
        out = set()
        for statement in self.statements:
            node = statement.node
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return out

    @functools.cached_property
    def notes(self):
        """The prefix's lines worth the instructor's look (_notes_of), the same for every exercise."""
        return _notes_of(self)


def _notes_of(index):
    """What the instructor may want to look at, reached by no answer: magics the reader does
    not read, library modules changed, other double-underscore attributes rewritten, frames
    and tracebacks looked into, files written under an installed module's name, the notebook's
    functions handed to other libraries."""
    out = []
    for cell, line, name in index.unread:
        if name.startswith("writefile "):
            module = _written_module(name.split(" ", 1)[1])
            if not module or not _installed(module):
                continue
            out.append(Note(f"worth a look: cell {cell + 1} writes a file named like an installed "
                            f"module (`{line}`); no answer imports it"))
        else:
            out.append(Note(f"worth a look: cell {cell + 1} runs `{line}`, a magic the grader does not "
                            f"read (it reaches no answer)"))
    for statement in index.statements:
        for root, stores in statement.module_stores.items():
            for node, _ in stores:
                out.append(Note(f"worth a look: cell {statement.cell + 1} changes the module `{root}` "
                                f"(`{statement.line(node)}`); no answer uses what it changes"))
        for node in ast.walk(statement.node):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
                    and node.attr.startswith("__") and node.attr not in DISGUISE_ATTRIBUTES):
                out.append(Note(f"worth a look: cell {statement.cell + 1} rewrites `{node.attr}` "
                                f"(`{statement.line(node)}`)"))
            elif isinstance(node, ast.Attribute) and node.attr in FRAME_ATTRIBUTES:
                out.append(Note(f"worth a look: cell {statement.cell + 1} looks into running code's "
                                f"frames (`{statement.line(node)}`)"))
            elif isinstance(node, ast.Name) and node.id == "__builtins__":
                out.append(Note(f"worth a look: cell {statement.cell + 1} uses `__builtins__` "
                                f"(`{statement.line(node)}`)"))
            elif isinstance(node, ast.Call) and (note := _handed_over(index, statement, node)):
                out.append(note)
            elif isinstance(node, (ast.Attribute, ast.Name)) and (parts := _chain(node)):
                for path in index.paths(parts):
                    if _startswith(path, REVIEWED_MODULES):
                        out.append(Note(f"worth a look: cell {statement.cell + 1} uses `{path}` "
                                        f"(`{statement.line(node)}`), which can fetch any function by a "
                                        "route the grader cannot follow"))
                        break
    return list(dict.fromkeys(out))


def _handed_over(index, statement, call):
    """A Note when `call` hands one of the notebook's functions (a name it defines, a lambda)
    to a function of a library outside CALLS_IN_THIS_THREAD, which may run it in another thread
    or process; None otherwise."""
    parts = _chain(call.func)
    paths = [p for p in (index.paths(parts) if parts else []) if not _startswith(p, CALLS_IN_THIS_THREAD)]
    if not paths:
        return None
    for value in [*call.args, *(k.value for k in call.keywords)]:
        value = value.value if isinstance(value, ast.Starred) else value
        if isinstance(value, ast.Lambda):
            given = "a lambda"
        elif isinstance(value, ast.Name) and value.id in index.defined_functions:
            given = f"`{value.id}`"
        else:
            continue
        return Note(f"worth a look: cell {statement.cell + 1} hands {given} to `{paths[0]}` "
                    f"(`{statement.line(call)}`), a library function the grader does not read: it may run "
                    "it in another thread or process, where the check cannot see what it calls")
    return None


class _RouteJudge:
    """Judges one exercise's answer against a prefix's _StatementIndex: the paths its reach names
    (forbidden functions, the course's helpers, routes the grader cannot follow) and what the
    whole prefix does beside the tests. `active`: the imports the reach itself makes (with the
    restored cells'), through which its names are read once the reach is known."""

    def __init__(self, index, answer, forbidden):
        self.index, self.answer = index, answer
        self.forbidden = {}
        for holder, attr, obj, label in guards._aliases(tuple(e for e in forbidden if "::" not in e)):
            self.forbidden.setdefault(id(obj), label)
        self.active = index.imports

    def judge_reach(self, reached, judge_everything):
        """The most telling finding in the statements the answer reaches, or None. Everything
        is judged when the exercise forbids something; otherwise only the course's helpers."""
        self.active = {name: set(paths) for name, paths in self.index.given.items()}
        for statement in reached:
            for name, path in statement.imports.items():
                self.active.setdefault(name, set()).add(path)
        self.index.follow_assigned_aliases(reached, self.active)
        if judge_everything:
            followed = {name for statement in reached for name in statement.binds} | {self.answer}
            found = [self.judge_statement(s, followed) for s in reached]
        else:
            found = [f for s in reached for f in self._course_helpers_in(s)]
        found = [f for f in found if f]
        return min(found, key=lambda f: f.rank) if found else None

    def _course_helpers_in(self, statement):
        """Findings (or None) for each import and each name of a reached statement that leads to
        the course's own helpers."""
        where = f"(the line `{statement.line(statement.node)}`)"
        for name, path in statement.imports.items():
            yield self._judge_path(path, where, course_only=True)
        for node in ast.walk(statement.node):
            parts = _chain(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
            for path in self.paths(parts) if parts else []:
                yield self._judge_path(path, f"(the line `{statement.line(node)}`)", course_only=True)

    def paths(self, parts):
        """Dotted paths a chain may name, through the imports the reach makes."""
        return self.index.paths(parts, self.active)

    def judge_statement(self, statement, followed=None):
        """The statement's most telling finding: a forbidden function named outright says more
        than the container or route that holds it (`SimpleNamespace(sm=scipy.special.softmax)`)."""
        answer = self.answer
        calls = {id(n.func) for n in ast.walk(statement.node) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id in NAME_TAKING_BUILTINS}
        found = [f for f in (self._judge_node(node, statement, calls) for node in ast.walk(statement.node)) if f]
        if isinstance(statement.node, (ast.Import, ast.ImportFrom)):
            # `from course_utils.grading.parts import split_heads`: the import is the answer
            where = f"(the line `{statement.line(statement.node)}`)"
            for name, path in statement.imports.items():
                if followed is None or name in followed:
                    found.append(self._judge_path(path, where))
        for root, stores in getattr(statement, "module_stores", {}).items():
            for node, attr in stores:
                found.append(Finding(f"your notebook changes the module `{root}` (the line "
                                     f"`{statement.line(node)}`), and `{answer}` uses what it changes: answers "
                                     "use libraries as they are; remove the assignment", rank=-1))
        found = [f for f in found if f]
        return min(found, key=lambda f: f.rank) if found else None

    def _judge_node(self, node, statement, calls=()):
        answer, where = self.answer, f"(the line `{statement.line(node)}`)"
        if isinstance(node, ast.Attribute) and node.attr in DYNAMIC_ATTRIBUTES:
            return Finding(f"`{answer}` reaches `.{node.attr}` {where}, a route the grader cannot follow: "
                           "call functions by their names")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in NAME_TAKING_BUILTINS and (
                    len(node.args) < 2 or not isinstance(node.args[1], ast.Constant)):
                return Finding(f"`{answer}` reaches `{node.func.id}` with a computed name {where}: the grader "
                               "cannot tell what that names, so write the attribute out")
        if (isinstance(node, ast.Name) and node.id in NAME_TAKING_BUILTINS and id(node) not in calls
                and node.id not in self.active and not self.index.binds_anywhere(node.id)):
            # `g = getattr`, `getattr.__call__(...)`, `functools.reduce(getattr, ...)`
            return Finding(f"`{answer}` reaches `{node.id}` passed around as a value {where}, a route the "
                           "grader cannot follow: write the attribute out")
        if isinstance(node, ast.Name) and node.id in DYNAMIC_BUILTINS and node.id not in self.active:
            if not self.index.binds_anywhere(node.id):
                return Finding(f"`{answer}` reaches `{node.id}` {where}, which runs code the grader cannot "
                               "read: write the code itself")
        if isinstance(node, ast.Call):
            loader = _chain(node.func)
            for path in self.paths(loader) if loader else []:
                if _unpickles(path, node):
                    return Finding(f"`{answer}` reaches `{path}` {where}, which can load a function from a "
                                   "file (a pickle), a route the grader cannot follow: load numbers only "
                                   "(`weights_only=True`, `allow_pickle=False`) or write the code itself")
        if isinstance(node, (ast.Attribute, ast.Name, ast.Call)):
            parts = _chain(node)
            if parts:
                for path in self.paths(parts):
                    finding = self._judge_path(path, where)
                    if finding:
                        return finding
        return None

    def _judge_path(self, path, where, course_only=False):
        answer = self.answer
        # `grading.questions.numbers(...)` is read node by node: `grading` and `grading.questions`
        # lead to the allowed module and say nothing by themselves (`grading.parts.x` is judged
        # as its own, longer path).
        allowed = any(path == a or a.startswith(path + ".") or path.startswith(a + ".") for a in COURSE_ALLOWED)
        if _startswith(path, COURSE_OFF_LIMITS) and not allowed:
            return Finding(f"`{answer}` reaches `{path}` {where}: the course's own helpers are not part "
                           "of an answer; write it yourself", rank=1)
        if course_only:
            return None
        if _startswith(path, DYNAMIC_MODULES) or path.startswith(DYNAMIC_PREFIXES):
            return Finding(f"`{answer}` reaches `{path}` {where}, a route the grader cannot follow: "
                           "call the functions you need by their names, in this thread")
        root, *rest = path.split(".")
        if root not in RESOLVED_ROOTS and not _installed(root):
            return Finding(f"`{answer}` reaches `{path}` {where}, which is not a library the grader "
                           "knows (a file written from the notebook?): write the code in the notebook")
        if root in self.index.written:
            return Finding(f"`{answer}` reaches `{path}` {where}, a module the notebook writes itself "
                           f"(`{self.index.written[root]}`), in place of the installed one: write the code in the notebook")
        if root == "torch" and (any(p.startswith("_") and not p.startswith("__") for p in rest)
                                or _startswith(path, TORCH_HIDDEN_NAMESPACES)):
            return Finding(f"`{answer}` reaches `{path}` {where}: PyTorch's internal namespaces are "
                           "off limits in this exercise; use its public functions")
        obj = _resolve(path)
        if obj is _MISSING:
            return Finding(f"`{answer}` reaches `{path}` {where}, which the library does not have "
                           "(something in the notebook put it there)")
        if obj is not None and id(obj) in self.forbidden:
            return Finding(f"`{answer}` reaches `{self.forbidden[id(obj)]}` {where}: this exercise asks "
                           "you to write it without it", rank=0)
        return None

    def judge_notebook(self):
        """Findings anywhere in the cells, reached or not: what runs beside the tests (threads,
        processes, IPython's shell and hooks), the grader's internals, a function disguised as
        another. Nothing here can be an honest habit."""
        answer = self.answer
        for statement in self.index.statements:
            for node in ast.walk(statement.node):
                where = f"(the line `{statement.line(node)}`)"
                if isinstance(node, ast.Name) and node.id == "get_ipython":
                    return Finding(f"your notebook uses `get_ipython` {where}: code that runs around the "
                                   f"tests cannot count for `{answer}`; remove it")
                parts = _chain(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
                if parts:
                    for path in self.index.paths(parts):
                        if _startswith(path, CONCURRENT_MODULES):
                            return Finding(f"your notebook uses `{path}` {where}: threads and processes "
                                           f"run beside the tests, so `{answer}` cannot be checked; remove them")
                    for path in self.index.paths(parts):
                        if _startswith(path, ("course_utils.grading",)) and any(
                                p.startswith("_") for p in path.split(".")):
                            return Finding(f"your notebook uses the grader's internals `{path}` {where}; "
                                           f"`{answer}` cannot count while it does: remove it")
                if (isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
                        and node.attr in DISGUISE_ATTRIBUTES):
                    return Finding(f"your notebook rewrites `{node.attr}` {where}: that disguises one "
                                   f"function as another, so `{answer}` cannot count; remove it")
        return None


def _names_used(node):
    """Every name and attribute name a statement mentions."""
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.isidentifier():
            out.add(sub.value)  # getattr(x, "name")
    return out


def _written_module(target):
    """'scipy.py' -> 'scipy', 'pkg/__init__.py' -> 'pkg', 'notes.txt' -> None: the top-level module
    a file written beside the notebook would be imported as."""
    parts = target.strip("'\"").replace("\\", "/").split("/")
    if not parts[-1].endswith(".py"):
        return None
    name = parts[0] if len(parts) > 1 else parts[-1][:-3]
    return name if name.isidentifier() else None


def _unpickles(path, call):
    """Whether a call to `path` may unpickle (and so bring back any function): pickle's loaders,
    `np.load(..., allow_pickle=True)`, `torch.load` unless `weights_only=True`."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg}

    def constant(name, default):
        value = keywords.get(name)
        return value.value if isinstance(value, ast.Constant) else (default if value is None else "?")
    if path in ("numpy.load", "numpy.lib.npyio.load"):
        return constant("allow_pickle", False) is not False
    if path in ("torch.load", "torch.serialization.load"):
        return constant("weights_only", _torch_weights_only_default()) is not True
    return False


@functools.lru_cache(maxsize=1)
def _torch_weights_only_default():
    try:
        import inspect
        import torch
        return inspect.signature(torch.load).parameters["weights_only"].default is not False and \
            tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 6)
    except Exception:  # noqa: BLE001 - without torch nothing loads through it
        return False



class NotebookReader:
    """A notebook's cells, each read once, asked test cell by test cell for what the cells before
    it show. The grader makes one per notebook as it runs it (execute.SandboxedExecute): every
    test cell used to read all the cells before it afresh. A cell is read when a test cell first
    asks about it (by then it has run: whether it raised is read from its outputs at that time),
    and read again only if its source changed."""

    def __init__(self, cells):
        self.cells = cells
        self._texts = {}  # cell index -> _CellText
        self._last = (None, None)  # (what the last prefix was made of, its _StatementIndex)

    def _text(self, index, source, readable):
        text = self._texts.get(index)
        if text is None or text.source != source or text.readable != readable:
            text = self._texts[index] = _CellText(index, source, readable)
        return text

    def _prefix(self, before, readable):
        """The _StatementIndex of the readable cells (`readable_cells(self.cells, before)`)."""
        failed = frozenset(i for i, _ in readable if any(
            o.get("output_type") == "error" for o in self.cells[i].get("outputs", ()) or ()))
        restored = [(i, c.get("source", "") or "") for i, c in enumerate(self.cells[:before])
                    if c.get("cell_type") == "code" and i not in {j for j, _ in readable}]
        key = (tuple(readable), failed, tuple(restored))
        if self._last[0] != key:
            given = {}
            for index, source in restored:
                for name, paths in self._text(index, source, False).given_imports.items():
                    given.setdefault(name, set()).update(paths)
            texts = [self._text(index, source, True) for index, source in readable]
            self._last = (key, _StatementIndex(texts, given, failed))
        return self._last[1]

    def read(self, before, answer, forbidden, substituted=()):
        """(finding, notes) for the test cell at index `before` (see the module's `read`)."""
        readable = readable_cells(self.cells, before)
        # Measured before any parsing: 2 MB of one-line statements cost 36 s of the grader's
        # CPU to index, for every test cell after them.
        if sum(len(source) for _, source in readable) > MAX_SOURCE_CHARS:
            return (Finding(f"your notebook's code is longer than the grader reads ({MAX_SOURCE_CHARS:,} "
                            f"characters), so it cannot tell which functions `{answer}` uses") if forbidden else None), []
        index = self._prefix(before, readable)
        notes = list(index.notes)
        judge = _RouteJudge(index, answer, forbidden or ())
        found = judge.judge_notebook() if forbidden else None
        if found:
            return found, notes
        return judge.judge_reach(index.reach(answer, substituted), bool(forbidden)), notes

    def finding(self, before, answer, forbidden, substituted=()):
        """The sentence failing the test cell at index `before` (see `read`), or None."""
        if not forbidden:
            return None
        return self.read(before, answer, forbidden, substituted)[0]


def read(cells, before, answer, forbidden, substituted=()):
    """(finding, notes) for the test cell at index `before`: the sentence failing it for the
    exercise whose answer is the name `answer` and which forbids `forbidden` ("module:attr"
    entries), or None; and the lines worth the instructor's look, which cost nothing.

    cells: the notebook's cells as the grader ran them; substituted: names of earlier pieces the
    grader replaces by correct ones (Exercise.earlier). An exercise that forbids nothing is still
    read for the course's own helpers in its answer's reach (`from course_utils.grading.parts
    import split_heads` is the answer, shipped to students). This reads the cells afresh; to ask
    about several test cells of one notebook, make one NotebookReader."""
    return NotebookReader(cells).read(before, answer, forbidden, substituted)


def finding(cells, before, answer, forbidden, substituted=()):
    """The sentence failing the test cell at index `before` (see `read`), or None."""
    if not forbidden:
        return None
    return read(cells, before, answer, forbidden, substituted)[0]
