"""Category tests: kinds of answers nobody catalogued, made from each exercise's own solution.

The catalogues name the mistakes students make in one exercise; these tests cover whole
categories for every exercise whose answer is a function (notebooks added later included):
- an answer that is right but writes into its inputs must fail, saying so;
- an answer computed in float32 must pass (the exercise's tolerance widens to what float32 holds);
- the dtype policy, tested both ways: a floating result may be float32 or float64 whatever the
  inputs' floating dtype (the reference's results cast to float32 pass, and so do its results on
  float32 inputs cast to float64); integer and boolean results keep the dtype the prompt states;
- a later exercise keeps its points when an earlier one is answered with a catalogued mistake;
- a result of the wrong kind (NumPy for a tensor, a float for an int count) fails with a sentence.
"""
import functools
import sys

import numpy as np
import pytest
import torch

from course_utils.grading import GradingError
from course_utils.reference.mistakes import Exercise
from tests.exercises.test_mutations import EXERCISES, run_test_cell, solved_namespace, spec


def _function_exercises(applies=None):
    """Exercises whose answer is a plain function called on (args, kwargs) cases; with `applies`
    (spec, solution) -> bool, only those a category applies to (decided here, at collection, so
    that a category that does not apply is not collected rather than skipped)."""
    out = []
    for notebook, exercise in EXERCISES:
        s = spec(exercise)
        solution = solved_namespace(notebook).get(s.function_name)
        if s.runner == "function" and callable(solution) and (applies is None or applies(s, solution)):
            out.append(pytest.param(notebook, exercise, id=exercise.grade_id))
    return out


def _has_float_inputs(s, solution):
    return any(_float_inputs(*case) for case in s.cases())


def _changes(change):
    """Whether `change` alters the solution's result on the first case (else it cannot make it wrong)."""
    def applies(s, solution):
        sample = s.run(solution, s.cases()[0])
        return change(sample) is not sample
    return applies


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


@pytest.mark.parametrize("notebook, exercise", _function_exercises(_has_float_inputs))
def test_an_answer_that_edits_its_inputs_fails(notebook, exercise):
    s = spec(exercise)
    solution = solved_namespace(notebook)[s.function_name]
    with pytest.raises(GradingError, match="in place"):
        run_test_cell(notebook, exercise, _writes_into_its_input(solution))


def _module_exercises():
    """Exercises whose answer is a module class (07's MultiHeadAttention, 08's block...)."""
    return [pytest.param(nb, ex, id=ex.grade_id) for nb, ex in EXERCISES
            if spec(ex).runner in ("module", "projections_module")]


@pytest.mark.parametrize("notebook, exercise", _module_exercises())
def test_a_module_whose_forward_edits_its_input_fails(notebook, exercise):
    solution = solved_namespace(notebook)[spec(exercise).function_name]

    class Editing(solution):
        def forward(self, x, *args, **kwargs):
            result = super().forward(x.clone(), *args, **kwargs)
            with torch.no_grad():
                x.mul_(0.5)  # the caller's tensor, halved after use
            return result

    with pytest.raises(GradingError, match="in place"):
        run_test_cell(notebook, exercise, Editing)


def _takes_a_model(case):
    args, kwargs = case
    return any(isinstance(v, torch.nn.Module) or (callable(v) and not isinstance(v, (torch.Tensor, np.ndarray)))
               for v in list(args) + list(kwargs.values()))


@pytest.mark.parametrize("notebook, exercise", _function_exercises(
    lambda s, solution: _has_float_inputs(s, solution) and not any(_takes_a_model(case) for case in s.cases())))
def test_a_correct_answer_in_float32_passes(notebook, exercise):
    """(Not collected where an input is a model, whose dtype the answer must follow.)"""
    s = spec(exercise)
    solution = solved_namespace(notebook)[s.function_name]
    run_test_cell(notebook, exercise, _in_float32(solution))


def _cast_floats(value, source, target):
    """`value` with every `source` floating tensor or array (in tuples and lists too) cast to
    `target` (a torch dtype; NumPy arrays get its NumPy twin); the same object if none is."""
    if isinstance(value, torch.Tensor) and value.dtype == source:
        return value.to(target)
    if isinstance(value, np.ndarray) and value.dtype == torch.empty(0, dtype=source).numpy().dtype:
        return value.astype(torch.empty(0, dtype=target).numpy().dtype)
    if isinstance(value, (tuple, list)):
        changed = [_cast_floats(v, source, target) for v in value]
        if any(c is not v for c, v in zip(changed, value)):
            return type(value)(changed) if isinstance(value, list) else tuple(changed)
    return value


