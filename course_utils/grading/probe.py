"""Run a student's answer on the grader's cases and send what it returned out as plain data.

Why: under the autograder the student's kernel holds neither the reference nor the mistake
catalogue (its course_utils has no `reference/`), so nothing there can say whether an answer
is right, and nothing there can be bribed into saying it is. The grader writes each exercise's
cases (inputs only) into a file the sandbox can read; a hidden test calls `record`, which runs
the answer on every case under the forbidden-API guard and publishes the results as one display
message of its own MIME type. The grader takes those messages off the cell before anything else
sees them and judges them in its own process with the catalogue (autograder/judge.py).

The same code serves the course's tests and the solution notebooks: `collect`, then `roundtrip`
(written and read back as the grader does), then the catalogue's `judge`.

What crosses the boundary is plain data only: tensors (rebuilt as plain `torch.Tensor`s by
`torch.load(weights_only=True)`), NumPy arrays and scalars (as bytes with their dtype), numbers,
strings, None, and lists, tuples and dicts of those. Anything else a student returns arrives as
`Opaque(type name)`, which equals nothing. A case may also hold a course model or object made
with `portable(cls, **kwargs)`: it travels as its class, arguments and (for a module) state, and
is rebuilt in the sandbox; results never carry such objects back (the grader's side reads them
as `Opaque`).
"""
import base64
import copy
import importlib
import inspect
import io
import os

import numpy as np

from .errors import GradingError
from .guards import call_without


class _PyTorchAtFirstUse:
    """`torch`, imported the first time this module touches it, which then replaces this stand-in
    as the module's `torch`. The grader imports this module in every worker and batch for its
    constants (MIME, CHECK, ...); one that grades a notebook without hidden checks never reads a
    tensor and need not pay PyTorch's 2 CPU-seconds."""

    def __getattr__(self, name):
        global torch
        torch = importlib.import_module("torch")
        return getattr(torch, name)


torch = _PyTorchAtFirstUse()

CASES_ENV = "COURSE_HIDDEN_CASES"
MIME = "application/vnd.attention-course.probe+json"
DIAGNOSE, CHECK = "diagnose", "check"
_NDARRAY, _NPSCALAR, _OPAQUE, _PORTABLE = "\x00ndarray", "\x00npscalar", "\x00opaque", "\x00portable"
# Records larger than this are not sent (the grader would refuse them): the answer then fails
# with a sentence saying why. Real records are a few kB to a few hundred kB.
MAX_RECORD_BYTES = 8 * 2**20


class Opaque:
    """A value that is not plain data (an object of the student's own class, a function...)."""

    def __init__(self, type_name):
        self.type_name = str(type_name)[:80]

    def __repr__(self):
        return f"a {self.type_name}"

    def __eq__(self, other):
        return False

    __hash__ = None


# --------------------------------------------------------------------------- plain data

def portable(cls, **kwargs):
    """cls(**kwargs), marked so that it can be a case's input: in the sandbox it is rebuilt from
    its class (a public course_utils one) and these arguments, and a module also gets back its
    weights, dtype, train/eval mode and requires_grad flags. Constructors must be deterministic
    given their arguments and the global seed (modules: their state is carried anyway)."""
    obj = cls(**kwargs)
    obj._probe_init = (f"{cls.__module__}:{cls.__qualname__}", dict(kwargs))
    return obj


def _encode_portable(value, init):
    path, kwargs = init
    out = {_PORTABLE: str(path), "kwargs": encode(dict(kwargs))}
    if isinstance(value, torch.nn.Module):
        params = list(value.parameters())
        out["state"] = {str(k): _tensor(v) for k, v in value.state_dict().items()}
        out["dtype"] = str(params[0].dtype).replace("torch.", "") if params else ""
        out["training"] = bool(value.training)
        out["requires_grad"] = [bool(p.requires_grad) for p in params]
    return out


