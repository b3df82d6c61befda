"""The forbidden-API guard: an exercise that asks you to build X fails if you call X.

An exercise forbids what a function *is*, not one name for it. Three nets catch it:

* while the student's function runs, each forbidden function is replaced by a recorder that
  calls the original (so the function finishes and the message can be precise), under every
  name it has: the same object is looked up in the namespaces where PyTorch, SciPy and
  scikit-learn expose their functions (`torch.conv2d` is `torch.nn.functional.conv2d`);
* the function's own global names are checked for a forbidden object imported directly
  (`from torch.nn.functional import scaled_dot_product_attention as sdpa`);
* entries of the form "aten::op" forbid a PyTorch operator whatever Python name reaches it
  (`torch.special.softmax`, `torch._softmax`, `F.softmin(-x)`, `torch._C.TensorBase.softmax`,
  `torch.ops.aten._softmax` all run `aten::_softmax`): a dispatch mode records it;
* a torch-function mode sees every PyTorch function called with tensors by the object it is,
  so a forbidden one reached through a namespace nobody can patch
  (`torch._C._VariableFunctions.cosine_similarity`, `torch._VF.rnn_tanh_cell`) is recorded too.

These nets run inside the student's kernel, which the student controls: they give the message.
Under the autograder the verdict does not depend on them alone: the grader also reads the
notebook's text, in its own process, for routes these nets cannot see (a library function kept in
an object, called from a thread or with PyTorch's modes switched off): autograder/routes.py.

Only the outermost forbidden call is reported (`torch.func.jacrev` runs `torch.autograd.grad`
inside: the student used jacrev). Any function of `course_utils.reference` counts as
forbidden too: the reference is the answer.
"""
import contextlib
import functools
import importlib
import os
import sys
import threading
import traceback

from . import namespaces, tamper
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
    "torch.nn.functional:softmin",  # softmin(-x) is softmax(x)
    "torch:log_softmax",
    "torch:_softmax",
    "torch:_log_softmax",
    "torch.special:softmax",
    "torch.special:log_softmax",
    "scipy.special:softmax",
    "scipy.special:log_softmax",
    "sklearn.utils.extmath:softmax",
    "aten::_softmax",  # any other name of the same operator (nn.Softmax, torch.ops.aten, ...)
    "aten::_log_softmax",
)
# Automatic differentiation: an exercise that asks for a derivative by hand forbids them all.
AUTOGRAD_BUILTINS = (
    "torch.autograd:grad",
    "torch.autograd:backward",
    "torch:Tensor.backward",
    "torch.autograd:_engine_run_backward",  # where every reverse-mode route ends up
    "torch.autograd.functional:jacobian",
    "torch.autograd.functional:hessian",
    "torch.autograd.functional:vjp",
    "torch.autograd.functional:jvp",
    "torch.autograd.functional:vhp",
    "torch.autograd.functional:hvp",
    "torch.autograd.forward_ad:make_dual",
    "torch.func:jacrev",
    "torch.func:jacfwd",
    "torch.func:vjp",
    "torch.func:jvp",
    "torch.func:grad",
    "torch.func:grad_and_value",
    "torch.func:hessian",
    "torch.func:linearize",
)
# A 2-D convolution, under any name (F.conv2d is torch.conv2d; nn.Conv2d calls it).
CONV_BUILTINS = (
    "torch.nn.functional:conv2d",
    "torch.nn:Conv2d",
    "torch:convolution",
    "torch:_convolution",
    "aten::convolution",
    "aten::_convolution",
)
# Cutting sliding blocks out of an image (im2col): F.unfold and nn.Unfold. (Tensor.unfold, a
# strided view of one axis, is a different function.)
UNFOLD_BUILTINS = (
    "torch.nn.functional:unfold",
    "torch.nn:Unfold",
    "aten::im2col",
)

# Modules that are slow to import are looked at only once something has imported them (a
# student who calls them has imported them in an earlier cell).
_ONLY_IF_LOADED = ("sklearn",)

# Where functions live under other names: a forbidden object found here is forbidden here too.
_NAMESPACES = (
    "torch", "torch.functional", "torch.nn.functional", "torch.special", "torch.nn", "torch.Tensor",
    "torch._C._nn", "torch._C._special", "torch.autograd", "torch.autograd.functional",
    "torch.autograd.graph", "torch.func", "torch._functorch.eager_transforms", "torch._functorch.apis",
    "scipy.special", "scipy.special._logsumexp", "sklearn.utils.extmath",
)


