"""The mistake catalogue: how a wrong answer is recognised and named.

Instructor side, as secret as the reference: recognising a mistake means computing it.

An `Exercise` bundles what the hidden tests of one exercise need: the reference, the inputs
to try (random but fixed per exercise, so grading is repeatable), how to compare outputs, the
functions the student may not call, and the catalogue of `Mistake`s. `Exercise.check(fn)`:

1. runs the student's function on every case under the forbidden-API guard;
2. passes if every output matches the reference;
3. otherwise looks for the catalogued mistake whose output the student's output equals, and
   raises `GradingError` with that mistake's message ("did you divide by d_k instead of ...?");
4. otherwise raises `GradingError` describing the first mismatch.

The same catalogue drives the mutation tests (tests/exercises): every mistake, fed to the
notebook's test cell, must fail it with its own message.
"""
import copy
import dataclasses
import inspect
import zlib
from typing import Callable, Sequence

import numpy as np
import torch

from course_utils.grading import GradingError, call_without, mismatch, tamper
from course_utils.grading.guards import describe_arguments

# A float32 (or half) result carries about 7 significant digits, and how they round depends on
# the order of the additions, which depends on the CPU's kernels. Such results are compared with
# at least these tolerances, relative to the size of the expected values.
FLOAT32_RTOL = 1e-4
FLOAT32_ATOL = 1e-5


def _low_precision(value):
    dtype = getattr(value, "dtype", None)
    return dtype in (torch.float32, torch.float16, torch.bfloat16, np.float32, np.float16)


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
    return True  # numbers, strings, callables, modules: not something a student edits in place


def kind(value):
    """What a result is, in the words of a prompt: "a torch.Tensor", "a NumPy array", "an int"..."""
    if isinstance(value, torch.Tensor):
        return "a torch.Tensor"
    if isinstance(value, np.ndarray):
        return "a NumPy array"
    if isinstance(value, (bool, np.bool_)):
        return "a bool"
    if isinstance(value, (int, np.integer)):
        return "an int"
    if isinstance(value, (float, np.floating)):
        return "a float"
    return None  # lists, tuples, objects: compared by value only


def wrong_kind(got, expected, name):
    """A sentence when a result is not the kind of value the reference returns (a float where the
    prompt asks for an int count, NumPy where it asks for a tensor), else None. An int stands for
    a float; a float is not an int, even 15.0."""
    want, have = kind(expected), kind(got)
    if want is None or have == want or (want == "a float" and have == "an int"):
        return None
    shown = f"{have or type(got).__name__}"
    if hasattr(got, "shape"):
        shown += f" of shape {tuple(got.shape)}"
    elif have in ("a float", "an int"):
        shown += f" ({got!r})"
    return f"{name} should be {want}, but it is {shown}."


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


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A common wrong answer: `compute` has the exercise's signature and returns the wrong result."""

    name: str
    message: str
    compute: Callable