def _rebuild(value):
    """A portable object from its description; only public course classes are rebuilt."""
    module_name, _, name = str(value[_PORTABLE]).partition(":")
    if not module_name.startswith("course_utils.") or module_name.startswith("course_utils.reference"):
        return Opaque(value[_PORTABLE])
    cls = importlib.import_module(module_name)
    for part in name.split("."):
        cls = getattr(cls, part)
    with torch.random.fork_rng():  # building draws random numbers: not from the student's stream
        obj = cls(**decode(value["kwargs"], portable=True))
    if isinstance(obj, torch.nn.Module):
        if value.get("dtype"):
            obj.to(getattr(torch, value["dtype"]))
        obj.load_state_dict(value["state"])
        obj.train(bool(value["training"]))
        for param, flag in zip(obj.parameters(), value["requires_grad"]):
            param.requires_grad_(bool(flag))
    obj._probe_init = (value[_PORTABLE], decode(value["kwargs"], portable=True))
    return obj


def _tensor(value):
    """A plain, dense, detached CPU copy of a tensor (subclasses lose their class)."""
    with torch._C.DisableTorchFunctionSubclass():
        value = value.detach()
        if type(value) is not torch.Tensor:
            value = value.as_subclass(torch.Tensor)
        if value.layout != torch.strided:
            value = value.to_dense()
        return value.cpu().clone()


