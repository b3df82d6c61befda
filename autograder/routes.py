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

and, anywhere in the notebook before the test cell (reached or not), when a cell starts threads
or processes, registers IPython hooks, or assigns into a library's or the course's module.

Over-approximation is deliberate: a name bound in several cells reaches every binding. Honest
answers never need these routes; every solution, every second correct implementation in
tests/exercises/alternatives_*.py and the real class's notebooks are read without a finding
(tests/grading/test_routes.py).
"""
import ast
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
COURSE_OFF_LIMITS = ("course_utils.widgets", "course_utils.reference", "course_utils.grading")

# Modules whose use an answer's reach may not contain: each can run or find code by a route the
# reader cannot follow.
DYNAMIC_MODULES = (
    "threading", "_thread", "concurrent", "multiprocessing", "asyncio", "subprocess", "signal",
    "importlib", "imp", "builtins", "types", "inspect", "gc", "ctypes", "marshal", "pickle",
    "dill", "cloudpickle", "copyreg", "code", "codeop", "runpy", "pkgutil",
    "sys.modules", "sys.settrace", "sys.setprofile", "sys._getframe", "sys.meta_path", "sys.path_hooks",
    "sys.addaudithook", "operator.attrgetter", "operator.methodcaller", "functools.partial.__call__",
)
# Names that start one of these run other programs or processes (os.execv, os.spawnl, ...).
DYNAMIC_PREFIXES = ("os.system", "os.fork", "os.popen", "os.exec", "os.spawn", "os.posix_spawn", "os.kill")
# Of those, the ones a cell may not even use outside the answer's reach: they run code beside it.
CONCURRENT_MODULES = ("threading", "_thread", "concurrent", "multiprocessing", "asyncio", "subprocess", "signal")

DYNAMIC_BUILTINS = ("eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint",
                    "get_ipython", "open")
NAME_TAKING_BUILTINS = ("getattr", "setattr", "delattr", "hasattr")
DYNAMIC_ATTRIBUTES = (
    "__dict__", "__globals__", "__builtins__", "__subclasses__", "__getattribute__", "__getattr__",
    "__code__", "__closure__", "__wrapped__", "__func__", "__self__", "__mro__",
    "__bases__", "__base__", "__reduce__", "__reduce_ex__", "__setattr__", "__delattr__", "__defaults__",
    "__kwdefaults__", "__loader__", "__spec__", "__import__",
)
TORCH_HIDDEN_NAMESPACES = ("torch.ops", "torch.overrides", "torch.library", "torch.utils._python_dispatch",
                           "torch.compiler", "torch.jit", "torch.fx")


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
# argument or body as Python, which is read as if written without the magic. Any other magic
# (%run, %%writefile, !commands, ...) stays a `get_ipython()` call, which is a finding.
# Shell commands (!pip, %%bash, %%writefile) are harmless here: they cannot change the kernel's
# Python except through a file, and an answer that imports or opens one is refused anyway.
HARMLESS_MAGICS = ("matplotlib", "config", "precision", "load_ext", "reload_ext", "autoreload", "pip", "conda",
                   "debug", "pdb", "xmode", "who", "whos", "who_ls", "history", "pwd", "ls", "env", "writefile",
                   "file", "bash", "sh", "script", "html", "HTML", "markdown", "latex", "javascript", "js", "svg")
TRANSPARENT_MAGICS = ("time", "timeit", "capture", "prun")
SHELL_CALLS = ("system", "getoutput")  # !cmd and x = !cmd


def _magic_free(tree):
    """The module with the magics IPython turned into get_ipython() calls replaced by the Python
    they run (transparent ones) or by nothing (harmless ones)."""
    body = []
    for node in tree.body:
        if isinstance(node, (ast.Expr, ast.Assign)) and _is_ipython_call(node.value, SHELL_CALLS):
            if isinstance(node, ast.Assign):  # x = !ls: x is bound, to text
                node.value = ast.Constant("")
                body.append(node)
            continue
        call = node.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
        magic = call.func.attr if call is not None and isinstance(call.func, ast.Attribute) else None
        if (magic in ("run_line_magic", "run_cell_magic") and isinstance(call.func.value, ast.Call)
                and _chain(call.func.value.func) == ["get_ipython"]
                and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args)
                and call.args):
            name, *rest = [a.value for a in call.args]
            if name in HARMLESS_MAGICS:
                continue
            if name in TRANSPARENT_MAGICS:
                inner = _parse("\n".join(r for r in rest if r) if magic == "run_cell_magic" else rest[0])
                if inner is not None:
                    body.extend(inner.body)
                    continue
        body.append(node)
    tree.body = body
    return tree


@functools.lru_cache(maxsize=512)
def _is_ipython_call(node, methods):
    """`get_ipython().<method>("constant", ...)`, as IPython writes a magic or a shell command."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in methods
            and isinstance(node.func.value, ast.Call) and _chain(node.func.value.func) == ["get_ipython"]
            and all(isinstance(a, ast.Constant) for a in node.args))


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

    def __init__(self, node, lines):
        self.node = node
        self.lines = lines
        self.binds = set()
        self.assigns = set()  # names bound to a new object (not by import, not by changing it)
        self.reads = set()
        self.receivers = set()  # names whose method this statement calls at the top level
        self.imports = {}  # name -> dotted path, for every import anywhere inside
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
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                for alias in sub.names:
                    name = alias.asname or alias.name.split(".")[0]
                    self.imports[name] = alias.name if alias.asname else alias.name.split(".")[0]
            elif isinstance(sub, ast.ImportFrom) and sub.module and not sub.level:
                for alias in sub.names:
                    self.imports[alias.asname or alias.name] = f"{sub.module}.{alias.name}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.binds.update(self.imports)
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
            elif isinstance(sub, ast.Call):
                if isinstance(sub.func, ast.Attribute):
                    root = _root_name(sub.func.value)
                    if root:  # bound here unless it names a module (torch.manual_seed(0))
                        self.receivers.add(root)
                elif isinstance(sub.func, ast.Name) and sub.func.id in ("setattr", "delattr") and sub.args:
                    root = _root_name(sub.args[0])
                    if root:
                        self.binds.add(root)
        try:
            table = symtable.symtable(ast.unparse(node), "cell", "exec")
        except (SyntaxError, ValueError, RecursionError):
            table = None
        if table is not None:
            self.reads = _global_reads(table)


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