@dataclasses.dataclass(frozen=True)
class Exercise:
    grade_id: str
    function_name: str
    reference: Callable
    make_cases: Callable  # (torch.Generator or numpy Generator seed: int) -> list of (args, kwargs)
    mistakes: Sequence[Mistake] = ()
    forbidden: Sequence[str] = ()
    output_names: Sequence[str] = ("your result",)
    atol: float = 1e-5
    rtol: float = 1e-4
    crash_hint: str = ""  # what to look at when the student's function raises on a hidden case

    @property
    def seed(self):
        """Fixed per exercise: two gradings of the same notebook give the same result."""
        return zlib.crc32(self.grade_id.encode())

    def cases(self):
        return self.make_cases(self.seed)

    def _outputs(self, result):
        if len(self.output_names) == 1:
            return (result,)
        if not isinstance(result, (tuple, list)) or len(result) != len(self.output_names):
            raise GradingError(
                f"`{self.function_name}` should return {len(self.output_names)} values "
                f"({', '.join(self.output_names)}), but it returned {type(result).__name__}"
                + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "") + "."
            )
        return tuple(result)

    def tolerances(self, got, expected):
        """(atol, rtol) for comparing one output: the exercise's own, widened to what float32
        can hold when the student's result is float32 (the exercise's dtype is stated in its
        prompt; a correct float32 answer must not fail on the CPU's rounding)."""
        if not _low_precision(got):
            return self.atol, self.rtol
        try:
            scale = float(np.max(np.abs(np.asarray(expected.detach() if hasattr(expected, "detach") else expected,
                                                   dtype=np.float64)), initial=1.0))
        except (TypeError, ValueError):
            scale = 1.0
        return max(self.atol, FLOAT32_ATOL * scale), max(self.rtol, FLOAT32_RTOL)

    def difference(self, got, expected):
        """None if the outputs agree, else a sentence about the first output that differs."""
        for name, g, e in zip(self.output_names, self._outputs(got), self._outputs(expected)):
            atol, rtol = self.tolerances(g, e)
            problem = mismatch(g, e, atol=atol, rtol=rtol, name=name)
            if problem:
                return problem
        return None

    def run(self, fn, case, guarded=False):
        """fn's result on one case. Guarded (the student's function): under the forbidden-API
        guard, with a crash turned into one sentence. Fresh copies of the inputs every time: a
        function that edits its inputs in place must not change the expected answer.
        Exercises whose cases are not (args, kwargs), such as modules to build, override this."""
        args, kwargs = copy.deepcopy(case)
        if not guarded:
            return fn(*args, **kwargs)
        name = f"`{self.function_name}`"
        result = call_without(fn, args, kwargs, forbidden=self.forbidden, exercise=name,
                              hint=self.crash_hint, name=name)
        changed = changed_argument(fn, case, (args, kwargs))
        if changed is not None:
            raise GradingError(
                f"{name} changed its input `{changed}` in place; it must leave its arguments as they "
                "were (compute new tensors or arrays instead of writing into the ones passed in).")
        return result

    def describe_case(self, case):
        """A few words on a case for messages: by default the call itself when its arguments are
        short to write (numbers, short lists), so that a student can reproduce it, e.g.
        " (receptive_field([3, 3], [1, 2]))"; else the arguments' shapes. Exercises whose cases
        are not (args, kwargs) override this."""
        try:
            args, kwargs = case
            parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        except (TypeError, ValueError):
            return ""
        if all(len(p) <= 40 and "\n" not in p and "tensor(" not in p and "array(" not in p for p in parts):
            return f" ({self.function_name}({', '.join(parts)}))"
        return f" (called with {describe_arguments(args, kwargs)})"

    def matching_mistake(self, results):
        """The first catalogued mistake whose outputs equal the student's on every case."""
        for mistake in self.mistakes:
            try:
                if all(self.difference(got, self.run(mistake.compute, case)) is None for case, got in results):
                    return mistake
            except Exception:  # the mistake cannot even run on some case, so it is not this one
                continue
        return None

    def check(self, student_fn, generic=True):
        """Raise GradingError naming the mistake if `student_fn` is wrong; return None if right.

        generic=False (`diagnose`) raises only what can be named: a crash, a forbidden call, an
        input changed in place, a catalogued mistake. An uncatalogued wrong answer then passes
        silently, so that the visible checks after it can give their more specific hint; the
        test cell's last hidden line calls `check` again with generic=True to fail it anyway."""
        tamper.verify()
        results = [(case, self.run(student_fn, case, guarded=True)) for case in self.cases()]
        tamper.verify()
        for case, got in results:
            expected = self.run(self.reference, case)
            for name, g, e in zip(self.output_names, self._outputs(got), self._outputs(expected)):
                problem = wrong_kind(g, e, name)
                if problem:  # a catalogued mistake of the same kind (e.g. `/` for `//`) says more
                    mistake = self.matching_mistake(results)
                    raise GradingError(f"`{self.function_name}`: {mistake.message if mistake else problem}")
            problem = self.difference(got, expected)
            if problem:
                mistake = self.matching_mistake(results)
                if mistake is not None:
                    raise GradingError(f"`{self.function_name}`: {mistake.message}")
                if not generic:
                    return None
                raise GradingError(f"`{self.function_name}` gives a wrong answer on a hidden test "
                                   f"case{self.describe_case(case)}: {problem}")
        return None

    def diagnose(self, student_fn):
        return self.check(student_fn, generic=False)


def mask_scores(scores, mask, mode):
    """Scores masked the right way ("-inf") or a catalogued wrong way, for mistakes to share.

    Returns (scores, after): `after` is the mask to multiply the weights by after the softmax
    (mode "after"), else None. Modes: "-inf" (correct), "inverted", "zero" (0 instead of -inf),
    "after", "ignored". mask is boolean, True = may attend; None leaves the scores alone.
    """
    if mask is None or mode == "ignored":
        return scores, None
    if mode == "-inf":
        return scores.masked_fill(~mask, float("-inf")), None
    if mode == "inverted":
        return scores.masked_fill(mask, float("-inf")), None
    if mode == "zero":
        return scores.masked_fill(~mask, 0.0), None
    if mode == "after":
        return scores, mask
    raise ValueError(f"unknown mask mode {mode!r}")


def check(exercises, grade_id, student_fn):
    """Look up an exercise by grade id in a topic's catalogue and check a student's function."""
    return exercises[grade_id].check(student_fn)


def diagnose(exercises, grade_id, student_fn):
    """Like `check`, but silent on a wrong answer no catalogued mistake explains (see Exercise.check)."""
    return exercises[grade_id].check(student_fn, generic=False)
