"""Exercises whose answer a later cell trains through: the gradients are checked too.

A function can compute the right numbers and still break training: `torch.where(mask,
torch.exp(s - m), 0)` is right forward, but where a blocked score overflows `exp` the branch it
did not pick is inf, and its gradient 0 * inf is nan. `GradientExercise` adds to the output
comparison of `Exercise` a backward pass through the student's function on its own cases
(`make_gradient_cases`): the gradient of a fixed random weighting of the first output, with
respect to every floating-point tensor argument, must be finite and equal the reference's. A
catalogued mistake whose gradients match names the mistake, as for outputs.
"""
import copy
import dataclasses
from typing import Callable, Optional

import torch

from course_utils.grading import GradingError, call_without, mismatch, tamper
from course_utils.reference.mistakes import Exercise

__all__ = ["GradientExercise"]


@dataclasses.dataclass(frozen=True)
class GradientExercise(Exercise):
    """An `Exercise` whose function is also backpropagated through on `make_gradient_cases(seed)`
    (a list of (args, kwargs), like `make_cases`; pick inputs where a wrong backward shows, such
    as a blocked score far above the allowed ones)."""

    make_gradient_cases: Optional[Callable] = None

    def gradients(self, fn, case, guarded=False):
        """d(sum(first output * w)) / d(each float tensor argument), w fixed per exercise."""
        args, kwargs = copy.deepcopy(case)
        leaves = []

        def leaf(value):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                value = value.detach().clone().requires_grad_(True)
                leaves.append(value)
            return value

        args = [leaf(a) for a in args]
        kwargs = {k: leaf(v) for k, v in kwargs.items()}
        name = f"`{self.function_name}`"
        if guarded:
            result = call_without(fn, args, kwargs, forbidden=self.forbidden, exercise=name,
                                  hint=self.crash_hint, name=name)
        else:
            result = fn(*args, **kwargs)
        out = self._outputs(result)[0]
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            raise GradingError(
                f"{name} returns a result that gradients cannot flow through (a later cell trains "
                "through it): compute it with torch operations on the inputs, without .detach(), "
                ".numpy() or torch.no_grad().")
        weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(self.seed)).to(out.dtype)
        grads = torch.autograd.grad((out * weights).sum(), leaves, allow_unused=True)
        grads = tuple(torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads))
        # A float32 computation has float32 gradients, whatever the dtype of the inputs: compare
        # them with float32's tolerances, as the outputs are.
        return tuple(g.to(out.dtype) for g in grads) if out.dtype in (torch.float32, torch.float16, torch.bfloat16) else grads

    def gradient_difference(self, got, expected):
        """None if the gradients agree (nan only where the expected one is nan), else a sentence."""
        for i, (g, e) in enumerate(zip(got, expected)):
            atol, rtol = self.tolerances(g, e)
            problem = mismatch(g.detach(), e.detach(), atol=atol, rtol=rtol,
                               name=f"the gradient with respect to argument {i + 1}")
            if problem:
                return problem
        return None

    def gradient_mistake(self, results):
        """The first catalogued mistake whose gradients equal the student's on every case."""
        for mistake in self.mistakes:
            try:
                if all(self.gradient_difference(got, self.gradients(mistake.compute, case)) is None
                       for case, got in results):
                    return mistake
            except Exception:  # this mistake cannot even run here, so it is not the one
                continue
        return None

    def check(self, student_fn, generic=True):
        super().check(student_fn, generic)  # the outputs first
        if self.make_gradient_cases is None:
            return None
        if not generic:  # diagnosing: gradients only speak once the values are right
            try:
                super().check(student_fn, True)
            except GradingError:
                return None  # an uncatalogued wrong value: the test cell's last check reports it
        tamper.verify()
        results = [(case, self.gradients(student_fn, case, guarded=True))
                   for case in self.make_gradient_cases(self.seed)]
        tamper.verify()
        for case, got in results:
            problem = self.gradient_difference(got, self.gradients(self.reference, case))
            if problem:
                mistake = self.gradient_mistake(results)
                if mistake is not None:
                    raise GradingError(f"`{self.function_name}`: {mistake.message}")
                raise GradingError(
                    f"`{self.function_name}` gives the right values but wrong gradients on a hidden "
                    f"test case (later cells train through it): {problem}")
        return None