def encode(value, depth=0):
    """`value` as plain data that torch.load(weights_only=True) can read back."""
    if depth > 20:
        return {_OPAQUE: "deeply nested value"}
    if value is None or isinstance(value, (bool, int, float, str, bytes)) and type(value) in (
            bool, int, float, str, bytes):
        return value
    if isinstance(value, torch.Tensor):
        return _tensor(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            return {_OPAQUE: f"NumPy array of dtype {value.dtype}"}
        array = np.ascontiguousarray(value)
        # an empty array's b"" would be pickled as a call to bytes(), which weights_only refuses
        return {_NDARRAY: array.dtype.str, "shape": list(array.shape), "data": array.tobytes() if array.size else None}
    if isinstance(value, np.generic) and np.dtype(type(value)).kind in "biufc":
        return {_NPSCALAR: np.dtype(type(value)).str, "data": np.asarray(value).tobytes()}
    if type(value) in (list, tuple):
        items = [encode(v, depth + 1) for v in value]
        return items if type(value) is list else tuple(items)
    if isinstance(value, dict) and all(type(k) is str for k in value):  # OrderedDict too
        return {str(k): encode(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # a subclass: keep the values, not the class
        return [encode(v, depth + 1) for v in list(value)]
    init = getattr(value, "_probe_init", None)
    if isinstance(init, tuple) and len(init) == 2:
        return _encode_portable(value, init)
    return {_OPAQUE: type(value).__name__}


# --------------------------------------------------------------------------- limits
# What `loads` and `decode` accept, checked on what torch.load returned before anything is
# built from it: a record of a kB can hold a list that refers to itself 2**22 ways (pickle's
# shared references), or a stride-0 tensor of 8 stored bytes and 150 million elements. Each
# shared reference counts as often as it is reached, and a tensor by its declared size. Real
# records are far inside these (a few hundred kB; see MAX_RECORD_BYTES); the grader's own case
# files (`portable=True`) get CASES_LIMITS.
RESULT_LIMITS = {"depth": 48, "items": 1_000_000, "bytes": 64 * 2**20}
CASES_LIMITS = {"depth": 48, "items": 20_000_000, "bytes": 2 * 2**30}


class LimitError(ValueError):
    """Data over RESULT_LIMITS: its message is a sentence's end ("are nested more than ...")."""


def _check_limits(value, limits, storage_bytes=None):
    """Raise LimitError when value, fully expanded, goes over limits (depth, items, bytes);
    the walk visits each distinct object once (shared ones are counted by their expanded size),
    so it is fast whatever the data claims to hold."""
    memo, active = {}, set()
    max_depth, max_items, max_bytes = limits["depth"], limits["items"], limits["bytes"]

    def walk(node, depth):
        if depth > max_depth:
            raise LimitError(f"are nested more than {max_depth} levels deep")
        key = id(node)
        if key in memo:
            return memo[key]
        if isinstance(node, torch.Tensor):
            nbytes = int(node.numel()) * node.element_size()
            if storage_bytes is not None and node.untyped_storage().nbytes() > storage_bytes:
                raise LimitError("declare more stored data than they contain")
            size = (1, nbytes)
        elif isinstance(node, (str, bytes, bytearray)):
            size = (1, len(node))
        elif isinstance(node, (list, tuple, dict)):
            if key in active:
                raise LimitError("refer to themselves")
            active.add(key)
            items, nbytes = 1, 0
            children = [c for kv in node.items() for c in kv] if isinstance(node, dict) else node
            if len(children) > max_items:
                raise LimitError(f"hold more than {max_items:,} values")
            for child in children:
                i, b = walk(child, depth + 1)
                items, nbytes = items + i, nbytes + b
                if items > max_items:
                    raise LimitError(f"hold more than {max_items:,} values")
                if nbytes > max_bytes:
                    raise LimitError(f"hold more than {max_bytes // 2**20:,} MB of data")
            active.discard(key)
            if isinstance(node, dict) and _NDARRAY in node:
                try:
                    count = 1
                    for n in node.get("shape", ()):
                        count *= max(int(n), 0)
                    itemsize = np.dtype(node[_NDARRAY]).itemsize
                except (TypeError, ValueError, OverflowError):
                    raise LimitError("hold an array that cannot be read") from None
                nbytes += count * itemsize
            size = (items, nbytes)
        else:
            size = (1, 8)
        if size[0] > max_items:
            raise LimitError(f"hold more than {max_items:,} values")
        if size[1] > max_bytes:
            raise LimitError(f"hold more than {max_bytes // 2**20:,} MB of data")
        memo[key] = size
        return size

    walk(value, 0)


def decode(value, portable=False, limits=None):
    """The inverse of `encode`, on data read back with weights_only=True. Portable objects are
    rebuilt only when `portable` (cases, on their way into the sandbox); results never build
    anything. The data is checked against `limits` (default: RESULT_LIMITS, or CASES_LIMITS when
    portable) before anything is built: LimitError otherwise."""
    _check_limits(value, limits or (CASES_LIMITS if portable else RESULT_LIMITS))
    return _decode(value, portable)


def _decode(value, portable=False):
    if isinstance(value, dict):
        if _NDARRAY in value:
            return np.frombuffer(bytes(value["data"] or b""), dtype=np.dtype(value[_NDARRAY])).reshape(
                [int(n) for n in value["shape"]]).copy()
        if _NPSCALAR in value:
            return np.frombuffer(bytes(value["data"]), dtype=np.dtype(value[_NPSCALAR]))[0]
        if _OPAQUE in value:
            return Opaque(value[_OPAQUE])
        if _PORTABLE in value:
            return _rebuild(value) if portable else Opaque(value[_PORTABLE])
        return {str(k): _decode(v, portable) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, portable) for v in value]
    if isinstance(value, tuple):
        return tuple(_decode(v, portable) for v in value)
    if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
        return value.as_subclass(torch.Tensor)
    return value


def dumps(value):
    buffer = io.BytesIO()
    torch.save(encode(value), buffer)
    return buffer.getvalue()


def loads(data, portable=False, limits=None):
    """Plain data from bytes, whatever wrote them: only tensors and Python's basic types load.

    Results (not `portable`) are refused (LimitError) when over MAX_RECORD_BYTES, when not in
    torch.save's zip format (the legacy format allocates the storage sizes it declares), or,
    once read, over RESULT_LIMITS; see `decode`."""
    limits = limits or (CASES_LIMITS if portable else RESULT_LIMITS)
    if not portable and len(data) > MAX_RECORD_BYTES:
        raise LimitError(f"are larger than {MAX_RECORD_BYTES // 2**20} MB")
    if not portable and bytes(data[:4]) != b"PK\x03\x04":
        raise LimitError("are not in the format the grader reads")
    value = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    _check_limits(value, limits, storage_bytes=len(data))
    return _decode(value, portable)


def roundtrip(value):
    """Results as the grader receives them: written and read back."""
    return loads(dumps(value))


def roundtrip_cases(spec):
    """A spec as the sandbox receives it: written and read back, course objects rebuilt."""
    return loads(dumps(spec), portable=True)


# --------------------------------------------------------------------------- inputs left alone

def _equal_inputs(before, after):
    """True when a function left an input as it was (tensors and arrays compared exactly)."""
    if isinstance(before, torch.Tensor):
        return (isinstance(after, torch.Tensor) and before.shape == after.shape and before.dtype == after.dtype
                and bool(torch.equal(torch.nan_to_num(before.detach(), nan=0.0), torch.nan_to_num(after.detach(), nan=0.0))
                         and torch.equal(before.isnan(), after.isnan())
                         if before.is_floating_point() else torch.equal(before, after)))
    if isinstance(before, np.ndarray):
        return isinstance(after, np.ndarray) and before.shape == after.shape and bool(
            np.array_equal(before, after, equal_nan=before.dtype.kind in "fc"))
    if isinstance(before, (list, tuple)):
        return isinstance(after, (list, tuple)) and len(before) == len(after) and all(
            _equal_inputs(b, a) for b, a in zip(before, after))
    if isinstance(before, dict):
        return isinstance(after, dict) and before.keys() == after.keys() and all(
            _equal_inputs(before[k], after[k]) for k in before)
    return True  # numbers, strings: not something a student edits in place


def changed_argument(fn, case, called_with):
    """The name of the first argument `fn` modified in place (comparing the untouched case with
    the copies it was called with), or None."""
    (args, kwargs), (new_args, new_kwargs) = case, called_with
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    for i, (before, after) in enumerate(zip(args, new_args)):
        if not _equal_inputs(before, after):
            return names[i] if i < len(names) else f"number {i + 1}"
    for name, before in kwargs.items():
        if not _equal_inputs(before, new_kwargs.get(name)):
            return name
    return None


# --------------------------------------------------------------------------- runners
# A runner computes one answer's result on one case. `guarded` (the student's answer): under
# the forbidden-API guard, with a crash turned into one sentence and inputs checked for edits.
# The catalogue calls the same runners, unguarded, for the reference and its mistakes, so the
# two sides cannot drift apart.

def _call(answer, args, kwargs, spec, what=None):
    name = f"`{spec['function_name']}`"
    return call_without(answer, args, kwargs, forbidden=tuple(spec.get("forbidden", ())),
                        exercise=name, hint=spec.get("crash_hint", ""), name=what or name)


def run_function(answer, case, spec, guarded=False):
    """answer(*args, **kwargs) for a case (args, kwargs), on fresh copies of the inputs."""
    args, kwargs = copy.deepcopy(case)
    args = list(args)
    if not guarded:
        return answer(*args, **kwargs)
    result = _call(answer, args, kwargs, spec)
    changed = changed_argument(answer, case, (args, kwargs))
    if changed is not None:
        raise GradingError(
            f"`{spec['function_name']}` changed its input `{changed}` in place; it must leave its "
            "arguments as they were (compute new tensors or arrays instead of writing into the "
            "ones passed in).")
    return result


def run_value(answer, case, spec, guarded=False):
    """An answer that is a number, not a function."""
    if guarded and (isinstance(answer, bool) or not isinstance(answer, (int, float, np.integer, np.floating))):
        raise GradingError(f"`{spec['function_name']}` should be a number, but it is "
                           f"{type(answer).__name__}.")
    return float(answer)


def _load_weights(module, weights, spec, describe):
    """Copy weights (state_dict name -> tensor) into the student's module, or say what is missing."""
    # Every name a parameter can be reached by: a student may keep a layer in a ModuleList and
    # under its own attribute too (self.norm1 = self.norms[0]); named_parameters() lists it once.
    params = dict(module.named_parameters(remove_duplicate=False))
    with torch.no_grad():
        for name, value in weights.items():
            if name not in params or tuple(params[name].shape) != tuple(value.shape):
                raise GradingError(
                    f"`{spec['function_name']}` needs a parameter `{name}` of shape {tuple(value.shape)}"
                    + (f" ({spec['module_hint']})" if spec.get("module_hint") else "")
                    + f"; for {describe} yours "
                    + ("is missing." if name not in params else f"has shape {tuple(params[name].shape)}."))
            params[name].copy_(value)


def _build(factory, args, kwargs, spec, guarded):
    if guarded:
        module = _call(factory, args, kwargs, spec, f"`{spec['function_name']}(...)`")
    else:
        module = factory(*args, **kwargs)
    if not isinstance(module, torch.nn.Module):
        raise GradingError(f"`{spec['function_name']}(...)` should create an nn.Module, but it gave "
                           f"{type(module).__name__}.")
    return module


def run_module(factory, case, spec, guarded=False):
    """A module class: built as cls(*init_args, **init_kwargs), weights copied in by state_dict
    name, evaluated as module(*forward_args, **forward_kwargs) without a graph.

    The case: {"init_args", "init_kwargs", "weights", "forward_args", "forward_kwargs"} and
    optionally "describe" (how messages name the case)."""
    with torch.no_grad():
        module = _build(factory, list(case["init_args"]), dict(case["init_kwargs"]), spec, guarded)
        _load_weights(module, case["weights"], spec, case.get("describe", "this case"))
        module.eval()
        args, kwargs = copy.deepcopy((list(case["forward_args"]), dict(case["forward_kwargs"])))
        if not guarded:
            return module(*args, **kwargs)
        result = _call(module.forward, args, kwargs, spec, f"`{spec['function_name']}.forward`")
        _forward_left_inputs_alone(module.forward, (case["forward_args"], case["forward_kwargs"]),
                                   (args, kwargs), spec)
        return result


def _forward_left_inputs_alone(forward, case, called_with, spec):
    changed = changed_argument(forward, case, called_with)
    if changed is not None:
        raise GradingError(
            f"`{spec['function_name']}.forward` changed its input `{changed}` in place; it must leave "
            "its arguments as they were (x = x + ..., not x += ..., when x is an input).")


def run_projections_module(factory, case, spec, guarded=False):
    """Notebook 07's MultiHeadAttention(d_model, num_heads, bias=...): nn.Linear attributes
    q_proj, k_proj, v_proj, out_proj get the case's weights ({name: (weight, bias)}); the
    forward inputs are query, key, value."""
    with torch.no_grad():
        module = _build(factory, [case["d_model"], case["num_heads"]], {"bias": case["bias"]}, spec, guarded)
        for name, (weight, bias) in case["weights"].items():
            layer = getattr(module, name, None)
            if not isinstance(layer, torch.nn.Linear) or tuple(layer.weight.shape) != tuple(weight.shape):
                raise GradingError(
                    f"`{spec['function_name']}` needs an attribute `{name}` that is an "
                    f"nn.Linear(d_model, d_model); for d_model={case['d_model']} yours is "
                    f"{layer if layer is None else repr(layer)}.")
            if (layer.bias is None) != (bias is None):
                raise GradingError(
                    f"`{spec['function_name']}(d_model, num_heads, bias={case['bias']})`: "
                    f"`{name}` should {'' if case['bias'] else 'not '}have a bias.")
            layer.weight.copy_(weight)
            if bias is not None:
                layer.bias.copy_(bias)
        module.eval()
        inputs = [case[name].clone() for name in ("query", "key", "value")]
        if not guarded:
            return module(*inputs)
        result = _call(module.forward, inputs, {}, spec, f"`{spec['function_name']}.forward`")
        _forward_left_inputs_alone(module.forward, ([case[n] for n in ("query", "key", "value")], {}),
                                   (inputs, {}), spec)
        return result


class _Cache(list):
    """The cache handed to the student's function: a plain list that prints in one line."""

    def __repr__(self):
        k = self[0][0] if self and isinstance(self[0], (tuple, list)) and hasattr(self[0][0], "shape") else None
        shape = f", (k, v) of shape {tuple(k.shape)} each" if k is not None else ""
        return f"a cache of {len(self)} blocks{shape}"


def _snapshot(cache):
    return None if cache is None else [(k.clone(), v.clone()) for k, v in cache]


def _unchanged(cache, snapshot):
    if cache is None:
        return True
    return len(cache) == len(snapshot) and all(
        k.shape == k0.shape and v.shape == v0.shape and torch.equal(k, k0) and torch.equal(v, v0)
        for (k, v), (k0, v0) in zip(cache, snapshot))


def _stack(cache, name):
    """The cache as one tensor (layers, 2, B, heads, T, head_dim), or a GradingError."""
    try:
        return torch.stack([torch.stack([k, v]) for k, v in cache])
    except Exception:
        raise GradingError(
            f"{name} should return a cache that is a list with one (k, v) pair per block, each a "
            "tensor of shape (B, num_heads, T_so_far, head_dim)") from None


def run_decoding(fn, case, spec, guarded=False):
    """Notebook 11's forward_with_cache over a whole decoding: a DecoderLM built from the case's
    config and state, the prompt, then each chunk fed the cache returned the step before.
    Outputs: all logits, the final cache stacked, and 1.0 when no cache passed in was changed."""
    from course_utils.models.decoder_lm import DecoderLM
    with torch.random.fork_rng():  # building a model draws random numbers: not from the student's stream
        model = DecoderLM(**case["config"]).double()
    model.load_state_dict(case["state"])
    model.eval()
    name = f"`{spec['function_name']}`"
    cache, logits, untouched = None, [], True
    with torch.no_grad():
        for tokens in [case["prompt"]] + list(case["chunks"]):
            snapshot = _snapshot(cache)
            if cache is not None and isinstance(cache, list):
                cache = _Cache(cache)
            args = (model, tokens.clone(), cache)
            if guarded:
                result = _call(fn, args, {}, spec)
                if not torch.equal(args[1], tokens):
                    raise GradingError(f"{name} changed its input `tokens` in place; it must leave "
                                       "its arguments as they were.")
            else:
                result = fn(*args)
            if not isinstance(result, (tuple, list)) or len(result) != 2:
                raise GradingError(f"{name} should return two values, (logits, new_cache).")
            step_logits, new_cache = result
            untouched = untouched and _unchanged(cache, snapshot)
            logits.append(step_logits)
            cache = new_cache
        try:
            all_logits = torch.cat(logits, dim=1)
        except Exception:
            raise GradingError(f"{name} should return logits of shape (B, T_new, vocab_size) "
                               "at every step.") from None
        return all_logits, _stack(cache, name), torch.tensor(1.0 if untouched else 0.0)


RUNNERS = {
    "function": run_function,
    "value": run_value,
    "module": run_module,
    "projections_module": run_projections_module,
    "decoding": run_decoding,
}


def first_output(result, spec):
    """The first of an answer's outputs (the one gradients are taken of)."""
    if spec.get("outputs", 1) == 1:
        return result
    if not isinstance(result, (tuple, list)) or len(result) != spec["outputs"]:
        raise GradingError(f"`{spec['function_name']}` should return {spec['outputs']} values.")
    return result[0]


def gradients(answer, case, spec, guarded=False):
    """d(sum(first output * w)) / d(each floating-point tensor argument), w fixed per exercise:
    for answers a later cell trains through (a case is (args, kwargs))."""
    args, kwargs = copy.deepcopy(case)
    leaves = []

    def leaf(value):
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            value = value.detach().clone().requires_grad_(True)
            leaves.append(value)
        return value

    args = [leaf(a) for a in args]
    kwargs = {k: leaf(v) for k, v in kwargs.items()}
    result = _call(answer, args, kwargs, spec) if guarded else answer(*args, **kwargs)
    out = first_output(result, spec)
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        raise GradingError(
            f"`{spec['function_name']}` returns a result that gradients cannot flow through (nothing "
            "built from it could be trained): compute it with torch operations on the inputs, without "
            ".detach(), .numpy() or torch.no_grad().")
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(spec["seed"])).to(out.dtype)
    grads = torch.autograd.grad((out * weights).sum(), leaves, allow_unused=True)
    grads = tuple(torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads))
    # A float32 computation has float32 gradients, whatever the dtype of the inputs.
    low = (torch.float32, torch.float16, torch.bfloat16)
    return tuple(g.to(out.dtype) for g in grads) if out.dtype in low else grads