def _is_op(entry):
    return "::" in entry


def _import(module_name):
    if module_name.startswith(_ONLY_IF_LOADED) and module_name not in sys.modules:
        return None
    try:
        return importlib.import_module(module_name)
    except ImportError:  # scipy may be absent: nothing to forbid then
        return None


def _namespace(name):
    """A module, or a class inside one ("torch.Tensor"), or None."""
    module = _import(name)
    if module is not None:
        return module
    parent, _, attr = name.rpartition(".")
    holder = _import(parent) if parent else None
    return getattr(holder, attr, None) if holder is not None else None


def _resolve(entry):
    """"module:attr" or "module:Class.method" -> (the object holding it, its name, the object)."""
    if _is_op(entry):
        return None, None, None
    module_name, path = entry.split(":")
    holder = _import(module_name)
    if holder is None:
        return None, None, None
    *parents, attr = path.split(".")
    for parent in parents:
        holder = getattr(holder, parent)
    return holder, attr, getattr(holder, attr, None)


def _label(holder, attr):
    if isinstance(holder, type):
        return f"{holder.__module__}.{holder.__qualname__}.{attr}"
    return f"{holder.__name__}.{attr}"


def _find_aliases(entries):
    """(holder, attr, obj, label) for every name of every forbidden object: the entry itself,
    then the same object under other names in _NAMESPACES. Cached per tuple of entries (the
    objects are PyTorch's, SciPy's and scikit-learn's own, which nothing may replace)."""
    entries = tuple(entries)
    found, seen = [], set()
    targets = {}
    for entry in entries:
        holder, attr, obj = _resolve(entry)
        if obj is None or (id(holder), attr) in seen:
            continue
        seen.add((id(holder), attr))
        label = entry.replace(":", ".")
        found.append((holder, attr, obj, label))
        targets.setdefault(id(obj), label)
    for name in _NAMESPACES:
        space = _namespace(name)
        if space is None:
            continue
        try:
            items = list(vars(space).items())
        except TypeError:
            continue
        for attr, value in items:
            if id(value) in targets and (id(space), attr) not in seen:
                seen.add((id(space), attr))
                found.append((space, attr, value, _label(space, attr)))
    return tuple(found)


@functools.lru_cache(maxsize=None)
def _cached_aliases(entries, loaded):
    return _find_aliases(entries)


def _aliases(entries):
    """_find_aliases, cached per tuple of entries and per set of optional modules loaded."""
    loaded = tuple(m for m in _ONLY_IF_LOADED if m in sys.modules)
    return _cached_aliases(tuple(entries), loaded)


# Each reference module's functions, remembered while the module holds what was read
# (namespaces.py): every guarded call lists them twice, and the tests load hundreds.
_reference_seen = namespaces.Remembered()


def _reference_functions():
    try:  # load it, so that an import inside the student's function meets the recorder
        importlib.import_module("course_utils.reference")
    except ImportError:  # the student bundle has no reference, so nothing to forbid
        pass
    for name in namespaces.loaded("course_utils.reference"):
        module = sys.modules.get(name)
        if module is None:
            continue
        known, functions = _reference_seen.lookup(name, module)
        if not known:
            keys, values = _reference_seen.snapshot(module)
            functions = [(module, attr, value, _label(module, attr)) for attr, value in zip(keys, values)
                         if callable(value) and _is_reference(value)]
            _reference_seen.keep(name, module, keys, values, functions)
        yield from functions


def _is_reference(fn):
    """The reference itself may use the reference (checking it against its own catalogue)."""
    return getattr(fn, "__module__", "").startswith("course_utils.reference")


_state = threading.local()


def _depth():
    return getattr(_state, "depth", 0)


