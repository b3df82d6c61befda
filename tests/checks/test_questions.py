"""Think-first numbers per student (course_utils/grading/questions.py and ValueExercise).

Every question with variants: the variants' right answers differ (else a copied answer could not
be told from an own one); in every variant the catalogued mistakes differ from the right answer;
a student's own right answer passes, the example's answer and another student's are refused with
a sentence that says so, and a catalogued mistake is still named for the student's numbers.
"""
import pytest

from autograder import judge
from course_utils.grading import GradingError, questions
from course_utils.reference.mistakes import registry

QUESTIONS = sorted(questions.VARIANTS)


pytestmark = pytest.mark.usefixtures("no_student_id")  # tests/checks/conftest.py


def test_at_least_the_converted_questions_vary():
    assert {"causal_cnn_layers_needed", "masking_transformer_blocked_pairs", "long_context_weights_guess"} <= set(QUESTIONS)


@pytest.mark.parametrize("grade_id", QUESTIONS)
def test_variants_have_distinct_answers_and_mistakes(grade_id):
    exercise = registry.exercise(grade_id)
    assert exercise.varies
    answers = []
    for params in questions.variants(grade_id):
        right = exercise.reference(**params)
        answers.append(right)
        wrong = [m.compute(**params) if callable(m.compute) else m.compute for m in exercise.mistakes]
        for mistake, value in zip(exercise.mistakes, wrong):
            assert exercise.difference(float(value), float(right)) is not None, (params, mistake.name)
    for i, a in enumerate(answers):
        for b in answers[i + 1:]:
            assert exercise.difference(float(a), float(b)) is not None, (grade_id, answers)


@pytest.mark.parametrize("grade_id", QUESTIONS)
def test_a_number_two_mistakes_give_names_both(grade_id, monkeypatch):
    """Issue 39, item 4: in every variant, catalogued mistakes give different numbers, or the
    message an answer of that number gets covers every mistake that gives it."""
    from course_utils.reference.mistakes import message_matches
    exercise = registry.exercise(grade_id)
    students = {}
    for i in range(400):
        students.setdefault(questions.variant_index(grade_id, f"s{i}"), f"s{i}")
    for index, params in enumerate(questions.variants(grade_id)):
        wrong = [(m, m.compute(**params) if callable(m.compute) else m.compute) for m in exercise.mistakes]
        right = exercise.reference(**params)
        if index == 0:  # no id: the example's numbers
            monkeypatch.delenv("COURSE_STUDENT_ID", raising=False)
        else:
            monkeypatch.setenv("COURSE_STUDENT_ID", students[index])
        for mistake, value in wrong:
            sharing = [m for m, v in wrong if exercise.difference(float(value), float(v)) is None]
            if len(sharing) == 1 or exercise.difference(float(value), float(right)) is None:
                continue
            with pytest.raises(GradingError) as error:
                exercise.check(value)
            for m in sharing:
                assert message_matches(m.message, str(error.value)), (params, mistake.name, m.name, str(error.value))


@pytest.mark.parametrize("grade_id", QUESTIONS)
def test_no_id_gets_the_example(grade_id):
    assert questions.numbers(grade_id) == questions.variants(grade_id)[0]


@pytest.mark.parametrize("grade_id", QUESTIONS)
def test_an_id_never_gets_the_example_and_is_stable(grade_id):
    seen = set()
    for student in [f"student{i}" for i in range(40)]:
        index = questions.variant_index(grade_id, student)
        assert index == questions.variant_index(grade_id, student) != 0
        seen.add(index)
    assert len(seen) >= min(4, len(questions.VARIANTS[grade_id]) - 1)  # the ids spread over the variants