# --------------------------------------------------------------------------- collecting

def _attempt(compute):
    """{"result": plain data} or {"error": the sentence a GradingError carries}."""
    try:
        return {"result": compute()}
    except GradingError as error:
        return {"error": str(error)}
    except Exception as error:  # noqa: BLE001 - a runner's own check failed on odd output
        return {"error": f"{type(error).__name__}: {error}"[:2000]}


def collect(spec, answer):
    """The answer's results on every case of an exercise (and its gradients, if it has gradient
    cases), each {"result": ...} or {"error": "..."}; plain data, ready for `dumps`. The pieces
    of earlier exercises that the spec names (`earlier`) are correct ones meanwhile (parts.py)."""
    from .parts import substituted  # the pieces of earlier exercises, judged there, not here

    runner = RUNNERS[spec["runner"]]
    with substituted(answer, tuple(spec.get("earlier") or ())):
        outputs = [_attempt(lambda case=case: encode(runner(answer, case, spec, guarded=True)))
                   for case in spec["cases"]]
        grads = [_attempt(lambda case=case: encode(gradients(answer, case, spec, guarded=True)))
                 for case in spec.get("gradient_cases") or ()]
    return {"grade_id": spec["grade_id"], "outputs": outputs, "gradients": grads,
            "defaults": signature_defaults(answer)}