def _given_imports(cells, before):
    """name -> {dotted path} of the imports in the cells nbgrader restored (the setup cell's
    `import torch`), which the student's cells use without writing them."""
    imports = {}
    readable = {index for index, _ in readable_cells(cells, before)}
    for index, cell in enumerate(cells[:before]):
        if cell.get("cell_type") != "code" or index in readable:
            continue
        tree = _parse(cell.get("source", "") or "")
        for node in tree.body if tree is not None else ():
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name, path in _Statement(node, []).imports.items():
                    imports.setdefault(name, set()).add(path)
    return imports


class _Reader:
    def __init__(self, sources, forbidden, given_imports=None):
        self.statements = []
        self.imports = {name: set(paths) for name, paths in (given_imports or {}).items()}
        for _, source in sources:
            tree = _parse(source)
            if tree is None:
                continue
            lines = _ipython_to_python(source).splitlines()
            for node in tree.body:
                statement = _Statement(node, lines)
                self.statements.append(statement)
                for name, path in statement.imports.items():
                    self.imports.setdefault(name, set()).add(path)
        self._follow_assigned_aliases()
        for statement in self.statements:
            statement.binds |= {name for name in statement.receivers if not self._is_module(name)}
        self.forbidden = {}
        for holder, attr, obj, label in guards._aliases(tuple(e for e in forbidden if "::" not in e)):
            self.forbidden.setdefault(id(obj), label)

    def _follow_assigned_aliases(self):
        """`g = guards` or `sm = scipy.special.softmax` at the top level: g and sm name what the
        chain names, for the checks that look at names (a module changed through an alias)."""
        for _ in range(3):
            for statement in self.statements:
                node = statement.node
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name)):
                    parts = _chain(node.value)
                    for path in (self.paths(parts) if parts else []):
                        self.imports.setdefault(node.targets[0].id, set()).add(path)

    def _is_module(self, name):
        """Whether the name stands for a module (imported, or given another name for one)."""
        for path in self.paths([name]) if name else []:
            obj = _resolve(path)
            if isinstance(obj, types.ModuleType) or (obj is None and path.split(".")[0] not in RESOLVED_ROOTS
                                                      and path in self.imports.get(name, ())):
                return True
        return False

    def reach(self, name, substituted=()):
        """The statements the answer `name` can reach, following names to their bindings; not
        through `substituted`, the earlier exercises' pieces the grader replaces by correct ones
        when it runs this answer (their own test cells judge them: one mistake, one penalty)."""
        seen_names, reached, todo = set(substituted), [], [name]
        while todo:
            current = todo.pop()
            if current in seen_names:
                continue
            seen_names.add(current)
            for statement in self.statements:
                if current in statement.binds and statement not in reached:
                    reached.append(statement)
                    todo.extend(statement.reads)
        return reached

    def paths(self, parts):
        """Dotted paths a chain may name, through every import of its first name."""
        if parts[0] not in self.imports:
            return []
        return [".".join([base] + parts[1:]) for base in sorted(self.imports[parts[0]])]

    def judge_statement(self, statement, answer):
        """The statement's most telling finding: a forbidden function named outright says more
        than the container or route that holds it (`SimpleNamespace(sm=scipy.special.softmax)`)."""
        found = [f for f in (self._judge_node(node, statement, answer) for node in ast.walk(statement.node)) if f]
        return min(found, key=lambda f: f.rank) if found else None

    def _judge_node(self, node, statement, answer):
        where = f"(the line `{statement.line(node)}`)"
        if isinstance(node, ast.Attribute) and node.attr in DYNAMIC_ATTRIBUTES:
            return Finding(f"`{answer}` reaches `.{node.attr}` {where}, a route the grader cannot follow: "
                           "call functions by their names")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in NAME_TAKING_BUILTINS and (
                    len(node.args) < 2 or not isinstance(node.args[1], ast.Constant)):
                return Finding(f"`{answer}` reaches `{node.func.id}` with a computed name {where}: the grader "
                               "cannot tell what that names, so write the attribute out")
        if isinstance(node, ast.Name) and node.id in DYNAMIC_BUILTINS and node.id not in self.imports:
            if not any(node.id in s.binds for s in self.statements):
                return Finding(f"`{answer}` reaches `{node.id}` {where}, which runs code the grader cannot "
                               "read: write the code itself")
        if isinstance(node, (ast.Attribute, ast.Name, ast.Call)):
            parts = _chain(node)
            if parts:
                for path in self.paths(parts):
                    finding = self._judge_path(path, where, answer)
                    if finding:
                        return finding
        return None

    def _judge_path(self, path, where, answer):
        if _startswith(path, COURSE_OFF_LIMITS):
            return Finding(f"`{answer}` reaches `{path}` {where}: the course's own helpers are not part "
                           "of an answer; write it yourself", rank=1)
        if _startswith(path, DYNAMIC_MODULES) or path.startswith(DYNAMIC_PREFIXES):
            return Finding(f"`{answer}` reaches `{path}` {where}, a route the grader cannot follow: "
                           "call the functions you need by their names, in this thread")
        root, *rest = path.split(".")
        if root not in RESOLVED_ROOTS and not _installed(root):
            return Finding(f"`{answer}` reaches `{path}` {where}, which is not a library the grader "
                           "knows (a file written from the notebook?): write the code in the notebook")
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

    def judge_notebook(self, answer):
        """Findings anywhere in the cells, reached or not: threads, hooks, changed modules."""
        for statement in self.statements:
            for node in ast.walk(statement.node):
                where = f"(the line `{statement.line(node)}`)"
                if isinstance(node, ast.Name) and node.id == "get_ipython":
                    return Finding(f"your notebook uses `get_ipython` {where}: code that runs around the "
                                   f"tests cannot count for `{answer}`; remove it")
                parts = _chain(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
                if parts:
                    for path in self.paths(parts):
                        if _startswith(path, CONCURRENT_MODULES):
                            return Finding(f"your notebook uses `{path}` {where}: threads and processes "
                                           f"run beside the tests, so `{answer}` cannot be checked; remove them")
                    for path in self.paths(parts):
                        if _startswith(path, ("course_utils.grading",)) and any(
                                p.startswith("_") for p in path.split(".")):
                            return Finding(f"your notebook uses the grader's internals `{path}` {where}; "
                                           f"`{answer}` cannot count while it does: remove it")
                if (isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
                        and node.attr.startswith("__")):
                    return Finding(f"your notebook rewrites `{node.attr}` {where}: that disguises one "
                                   f"function as another, so `{answer}` cannot count; remove it")
                if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    root = _root_name(node)
                    if self._is_module(root):
                        return Finding(f"your notebook changes the module `{root}` {where}: answers "
                                       f"use libraries as they are; remove the assignment")
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id in ("setattr", "delattr") and node.args):
                    root = _root_name(node.args[0])
                    if self._is_module(root):
                        return Finding(f"your notebook changes the module `{root}` {where}: answers "
                                       f"use libraries as they are; remove the call")
        return None


def finding(cells, before, answer, forbidden, substituted=()):
    """The sentence failing the test cell at index `before` for the exercise whose answer is the
    name `answer` and which forbids `forbidden` ("module:attr" entries), or None.

    cells: the notebook's cells as the grader ran them; substituted: names of earlier pieces the
    grader replaces by correct ones (Exercise.earlier)."""
    if not forbidden:
        return None
    readable = readable_cells(cells, before)
    if sum(len(source) for _, source in readable) > MAX_SOURCE_CHARS:
        return Finding(f"your notebook's code is longer than the grader reads ({MAX_SOURCE_CHARS:,} "
                       f"characters), so it cannot tell which functions `{answer}` uses")
    reader = _Reader(readable, forbidden, _given_imports(cells, before))
    found = reader.judge_notebook(answer)
    if found:
        return found
    found = [f for f in (reader.judge_statement(s, answer) for s in reader.reach(answer, substituted)) if f]
    return min(found, key=lambda f: f.rank) if found else None


