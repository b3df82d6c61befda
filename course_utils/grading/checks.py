"""Close-enough and shape checks that report the first problem in a student's terms.

Every check accepts NumPy arrays, PyTorch tensors or nested lists, compares in float64 NumPy
with the comparison functions captured by the tamper guard, and raises `GradingError` with one
sentence: the shape expected and got, the axis whose weights do not sum to one, or the largest
error, where it is, and the two values there.
"""
import sys

import numpy as np

from . import tamper
from .errors import GradingError


def to_numpy(x):
    """A float64 NumPy copy of an array, tensor, number or nested list (for comparing only)."""
    if hasattr(x, "detach"):  # a torch tensor, possibly requiring grad
        x = x.detach().cpu().numpy()
    return np.array(x, dtype=np.float64)


def describe(x):
    """A short name for a value's type, as a student would write it."""
    if hasattr(x, "detach"):
        return f"torch.Tensor of shape {tuple(x.shape)}"
    if isinstance(x, np.ndarray):
        return f"numpy.ndarray of shape {x.shape}"
    return type(x).__name__


def assert_type(value, kind, name="your result"):
    """kind is "numpy" or "torch"."""
    tamper.verify()
    ok = hasattr(value, "detach") if kind == "torch" else isinstance(value, np.ndarray)
    if not ok:
        wanted = "a torch.Tensor" if kind == "torch" else "a NumPy array"
        raise GradingError(f"{name} should be {wanted}, but it is a {describe(value)}.")


def assert_shape(value, expected_shape, name="your result"):
    """The shape must be exactly expected_shape."""
    tamper.verify()
    shape = tuple(value.shape) if hasattr(value, "shape") else np.shape(value)
    if tuple(shape) != tuple(expected_shape):
        raise GradingError(
            f"{name} has shape {tuple(shape)}, but it should have shape {tuple(expected_shape)}."
        )


def assert_finite(value, name="your result", hint=""):
    tamper.verify()
    array = to_numpy(value)
    finite = tamper.original("numpy:isfinite")(array)
    if not finite.all():
        where = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise GradingError(
            f"{name} contains {array[where]} at index {where}: every entry should be a finite number."
            + (f" {hint}" if hint else "")
        )


def _distinct(a, b):
    """a and b printed with as many significant digits as it takes to tell them apart."""
    for digits in range(6, 18):
        left, right = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if left != right:
            return left, right
    return f"{a!r}", f"{b!r}"


def mismatch(actual, expected, atol=1e-5, rtol=1e-4, name="your result"):
    """None when actual is close to expected, otherwise a sentence saying how it differs."""
    a, e = to_numpy(actual), to_numpy(expected)
    if a.shape != e.shape:
        return f"{name} has shape {a.shape}, but it should have shape {e.shape}."
    if a.size == 0:
        return None
    close = tamper.original("numpy:isclose")(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    if a.ndim == 0:
        got, wanted = _distinct(float(a), float(e))
        return f"{name} is {got}, but it should be {wanted}."
    error = np.where(np.isnan(a) != np.isnan(e), np.inf, np.abs(np.nan_to_num(a - e)))
    error = np.where(close, 0.0, error)
    where = np.unravel_index(int(np.argmax(error)), a.shape)
    where = tuple(int(i) for i in where)
    share = (~close).mean()
    got, wanted = _distinct(float(a[where]), float(e[where]))
    return (
        f"{name}: {share:.0%} of the entries differ from the expected values; "
        f"the largest difference is at index {where}: got {got}, expected {wanted}."
    )


def assert_close(actual, expected, name="your result", atol=1e-5, rtol=1e-4, hint=""):
    """actual must equal expected up to floating-point error (and have the same shape)."""
    tamper.verify()
    problem = mismatch(actual, expected, atol=atol, rtol=rtol, name=name)
    if problem:
        raise GradingError(problem + (f" {hint}" if hint else ""))


def assert_sums_to_one(weights, axis=-1, name="your attention weights", atol=1e-5):
    """Each slice along `axis` must be a probability distribution: non-negative, summing to one."""
    tamper.verify()
    w = to_numpy(weights)
    axis = axis % w.ndim
    if (w < -atol).any():
        raise GradingError(f"{name} contain negative numbers ({w.min():.3g}); softmax never gives those.")
    sums = w.sum(axis=axis)
    bad = np.abs(sums - 1) > atol
    if bad.any():
        other = [a for a in range(w.ndim) if a != axis]
        hint = ""
        for candidate in other:
            if tamper.original("numpy:allclose")(w.sum(axis=candidate), 1, atol=atol):
                hint = f" They sum to one along axis {candidate - w.ndim} instead: is your softmax over the wrong axis?"
                break
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise GradingError(
            f"{name} should sum to one along axis {axis - w.ndim} (over the keys), "
            f"but the slice at {where} sums to {sums[where]:.4g}." + hint
        )


def assert_true(condition, message):
    """A plain check with a student-facing message."""
    tamper.verify()
    if not condition:
        raise GradingError(message)


def assert_answered(name):
    """A think-first answer exists: `name` is bound in the notebook (the caller's globals).

    An unanswered stub raises NotImplementedError and binds nothing; without this check the
    test cell would stop on a bare NameError instead of saying what to do."""
    tamper.verify()
    namespace = sys._getframe(1).f_globals
    if name not in namespace:
        raise GradingError(f"`{name}` is not answered yet: write `{name} = ...` with your answer in the "
                           "cell above (in place of `raise NotImplementedError()`) and run it.")