_PLAIN_DEFAULTS = (type(None), bool, int, float, str)


def signature_defaults(answer):
    """{"": {parameter: default}, "forward": {...}} of an answer's plain defaults (None, bool,
    int, float, str), read from its signature (a class: its constructor's, and its forward's);
    {} for a value or a signature that cannot be read. The grader compares them with the
    reference's: a default the prompt states is part of the answer (issue 39, item 5)."""
    if not callable(answer):
        return {}
    out = {}
    targets = [("", answer)]
    if isinstance(answer, type):
        targets.append(("forward", getattr(answer, "forward", None)))
    for key, target in targets:
        try:
            params = inspect.signature(target).parameters
            found = {}
            for name, param in params.items():
                default = param.default
                if default is inspect.Parameter.empty:
                    found[str(name)] = "\x00required"
                elif type(default) in _PLAIN_DEFAULTS:
                    found[str(name)] = default
            out[key] = found
        except Exception:  # noqa: BLE001 - a signature the student's object will not give is no answer
            continue
    return out


# --------------------------------------------------------------------------- grading session

_specs = {}


def session():
    """The path of the grader's case file when a grading session runs this kernel, else None."""
    return os.environ.get(CASES_ENV) or None


def _spec(grade_id):
    path = session()
    if path not in _specs:
        with open(path, "rb") as fh:
            _specs[path] = loads(fh.read(), portable=True)
    specs = _specs[path]
    if grade_id not in specs:
        raise GradingError(f"the grader has no cases for {grade_id}")
    return specs[grade_id]


def record(topic, grade_id, answer, mode):
    """Run `answer` on the grader's cases and publish the results for the grader to judge.

    Nothing is judged here: the grader reads this message off the cell, and a test cell whose
    hidden check did not publish (or whose results the grader finds wrong) scores zero."""
    from IPython.display import publish_display_data
    records = collect(_spec(grade_id), answer)
    payload = dumps(records)
    if len(payload) > MAX_RECORD_BYTES:
        payload = dumps({"grade_id": grade_id, "too_large": len(payload)})
    publish_display_data({MIME: {"topic": topic, "grade_id": grade_id, "mode": mode,
                                 "records": base64.b64encode(payload).decode("ascii")}})
