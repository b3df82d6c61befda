"""The forbidden-API guard: an exercise that asks you to build X fails if you call X.

Two nets catch it. While the student's function runs, each forbidden function is replaced by a
recorder that calls the original (so the function finishes and the message can be precise);
and the function's own global names are checked for a forbidden object imported directly
(`from torch.nn.functional import scaled_dot_product_attention as sdpa`). Any function of
`course_utils.reference` counts as forbidden too: the reference is the answer.
"""
import contextlib
import functools
import importlib
import os
import sys
import traceback

from . import tamper
from .errors import GradingError

ATTENTION_BUILTINS = (
    "torch.nn.functional:scaled_dot_product_attention",
    "torch.nn.functional:multi_head_attention_forward",
    "torch.nn:MultiheadAttention",
)
SOFTMAX_BUILTINS = (
    "torch:softmax",
    "torch:Tensor.softmax",  # the method form, scores.softmax(-1)
    "torch:Tensor.log_softmax",
    "torch.nn.functional:softmax",
    "torch.nn.functional:log_softmax",
    "torch:log_softmax",
    "scipy.special:softmax",
)


def _resolve(entry):
    """"module:attr" or "module:Class.method" -> (the object holding it, its name, the object)."""
    module_name, path = entry.split(":")
    try:
        holder = importlib.import_module(module_name)
    except ImportError:  # scipy may be absent: nothing to forbid then
        return None, None, None
    *parents, attr = path.split(".")
    for parent in parents:
        holder = getattr(holder, parent)
    return holder, attr, getattr(holder, attr, None)


def _reference_functions():
    try:  # load it, so that an import inside the student's function meets the recorder
        importlib.import_module("course_utils.reference")
    except ImportError:  # the student bundle has no reference, so nothing to forbid
        pass
    for name, module in list(sys.modules.items()):
        if name.startswith("course_utils.reference") and module is not None:
            for attr, value in list(vars(module).items()):
                if callable(value) and getattr(value, "__module__", "").startswith("course_utils.reference"):
                    yield module, attr, value


def _is_reference(fn):
    """The reference itself may use the reference (checking it against its own catalogue)."""
    return getattr(fn, "__module__", "").startswith("course_utils.reference")


@contextlib.contextmanager
def _recording(entries, called, forbid_reference=True):
    patched = []

    def recorder(label, original):
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            called.append(label)
            return original(*args, **kwargs)
        return wrapper

    try:
        for entry in entries:
            holder, attr, obj = _resolve(entry)
            if obj is not None:
                patched.append((holder, attr, obj, attr in vars(holder)))
        if forbid_reference:
            for module, attr, value in _reference_functions():
                patched.append((module, attr, value, True))
        for holder, attr, obj, _ in patched:
            label = f"{holder.__module__}.{holder.__qualname__}" if isinstance(holder, type) else holder.__name__
            setattr(holder, attr, recorder(f"{label}.{attr}", obj))
        yield
    finally:
        for holder, attr, obj, own in patched:
            if own:
                setattr(holder, attr, obj)
            else:  # inherited (a method of a base class): remove our override
                delattr(holder, attr)


def _imported_directly(fn, entries):
    forbidden = {id(obj): entry.replace(":", ".") for entry in entries for *_, obj in [_resolve(entry)] if obj is not None}
    if not _is_reference(fn):
        for _, attr, value in _reference_functions():
            forbidden[id(value)] = f"{value.__module__}.{attr}"
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    names = set(code.co_names)
    for const in code.co_consts:  # nested functions defined inside the student's function
        if hasattr(const, "co_names"):
            names |= set(const.co_names)
    found = []
    for name in sorted(names):
        value = getattr(fn, "__globals__", {}).get(name)
        if value is not None and id(value) in forbidden:
            found.append(forbidden[id(value)])
    return found


def describe_arguments(args, kwargs):
    """Arguments as a student reads them: arrays by their shape, the rest by their value."""
    def one(value):
        if hasattr(value, "shape"):
            return f"shape {tuple(value.shape)}"
        text = repr(value)
        # A model or an object prints pages, with memory addresses: its type says enough.
        if "\n" in text or " at 0x" in text or len(text) > 60:
            return f"a {type(value).__name__}"
        return text

    return ", ".join([one(a) for a in args] + [f"{name}={one(v)}" for name, v in (kwargs or {}).items()])


def crash_message(name, error, args, kwargs, hint=""):
    """One sentence for a student's function that raised: the error, the arguments' shapes, and
    the student's own line where it happened (course and library frames are left out)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if f"{os.sep}course_utils{os.sep}" not in f.filename and "site-packages" not in f.filename]
    where = f" (line {frames[-1].lineno}: `{frames[-1].line}`)" if frames and frames[-1].line else ""
    detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return (
        f"{name} raised {type(error).__name__}" + (f" ({detail})" if detail else "")
        + f" when called with {describe_arguments(args, kwargs)}{where}" + (f"; {hint}." if hint else ".")
    )


def call_without(fn, args=(), kwargs=None, forbidden=(), exercise="this exercise", hint="", name=None):
    """Call fn(*args, **kwargs); GradingError if it used a forbidden function or raised.

    `name` is how messages call the function (default: its own name, in backticks)."""
    tamper.verify()
    found = _imported_directly(fn, forbidden)
    called = []
    with _recording(forbidden, called, forbid_reference=not _is_reference(fn)):
        try:
            result = fn(*args, **(kwargs or {}))
        except GradingError:
            raise
        except Exception as error:  # the student's code raised: one sentence, not our traceback
            name = name or f"`{getattr(fn, '__name__', 'your function')}`"
            raise GradingError(crash_message(name, error, args, kwargs, hint)) from None
    used = sorted(set(found) | set(called))
    if used:
        raise GradingError(
            f"Your code uses {', '.join(used)}: {exercise} asks you to build that yourself, "
            "so it is off limits here."
        )
    tamper.verify()
    return result
