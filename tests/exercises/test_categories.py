"""Category tests: kinds of answers nobody catalogued, made from each exercise's own solution.

The catalogues name the mistakes students make in one exercise; these tests cover whole
categories for every exercise whose answer is a function (notebooks added later included):
- an answer that is right but writes into its inputs must fail, saying so;
- an answer computed in float32 must pass (the exercise's tolerance widens to what float32 holds).
"""
import functools

import numpy as np
import pytest
import torch

from course_utils.grading import GradingError
from course_utils.reference.mistakes import Exercise
from tests.exercises.test_mutations import EXERCISES, run_test_cell, solved_namespace, spec


def _function_exercises():
    """Exercises whose answer is a plain function called on (args, kwargs) cases."""
    out = []
    for notebook, exercise in EXERCISES:
        s = spec(exercise)
        if type(s).run is Exercise.run and callable(solved_namespace(notebook).get(s.function_name)):
            out.append(pytest.param(notebook, exercise, id=exercise.grade_id))
    return out


def _float_inputs(args, kwargs):
    values = list(args) + list(kwargs.values())
    return [v for v in values if (isinstance(v, torch.Tensor) and v.is_floating_point())
            or (isinstance(v, np.ndarray) and v.dtype.kind == "f")]


def _writes_into_its_input(solution):
    @functools.wraps(solution)
    def answer(*args, **kwargs):
        result = solution(*args, **kwargs)
        for value in _float_inputs(args, kwargs)[:1]:
            if isinstance(value, torch.Tensor):
                with torch.no_grad():
                    value.mul_(0.5)
            else:
                value *= 0.5
        return result
    return answer


def _in_float32(solution):
    def down(value):
        if isinstance(value, torch.Tensor) and value.dtype == torch.float64:
            return value.float()
        if isinstance(value, np.ndarray) and value.dtype == np.float64:
            return value.astype(np.float32)
        return value

    @functools.wraps(solution)
    def answer(*args, **kwargs):
        return solution(*[down(a) for a in args], **{k: down(v) for k, v in kwargs.items()})
    return answer


@pytest.mark.parametrize("notebook, exercise", _function_exercises())
def test_an_answer_that_edits_its_inputs_fails(notebook, exercise):
    s = spec(exercise)
    cases = s.cases()
    if not any(_float_inputs(*case) for case in cases):
        pytest.skip("no floating-point input to edit")
    solution = solved_namespace(notebook)[s.function_name]
    with pytest.raises(GradingError, match="in place"):
        run_test_cell(notebook, exercise, _writes_into_its_input(solution))


def _takes_a_model(case):
    args, kwargs = case
    return any(isinstance(v, torch.nn.Module) or (callable(v) and not isinstance(v, (torch.Tensor, np.ndarray)))
               for v in list(args) + list(kwargs.values()))


@pytest.mark.parametrize("notebook, exercise", _function_exercises())
def test_a_correct_answer_in_float32_passes(notebook, exercise):
    s = spec(exercise)
    if not any(_float_inputs(*case) for case in s.cases()):
        pytest.skip("no floating-point input")
    if any(_takes_a_model(case) for case in s.cases()):
        pytest.skip("the inputs include a model whose dtype the answer must follow")
    solution = solved_namespace(notebook)[s.function_name]
    run_test_cell(notebook, exercise, _in_float32(solution))
