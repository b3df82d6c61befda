"""A student's numbers do not depend on which form of their id was typed: the notebook draws
them from the id as graders file it (questions.canonical_id), the platforms grade under that
same form (platforms.valid_id), so `ada+cs101@uni.edu` in the notebook and Gradescope's
`ada-cs101@uni.edu` folder give the same question."""
import pytest

from course_utils.grading import questions

TYPED_AND_FILED = [
    ("ada+cs101@uni.edu", "ada-cs101@uni.edu"),
    ("  jdoe  ", "jdoe"),
    ("_lead", "lead"),
    ("Ana María", "Ana-Mar-a"),
    ("x" * 80, "x" * 64),
]


@pytest.mark.parametrize("typed, filed", TYPED_AND_FILED)
def test_the_numbers_follow_the_id_as_graders_file_it(typed, filed):
    assert questions.canonical_id(typed) == filed
    for grade_id in questions.VARIANTS:
        assert questions.numbers(grade_id, typed) == questions.numbers(grade_id, filed), grade_id


def test_ids_that_differ_once_filed_still_get_their_own_numbers():
    differs = [g for g in questions.VARIANTS
               if questions.numbers(g, "ada-cs101@uni.edu") != questions.numbers(g, "ada-cs102@uni.edu")]
    assert differs  # the rule did not collapse every id onto one question


def test_nothing_left_is_no_id():
    assert questions.canonical_id("+++") is None and questions.canonical_id("") is None
    assert questions.variant_index(next(iter(questions.VARIANTS)), "+++") == 0


def test_the_platforms_grade_under_the_same_form():
    from autograder import platforms
    for typed, filed in TYPED_AND_FILED:
        assert platforms.valid_id(typed) == filed
