"""Mutation tests: every exercise's real test cell passes correct code and fails every mistake.

For each exercise of each notebook in solutions/ the test cell, exactly as written in the
notebook, runs in a namespace made of the setup cell and the solution's answer cells, with the
function under test replaced by:
- the reference (the solution's own answer cell): the cell must pass;
- each second correct implementation in tests/exercises/alternatives_<topic>.py: must pass;
- each catalogued mistake: must fail with a GradingError whose message is that mistake's own
  message (so feedback names the mistake, not only the symptom).
"""
import importlib

import pytest

from course_utils.grading import GradingError
from tests.notebook_cells import read_cells, solution_notebooks

NOTEBOOKS = [read_cells(path) for path in solution_notebooks()]
EXERCISES = [(nb, ex) for nb in NOTEBOOKS for ex in nb.exercises]


def topic_of(exercise):
    return exercise.catalogue.__name__.rsplit(".", 1)[1]


def alternatives(exercise):
    try:
        module = importlib.import_module(f"tests.exercises.alternatives_{topic_of(exercise)}")
    except ModuleNotFoundError:
        return []  # test_exercise_is_catalogued says what is missing
    return module.ALTERNATIVES.get(exercise.grade_id, [])


def spec(exercise):
    """The catalogue's exercise; a think-first question with numbers per student, for the
    example's numbers (the solution notebooks run without a student id)."""
    found = exercise.catalogue.EXERCISES[exercise.grade_id]
    return found.example() if getattr(found, "varies", False) else found


_namespaces = {}


def solved_namespace(notebook):
    """Globals after the setup cell and every (solution) answer cell; built once per notebook."""
    if notebook.path not in _namespaces:
        namespace = {"__name__": "__main__"}
        for source in notebook.setup_sources + notebook.answer_sources:
            exec(compile(source, str(notebook.path), "exec"), namespace)
        _namespaces[notebook.path] = namespace
    return _namespaces[notebook.path]


def run_test_cell(notebook, exercise, function, source=None, extra=None):
    namespace = dict(solved_namespace(notebook))
    namespace.update(extra or {})
    namespace[spec(exercise).function_name] = function
    exec(compile(source or exercise.test_source, f"{exercise.grade_id}_tests", "exec"), namespace)


def params(kind):
    out = []
    for notebook, exercise in EXERCISES:
        if kind == "exercise":
            out.append(pytest.param(notebook, exercise, id=exercise.grade_id))
        elif kind == "alternative":
            for i, fn in enumerate(alternatives(exercise)):
                out.append(pytest.param(notebook, exercise, fn, id=f"{exercise.grade_id}-alt{i}"))
        elif kind == "mistake":
            for mistake in spec(exercise).mistakes:
                out.append(pytest.param(notebook, exercise, mistake, id=f"{exercise.grade_id}-{mistake.name}"))
    return out


def test_there_are_exercises():
    assert EXERCISES, "no exercise found in solutions/"


@pytest.mark.parametrize("notebook, exercise", params("exercise"))
def test_exercise_is_catalogued(notebook, exercise):
    assert exercise.grade_id in exercise.catalogue.EXERCISES
    assert len(spec(exercise).mistakes) >= 2, "catalogue at least two common mistakes"
    assert alternatives(exercise), "add a second correct implementation to tests/exercises/alternatives_*.py"


@pytest.mark.parametrize("notebook, exercise", params("exercise"))
def test_solution_passes(notebook, exercise):
    run_test_cell(notebook, exercise, solved_namespace(notebook)[spec(exercise).function_name])


@pytest.mark.parametrize("notebook, exercise, function", params("alternative"))
def test_alternative_passes(notebook, exercise, function):
    run_test_cell(notebook, exercise, function)


@pytest.mark.parametrize("notebook, exercise, mistake", params("mistake"))
def test_mistake_fails_with_its_name(notebook, exercise, mistake):
    with pytest.raises(GradingError) as failure:
        run_test_cell(notebook, exercise, mistake.compute)
    assert mistake.message in str(failure.value), (
        f"{mistake.name} was caught, but the message does not name it: {failure.value}"
    )


@pytest.mark.parametrize("notebook, exercise, mistake", params("mistake"))
def test_mistake_fails_the_visible_tests_or_is_hidden_only(notebook, exercise, mistake):
    """The student's release must not say "passed" to a catalogued mistake unless the catalogue
    says the mistake is invisible without the reference (`Mistake.name` in HIDDEN_ONLY)."""
    hidden_only = getattr(exercise.catalogue, "HIDDEN_ONLY", set())
    try:
        run_test_cell(notebook, exercise, mistake.compute, source=exercise.visible_test_source)
    except (GradingError, AssertionError, Exception):
        return
    assert mistake.name in hidden_only, (
        f"the visible tests of {exercise.grade_id} pass {mistake.name}; add a visible check "
        "or list it in the catalogue's HIDDEN_ONLY with a reason"
    )