def _inputs_all_float32(args, kwargs):
    floats = _float_inputs(args, kwargs)
    return bool(floats) and all(v.dtype in (torch.float32, np.float32) for v in floats)


def _results_cast(solution, source, target, only_on_float32_inputs=False):
    """The solution with its `source` floating results cast to `target` (on float32 inputs only,
    with `only_on_float32_inputs`): the right numbers, in the other floating dtype."""
    @functools.wraps(solution)
    def answer(*args, **kwargs):
        result = solution(*args, **kwargs)
        if only_on_float32_inputs and not _inputs_all_float32(args, kwargs):
            return result
        return _cast_floats(result, source, target)
    return answer


def _casting_changes(source, target, only_on_float32_inputs=False):
    """Whether, on some catalogued case (with float32 inputs only, if so asked), the reference
    returns a `source` floating result: else casting cannot test anything and is not collected.
    Not where an input is a model: its parameters are no input of the policy, the result must
    follow the model's dtype (a float32 state fed back to a float64 cell fails)."""
    def applies(s, solution):
        if not _has_float_inputs(s, solution) or any(_takes_a_model(case) for case in s.cases()):
            return False
        for case in s.cases():
            try:
                args, kwargs = case
            except (TypeError, ValueError):
                continue
            if only_on_float32_inputs and not _inputs_all_float32(args, kwargs):
                continue
            sample = s.run(solution, case)
            if _cast_floats(sample, source, target) is not sample:
                return True
        return False
    return applies


@pytest.mark.parametrize("notebook, exercise", _function_exercises(_casting_changes(torch.float64, torch.float32)))
def test_a_correct_result_cast_to_float32_passes(notebook, exercise):
    """The dtype policy, one way: a floating result may be float32 for float64 inputs, and is then
    compared at float32's tolerance."""
    solution = solved_namespace(notebook)[spec(exercise).function_name]
    run_test_cell(notebook, exercise, _results_cast(solution, torch.float64, torch.float32))


@pytest.mark.parametrize("notebook, exercise", _function_exercises(
    _casting_changes(torch.float32, torch.float64, only_on_float32_inputs=True)))
def test_a_correct_result_cast_to_float64_passes(notebook, exercise):
    """The dtype policy, the other way: a floating result may be float64 for float32 inputs."""
    solution = solved_namespace(notebook)[spec(exercise).function_name]
    run_test_cell(notebook, exercise, _results_cast(solution, torch.float32, torch.float64,
                                                    only_on_float32_inputs=True))


def _independent_sets():
    """(notebook, exercise E, alternative of E, the other exercises D1, D2, ... of the notebook that
    the alternative does not call and that have a catalogued mistake): E's tests must not depend
    on any D's answer."""
    from tests.exercises.test_mutations import alternatives
    out = []
    for notebook, exercise in EXERCISES:
        others = [spec(other) for nb, other in EXERCISES if nb is notebook and other.grade_id != exercise.grade_id]
        for i, alternative in enumerate(alternatives(exercise)):
            used = set(getattr(getattr(alternative, "__code__", None), "co_names", ()))
            wrong = tuple(other for other in others if other.mistakes and other.function_name not in used)
            if wrong:
                out.append(pytest.param(notebook, exercise, alternative, wrong,
                                        id=f"{exercise.grade_id}-alt{i}-with-{len(wrong)}-others-wrong"))
    return out


@pytest.mark.parametrize("notebook, exercise, alternative, others", _independent_sets())
def test_one_mistake_costs_points_once(notebook, exercise, alternative, others):
    """A correct answer keeps its points when the notebook's other exercises are answered with a
    catalogued mistake: no test compares one exercise with the student's answer to another.
    Every other exercise is wrong at once (one run of E's checks instead of one per other
    exercise); when E then fails, each is tried alone to name the ones E's tests depend on."""
    def run(wrong):
        run_test_cell(notebook, exercise, alternative,
                      extra={other.function_name: other.mistakes[0].compute for other in wrong})
    try:
        run(others)
    except Exception as together:  # noqa: BLE001 - any failure: find which answer E depends on
        alone = []
        for other in others:
            try:
                run((other,))
            except Exception as error:  # noqa: BLE001
                alone.append(f"with a wrong {other.function_name}: {error}")
        pytest.fail(f"{exercise.grade_id}'s tests depend on another exercise's answer: "
                    + ("; ".join(alone) or f"only when all are wrong together: {together}"))


def _other_kind(value):
    """The same numbers as another kind of value: NumPy for a tensor, a tensor for NumPy, a float
    for an int, a 0-d tensor for a float."""
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, (bool, np.bool_)):
        return value
    if isinstance(value, (int, np.integer)):
        return float(value)
    if isinstance(value, (float, np.floating)):
        return torch.tensor(float(value))
    if isinstance(value, tuple):
        changed = [_other_kind(v) for v in value]
        return tuple(changed) if any(c is not v for c, v in zip(changed, value)) else value
    return value