def _op_mode(ops, called):
    """A dispatch mode recording the forbidden operators run outside any recorded call."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class ForbiddenOps(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls):
            # PyTorch otherwise wraps __torch_dispatch__ in torch._disable_dynamo, which imports
            # TorchDynamo (a second of CPU) the first time any operator runs under the guard, and
            # adds a wrapper to every operator's dispatch. Nothing here is ever compiled.
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.name() if hasattr(func, "name") else str(func)
            if _depth() == 0 and name.split(".")[0] in ops:
                called.append(f"{name.split('.')[0].replace('::', '.')} (the operator, whatever you called it)")
            return func(*args, **(kwargs or {}))

    return ForbiddenOps()


def _function_mode(targets, called):
    """A torch-function mode recording a forbidden PyTorch function called outside any recorded
    call. PyTorch hands the mode the function object itself, whatever name the student used; a
    composite operator (no "aten::" entry sees it) is caught here as well."""
    from torch.overrides import TorchFunctionMode

    class ForbiddenFunctions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            label = targets.get(id(func))
            if label is not None and _depth() == 0:
                called.append(label)
            return func(*args, **(kwargs or {}))

    return ForbiddenFunctions()


# One recording wrapper per (function, label), made once and patched in at every guarded call:
# a guarded call patches a few hundred names where the reference is loaded (the tests, nbval),
# and making their wrappers anew each time (functools.wraps) was most of the guard's cost.
# While patched in, a wrapper records into the list of the call that patched it (the last one
# on its `sinks`); once removed, a copy the student kept records nothing.
_recorders = {}  # (id(original), label) -> (original, wrapper, sinks)


def _recorder(label, original):
    kept = _recorders.get((id(original), label))
    if kept is not None and kept[0] is original:
        return kept[1], kept[2]
    sinks = []

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if not sinks:  # a copy kept from an earlier call: the other nets see the original
            return original(*args, **kwargs)
        if _depth() == 0:
            sinks[-1].append(label)
        _state.depth = _depth() + 1
        try:
            return original(*args, **kwargs)
        finally:
            _state.depth -= 1

    _recorders[(id(original), label)] = (original, wrapper, sinks)
    return wrapper, sinks


@contextlib.contextmanager
def _recording(entries, called, forbid_reference=True):
    patched = []
    ops = {entry for entry in entries if _is_op(entry)}
    wanted = [(holder, attr, obj, label) for holder, attr, obj, label in _aliases(entries)
              if getattr(holder, attr, None) is obj]
    if forbid_reference:
        wanted += _reference_functions()
    try:
        for holder, attr, obj, label in wanted:
            own = attr in vars(holder)
            wrapper, sinks = _recorder(label, obj)
            try:
                setattr(holder, attr, wrapper)
            except (AttributeError, TypeError):  # a read-only namespace: the other nets remain
                continue
            sinks.append(called)
            patched.append((holder, attr, obj, own, sinks))
        # Keyed by the originals: a call through a patched name reaches the mode as the
        # original inside our recorder (depth 1), and is recorded once, by the recorder.
        targets = {id(obj): label for _, _, obj, label in wanted}
        with contextlib.ExitStack() as modes:
            if targets:
                modes.enter_context(_function_mode(targets, called))
            if ops:
                modes.enter_context(_op_mode(ops, called))
            yield
    finally:
        for holder, attr, obj, own, sinks in reversed(patched):
            if own:
                setattr(holder, attr, obj)
            else:  # inherited (a method of a base class): remove our override
                delattr(holder, attr)
            sinks.pop()


def _imported_directly(fn, entries):
    forbidden = {}
    for *_, obj, label in _aliases(entries):
        forbidden.setdefault(id(obj), label)
    if not _is_reference(fn):
        for _, attr, value, _ in _reference_functions():
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
    for cell in getattr(fn, "__closure__", None) or ():  # a forbidden object held by a closure
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if id(value) in forbidden:
            found.append(forbidden[id(value)])
    return found


def describe_arguments(args, kwargs):
    """Arguments as a student reads them: arrays by their shape, the rest by their value."""
    def one(value):
        if hasattr(value, "shape"):
            try:
                laid_out = "" if value.is_contiguous() else " (not contiguous in memory, as a transposed view is)"
            except Exception:  # noqa: BLE001 - NumPy arrays and odd objects: their shape says enough
                laid_out = ""
            return f"shape {tuple(value.shape)}{laid_out}"
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
    if type(error) is NotImplementedError and not detail:
        called = describe_arguments(args, kwargs)
        return (f"{name} is not answered yet: it still raised NotImplementedError"
                + (f" when called with {called}" if called else "")
                + "; replace `raise NotImplementedError()` with your code.")
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