def test_where_the_id_comes_from(monkeypatch, tmp_path):
    assert questions.student_id() is None
    notebook_folder = tmp_path / "02_causal_cnn"
    notebook_folder.mkdir()
    monkeypatch.chdir(notebook_folder)
    written = questions.set_student_id("  jdoe ")
    assert written == tmp_path / "student_id.txt"  # above the notebook's folder: every notebook finds it
    assert questions.student_id() == "jdoe"
    monkeypatch.setenv("JUPYTERHUB_USER", "hubuser")
    assert questions.student_id() == "hubuser"
    monkeypatch.setenv("COURSE_STUDENT_ID", "graded")
    assert questions.student_id() == "graded"
    with pytest.raises(ValueError):
        questions.set_student_id("bad\nid")


@pytest.mark.parametrize("grade_id", QUESTIONS)
def test_own_answer_passes_a_copied_one_is_named(grade_id, monkeypatch):
    exercise = registry.exercise(grade_id)
    students = [f"s{i}" for i in range(60)]
    by_variant = {}
    for student in students:
        by_variant.setdefault(questions.variant_index(grade_id, student), student)
    (mine, me), (theirs, friend) = list(sorted(by_variant.items()))[:2]
    my_answer = exercise.reference(**questions.variants(grade_id)[mine])
    friends_answer = exercise.reference(**questions.variants(grade_id)[theirs])
    example_answer = exercise.reference(**questions.variants(grade_id)[0])

    params = questions.variants(grade_id)[mine]
    my_mistakes = [m.compute(**params) if callable(m.compute) else m.compute for m in exercise.mistakes]

    def expected_words(answer, words):
        """A value that is also one of my catalogued mistakes is named as that mistake."""
        named = [m.message.format(**params) for m, v in zip(exercise.mistakes, my_mistakes)
                 if exercise.difference(float(answer), float(v)) is None]
        return named[0] if named else words

    monkeypatch.setenv("COURSE_STUDENT_ID", me)
    exercise.check(my_answer)  # in-process, as the solution notebooks and tests run
    for answer, words in ((friends_answer, "another student's question"), (example_answer, "the notebook's example")):
        with pytest.raises(GradingError) as error:
            exercise.check(answer)
        assert expected_words(answer, words) in str(error.value)
    mistake = exercise.mistakes[0]
    wrong = mistake.compute(**params) if callable(mistake.compute) else mistake.compute
    if all(exercise.difference(float(wrong), float(exercise.reference(**v))) is not None
           for v in questions.variants(grade_id)):
        with pytest.raises(GradingError) as error:
            exercise.check(wrong)
        assert mistake.message.format(**params) in str(error.value)


@pytest.mark.parametrize("grade_id", QUESTIONS)
def test_the_grader_uses_its_own_id_not_the_kernels(grade_id, monkeypatch):
    """judge._exercise personalises with the id the grader passes; the grader's environment (or a
    notebook's claim) plays no part; without an id the example's numbers stand."""
    monkeypatch.setenv("COURSE_STUDENT_ID", "someone_else")
    topic = registry.topic_of(grade_id)
    personal = judge._exercise(topic, grade_id, "alice")
    assert personal.numbers == questions.numbers(grade_id, "alice")
    assert judge._exercise(topic, grade_id, None).numbers == questions.variants(grade_id)[0]


@pytest.mark.parametrize("grade_id", QUESTIONS)
def test_a_verdict_is_read_back_into_the_mistake_it_names(grade_id):
    """The one reading that part scores and the copied-answer check share: the catalogued mistake
    whose sentence a GradingError carries; none for a sentence of no mistake, and a mistake without
    a sentence is never "named" by every message."""
    import dataclasses

    from course_utils.reference.mistakes import Mistake
    exercise = registry.exercise(grade_id).example()
    mistake = exercise.mistakes[-1]
    assert exercise.mistake_named_in(f"`{exercise.function_name}`: {mistake.message}") is mistake
    assert exercise.mistake_named_in("a sentence no catalogued mistake says") is None
    silent = dataclasses.replace(exercise, mistakes=(Mistake("silent", "", mistake.compute),))
    assert silent.mistake_named_in("any message at all") is None