def _must_fail_when_changed(notebook, exercise, change, why_not):
    """Run the test cell with the solution's results passed through `change`; it must fail."""
    s = spec(exercise)
    solution = solved_namespace(notebook)[s.function_name]
    sample = s.run(solution, s.cases()[0])
    assert change(sample) is not sample, why_not  # collected only where it applies (_changes)

    @functools.wraps(solution)
    def changed(*args, **kwargs):
        return change(solution(*args, **kwargs))

    with pytest.raises(GradingError) as failure:
        run_test_cell(notebook, exercise, changed)
    return str(failure.value)


@pytest.mark.parametrize("notebook, exercise", _function_exercises(_changes(_other_kind)))
def test_a_result_of_the_wrong_kind_fails_with_a_sentence(notebook, exercise):
    """...and the sentence is about the kind: the right numbers as NumPy once matched a catalogued
    forbidden-call mistake (same values) and were told "Your code uses torch.softmax"."""
    message = _must_fail_when_changed(notebook, exercise, _other_kind,
                                      "the result is not a tensor, an array or a number")
    assert "Your code uses" not in message, message


@pytest.mark.parametrize("notebook, exercise", [pytest.param(nb, ex, id=ex.grade_id) for nb, ex in EXERCISES])
def test_the_test_cell_diagnoses_first_and_checks_last(notebook, exercise):
    """The hidden block at the top names catalogued mistakes before a visible check reports their
    symptom; the one at the bottom fails, after the visible hints had their say, any wrong answer
    left. Without the bottom one an uncatalogued wrong answer would pass."""
    import re
    blocks = re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", exercise.test_source, re.S)
    assert len(blocks) == 2, f"{exercise.grade_id}_tests needs two hidden blocks, has {len(blocks)}"
    assert f'catalogue.diagnose("{exercise.grade_id}"' in blocks[0]
    assert f'catalogue.check("{exercise.grade_id}"' in blocks[1]
    after = exercise.test_source.rsplit("### END HIDDEN TESTS", 1)[1].strip().splitlines()
    assert len(after) == 1 and after[0].startswith("print("), "only the closing print may follow the last check"


def _off(value):
    """A wrong version of a result that no catalogue lists: floats moved, integers off by one."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value * 1.37 + 0.11
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value * 1.37 + 0.11
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, tuple):  # the first element that can be made wrong
        for i, item in enumerate(value):
            changed = _off(item)
            if changed is not item:
                return value[:i] + (changed,) + value[i + 1:]
    return value


@pytest.mark.parametrize("notebook, exercise", _function_exercises(_changes(_off)))
def test_an_uncatalogued_wrong_answer_fails(notebook, exercise):
    _must_fail_when_changed(notebook, exercise, _off, "no simple way to make this result wrong")


def _gradient_exercises():
    from course_utils.reference.mistakes.gradients import GradientExercise
    return [p for p in _function_exercises()
            if isinstance(spec(p.values[1]), GradientExercise) and spec(p.values[1]).make_gradient_cases]


def _detached(value):
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, tuple):
        return tuple(_detached(v) for v in value)
    return value


@pytest.mark.parametrize("notebook, exercise", _gradient_exercises())
def test_an_answer_later_cells_cannot_train_through_fails(notebook, exercise):
    """Right values with no gradient (computed under torch.no_grad(), .detach()ed) break the
    training a later cell runs through the function: the hidden check must say so."""
    solution = solved_namespace(notebook)[spec(exercise).function_name]

    @functools.wraps(solution)
    def detached(*args, **kwargs):
        return _detached(solution(*args, **kwargs))

    with pytest.raises(GradingError, match="gradients cannot flow"):
        run_test_cell(notebook, exercise, detached)


def test_a_test_cell_that_depends_on_another_answer_is_named(monkeypatch):
    """The check above fails, naming the answer E's tests use, when they use one."""
    notebook, exercise, alternative, others = next(p.values for p in _independent_sets() if len(p.values[3]) >= 2)
    used = others[-1].function_name

    def depends_on_one(nb, ex, fn, source=None, extra=None):
        if used in (extra or {}):
            raise GradingError(f"compared with {used}")
    monkeypatch.setattr(sys.modules[__name__], "run_test_cell", depends_on_one)
    with pytest.raises(pytest.fail.Exception, match=f"with a wrong {used}: compared") as failure:
        test_one_mistake_costs_points_once(notebook, exercise, alternative, others)
    assert f"with a wrong {others[0].function_name}" not in str(failure.value)
