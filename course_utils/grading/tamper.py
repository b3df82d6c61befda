"""The tamper guard: a submission must not pass by replacing what the tests compare with.

When `course_utils.grading` is first imported (by the locked setup cell, before any student
code runs), `capture()` records the comparison functions of NumPy and PyTorch. Every check
calls `verify()`, which raises `TamperError` naming anything that has been reassigned since,
and anything in a `course_utils` module that now holds an object defined in the notebook itself.

This stops naive tampering (`np.allclose = lambda *a, **k: True`); it is not a sandbox. The
autograder adds isolation around it.
"""
import importlib
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

_originals = {}
_captured_modules = {}


def capture():
    """Record the originals. Idempotent: only the first call (before student code) counts."""
    if _originals:
        return
    for entry in WATCHED:
        module_name, attr = entry.split(":")
        module = importlib.import_module(module_name)
        _originals[entry] = getattr(module, attr)
    for name, module in list(sys.modules.items()):
        if name == "course_utils" or name.startswith("course_utils."):
            _captured_modules[name] = {k: v for k, v in vars(module).items() if callable(v)}


def original(entry):
    """The captured original of a watched entry, e.g. original("numpy:allclose")."""
    return _originals[entry]


def _replaced_watched():
    for entry, obj in _originals.items():
        module_name, attr = entry.split(":")
        module = sys.modules.get(module_name)
        if module is None or getattr(module, attr, None) is not obj:
            yield f"{module_name}.{attr}"


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
