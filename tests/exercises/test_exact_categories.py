"""Issue 39: wrong answers of the kinds no catalogue names fail with a sentence that says what
went wrong: a changed default (the signature compared with the reference's), `.view` on inputs
that are views (every exercise's cases end with a non-contiguous copy of one), an overflow."""
import pytest

from course_utils.grading import GradingError
from tests.exercises import uncatalogued_bahdanau_attention as bahdanau
from tests.exercises import uncatalogued_fast_generation as fast
from tests.exercises import uncatalogued_long_context as long_context
from tests.exercises import uncatalogued_self_attention as self_attention
from tests.exercises.test_uncatalogued import must_fail

CASES = [
    ("fast_generation_top_k", fast.tk_default_temperature, "your default for temperature is 0.7; the prompt says temperature=1.0"),
    ("self_attention_flops", self_attention.flops_default_no_projections, "your default for projections is False"),
    ("long_context_rope", long_context.rope_flatten_with_view, "not contiguous in memory"),
    ("bahdanau_attention_multiplicative_score", bahdanau.multiplicative_view, "not contiguous in memory"),
]


@pytest.mark.parametrize("grade_id, answer, words", CASES, ids=[c[1].__name__ for c in CASES])
def test_named(grade_id, answer, words):
    assert words in must_fail(grade_id, answer)


def test_every_exercise_has_a_non_contiguous_case_where_it_takes_tensors():
    import torch

    import course_utils.reference.mistakes as mistakes
    from course_utils.reference.mistakes import registry
    for exercises in registry.catalogues().values():
        for exercise in exercises.values():
            cases = exercise.cases()
            if exercise.layouts and any(mistakes.noncontiguous_case(c) is not None for c in cases):
                tensors = []

                def walk(value):
                    if isinstance(value, torch.Tensor):
                        tensors.append(value)
                    elif isinstance(value, (list, tuple)):
                        [walk(v) for v in value]
                    elif isinstance(value, dict):
                        [walk(v) for v in value.values()]
                walk(cases[-1])
                assert not all(t.is_contiguous() for t in tensors), exercise.grade_id


def _count_as_0d_tensor(d_model, num_heads, bias=True):
    """The right count, computed with tensor operations: a 0-d tensor, not an int."""
    import torch
    return torch.tensor(4 * d_model * d_model + (4 * d_model if bias else 0))


def test_a_0d_tensor_for_an_int_fails_with_its_own_sentence():
    """Issue 39, item 3: where the prompt asks for an int, a 0-d tensor holding the right number
    fails, saying what it is and how to convert it."""
    message = must_fail("multi_head_param_count", _count_as_0d_tensor)
    assert "0-d tensor" in message and ".item()" in message, message


def test_a_0d_tensor_for_a_think_first_number_fails_with_a_sentence():
    import torch

    from course_utils.reference.mistakes import masking_transformer
    exercise = masking_transformer.EXERCISES["masking_transformer_blocked_pairs"].example()
    right = exercise.reference
    with pytest.raises(GradingError) as failure:
        exercise.check(torch.tensor(right))
    assert "should be a number" in str(failure.value) and "Tensor" in str(failure.value), failure.value
