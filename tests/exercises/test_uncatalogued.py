"""Wrong answers written by people who never read the mistake catalogues.

Each tests/exercises/uncatalogued_<topic>.py holds `WRONG_ANSWERS = {grade_id: [answer, ...]}`:
answers a student could plausibly write (or a student gaming the tests would), collected by trying
them through the real test cells before looking at the catalogue (`python -m
tests.exercises.try_answer`). Each must fail its exercise's whole test cell with a GradingError,
the sentence a student reads; whether the message names a catalogued mistake is not asked here,
since most of these answers are in no catalogue. The catalogues make feedback precise; this file
makes sure that what they do not foresee is still not given the points.
"""
import importlib
import pathlib
import sys

import pytest

from course_utils.grading import GradingError, tamper
from tests.exercises.test_mutations import EXERCISES, run_test_cell, solved_namespace, spec

HERE = pathlib.Path(__file__).parent
BY_GRADE_ID = {exercise.grade_id: (notebook, exercise) for notebook, exercise in EXERCISES}


def _wrong_answers(kind="WRONG_ANSWERS"):
    out = []
    for path in sorted(HERE.glob("uncatalogued_*.py")):
        module = importlib.import_module(f"tests.exercises.{path.stem}")
        for grade_id, answers in getattr(module, kind, {}).items():
            for answer in answers:
                name = getattr(answer, "__name__", repr(answer))
                out.append(pytest.param(grade_id, answer, id=f"{grade_id}-{name}"))
    return out


def must_fail(grade_id, answer):
    notebook, exercise = BY_GRADE_ID[grade_id]
    with pytest.raises(GradingError) as failure:
        run_test_cell(notebook, exercise, answer)
    message = str(failure.value)
    assert message.strip(), f"{grade_id}: failed with an empty message"
    return message


WRONG = _wrong_answers()
# Answers that pass by replacing what the tests compare with (np.allclose, numpy.array, the
# course's own checks): each must fail, and what it replaced is put back before the next test.
TAMPERING = _wrong_answers("TAMPERING")


@pytest.fixture
def undo_tampering():
    course = {name: dict(vars(module)) for name, module in list(sys.modules.items())
              if name.startswith("course_utils") and module is not None}
    yield
    for entry in tamper.WATCHED:
        module_name, attr = entry.split(":")
        setattr(sys.modules[module_name], attr, tamper.original(entry))
    for name, before in course.items():
        module = sys.modules[name]
        for attr, value in before.items():
            if vars(module).get(attr) is not value:
                setattr(module, attr, value)
    assert tamper.tampered() == []


def test_every_file_names_real_exercises():
    assert WRONG, "no uncatalogued wrong answers found"
    unknown = {param.values[0] for param in WRONG} - set(BY_GRADE_ID)
    assert not unknown, f"grade ids that no notebook has: {sorted(unknown)}"


@pytest.mark.parametrize("grade_id, answer", WRONG)
def test_uncatalogued_wrong_answer_fails(grade_id, answer):
    must_fail(grade_id, answer)


@pytest.mark.parametrize("grade_id, answer", TAMPERING)
def test_tampering_answer_fails(grade_id, answer, undo_tampering):
    must_fail(grade_id, answer)


def test_must_fail_fails_on_the_solution():
    """The check above can fail: the solution itself passes the test cell, so `must_fail` says so."""
    notebook, exercise = BY_GRADE_ID["self_attention_softmax"]
    solution = solved_namespace(notebook)[spec(exercise).function_name]
    with pytest.raises(pytest.fail.Exception):
        must_fail("self_attention_softmax", solution)
