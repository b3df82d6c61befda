"""Exercises whose answer a later cell trains through: the gradients are checked too.

A function can compute the right numbers and still break training: `torch.where(mask,
torch.exp(s - m), 0)` is right forward, but where a blocked score overflows `exp` the branch it
did not pick is inf, and its gradient 0 * inf is nan. `GradientExercise` adds to the output
comparison of `Exercise` a backward pass through the student's function on its own cases
(`make_gradient_cases`): the gradient of a fixed random weighting of the first output, with
respect to every floating-point tensor argument, must be finite and equal the reference's. A
catalogued mistake whose gradients match names the mistake, as for outputs.
"""
import dataclasses
from typing import Callable, Optional

from course_utils.grading import GradingError, mismatch, probe
from course_utils.reference.mistakes import Exercise

__all__ = ["GradientExercise"]


@dataclasses.dataclass(frozen=True)
class GradientExercise(Exercise):
    """An `Exercise` whose function is also backpropagated through on `make_gradient_cases(seed)`
    (a list of (args, kwargs), like `make_cases`; pick inputs where a wrong backward shows, such
    as a blocked score far above the allowed ones)."""

    make_gradient_cases: Optional[Callable] = None

    def spec(self):
        spec = super().spec()
        if self.make_gradient_cases is not None:
            spec["gradient_cases"] = self.make_gradient_cases(self.seed)
        return spec

    def gradients(self, fn, case, guarded=False):
        """d(sum(first output * w)) / d(each float tensor argument), w fixed per exercise."""
        return probe.gradients(fn, case, self.runner_spec(), guarded)

    def gradient_difference(self, got, expected):
        """None if the gradients agree (nan only where the expected one is nan), else a sentence."""
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return "the gradients could not be computed for every input"
        for i, (g, e) in enumerate(zip(got, expected)):
            atol, rtol = self.tolerances(g, e)
            problem = mismatch(g, e.detach(), atol=atol, rtol=rtol,
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

    def _judge(self, records, generic, spec):
        super()._judge(records, generic, spec)  # the outputs first
        if self.make_gradient_cases is None:
            return None
        if not generic:  # diagnosing: gradients only speak once the values are right
            try:
                super()._judge(records, True, spec)
            except GradingError:
                return None  # an uncatalogued wrong value: the test cell's last check reports it
        results = self._received(records, "gradients", spec["gradient_cases"], f"`{self.function_name}`")
        for case, got in results:
            problem = self.gradient_difference(got, self.gradients(self.reference, case))
            if problem:
                mistake = self.gradient_mistake(results)
                if mistake is not None:
                    raise GradingError(f"`{self.function_name}`: {mistake.message}")
                raise GradingError(
                    f"`{self.function_name}` gives the right values but wrong gradients on a hidden "
                    f"test case (a model built from it would learn from wrong gradients): {problem}")
        return None
