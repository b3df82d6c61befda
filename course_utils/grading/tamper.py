"""The tamper guard: a submission must not pass by replacing what the tests compare with.

When `course_utils.grading` is first imported (by the locked setup cell, before any student
code runs), `capture()` records the comparison functions of NumPy and PyTorch. Every check
calls `verify()`, which raises `TamperError` naming anything that has been reassigned since,
and anything in a `course_utils` module that now holds an object defined in the notebook itself.

PyTorch is recorded when it is imported, not before: importing it costs about 2 CPU-seconds,
which a notebook (or a grader's kernel) that never uses it should not pay. If the notebook has
not imported it when `capture()` runs, a finder first on `sys.meta_path` records its originals
the moment its import finishes, before the code that imported it gets control back. A PyTorch
that is loaded while its originals were never recorded got around that finder: `verify()` then
names everything of it that it watches, so no test can pass.

This stops naive tampering (`np.allclose = lambda *a, **k: True`); it is not a sandbox. The
autograder adds isolation around it.
"""
import importlib
import importlib.abc
import sys

from . import namespaces
from .errors import TamperError

# "module:attribute" pairs that tests rely on, directly or through NumPy and PyTorch.
WATCHED = (
    "numpy:allclose",
    "numpy:isclose",
    "numpy:array_equal",
    "numpy:abs",
    "numpy:isfinite",
    "numpy:asarray",
    "numpy:array",  # every comparison turns its arguments into arrays first
    "numpy:asanyarray",
    "numpy.testing:assert_allclose",
    "numpy.testing:assert_array_equal",
    "numpy.testing:assert_array_almost_equal",
    "numpy.testing:assert_almost_equal",
    "numpy.testing:assert_equal",
    "torch:allclose",
    "torch:isclose",
    "torch:equal",
    "torch:is_tensor",
    "torch:as_tensor",
    "torch:tensor",
    "torch.testing:assert_close",
    "builtins:isinstance",
    "builtins:AssertionError",
)

# Modules of the notebook itself: an object defined there and found inside course_utils was
# put there by the notebook.
_NOTEBOOK_MODULES = ("__main__", "__mp_main__")

# Recorded at its import, if the notebook has not imported it by capture(): see the docstring.
DEFERRED = ("torch",)

_originals = {}
_captured_modules = {}
_pending = {}  # top-level module of DEFERRED not imported at capture() -> its WATCHED entries


def capture():
    """Record the originals. Idempotent: only the first call (before student code) counts."""
    if _originals or _pending:
        return
    for entry in WATCHED:
        top = entry.split(":")[0].split(".")[0]
        if top in DEFERRED and top not in sys.modules:
            _pending.setdefault(top, []).append(entry)
        else:
            _record(entry)
    if _pending:
        sys.meta_path.insert(0, _RecordOnImport())
    for name, module in list(sys.modules.items()):
        if name == "course_utils" or name.startswith("course_utils."):
            _captured_modules[name] = {k: v for k, v in vars(module).items() if callable(v)}


def _record(entry):
    module_name, attr = entry.split(":")
    _originals[entry] = getattr(importlib.import_module(module_name), attr)


class _RecordOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a module of `_pending` it asks the finders after it, and has
    the module's loader record that module's originals as soon as the module has run."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None:
            spec.loader = _RecordAfterRunning(spec.loader, fullname)
        return spec


class _RecordAfterRunning(importlib.abc.Loader):
    def __init__(self, loader, name):
        self.loader, self.name = loader, name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        # The module sees its own loader, never this wrapper, from its first line on.
        module.__spec__.loader = module.__loader__ = self.loader
        self.loader.exec_module(module)
        for entry in _pending.pop(self.name, ()):
            _record(entry)
        if not _pending:
            sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _RecordOnImport)]


def original(entry):
    """The captured original of a watched entry, e.g. original("numpy:allclose")."""
    return _originals[entry]


def _replaced_watched():
    for entry, obj in _originals.items():
        module_name, attr = entry.split(":")
        module = sys.modules.get(module_name)
        if module is None or getattr(module, attr, None) is not obj:
            yield f"{module_name}.{attr}"
    for top, entries in list(_pending.items()):
        if top in sys.modules:  # loaded, yet never recorded: its import went around the finder
            yield from (entry.replace(":", ".") for entry in entries)


def _defined_in_notebook(obj):
    return getattr(obj, "__module__", None) in _NOTEBOOK_MODULES


def _replaced_in(name, keys, values):
    before = _captured_modules.get(name, {})
    for attr, value in zip(keys, values):
        if type(attr) is not str:  # only the student puts such a key into a module
            yield f"{name}.<a {type(attr).__name__} key>"
            continue
        if attr.startswith("__"):
            continue
        if attr in before and value is not before[attr]:
            yield f"{name}.{attr}"
        elif callable(value) and _defined_in_notebook(value):
            yield f"{name}.{attr}"


# Modules found clean, remembered while they hold what was scanned (namespaces.py): a check
# pays a few identity comparisons per module, not a read of every attribute. (A function changed
# in place, say its __code__, is the same object: the scan never caught that either.)
_clean = namespaces.Remembered()


def _replaced_course_functions():
    for name in namespaces.loaded("course_utils"):
        module = sys.modules.get(name)
        if module is None or _clean.lookup(name, module)[0]:
            continue
        keys, values = _clean.snapshot(module)
        found = list(_replaced_in(name, keys, values))
        if found:
            _clean.forget(name)
            yield from found
        else:
            _clean.keep(name, module, keys, values, True)


def tampered():
    """Names of everything reassigned since capture(), sorted; empty when all is well."""
    return sorted(set(_replaced_watched()) | set(_replaced_course_functions()))


def verify():
    """Raise TamperError if anything the tests rely on has been replaced."""
    names = tampered()
    if names:
        raise TamperError(
            "Tampering detected: this notebook reassigned "
            + ", ".join(names)
            + ". Tests cannot pass while it does; restart the kernel and remove that code."
        )
