"""course_utils.grading's checks: each passes right input and fails wrong input with a message
in a student's terms."""
import numpy as np
import pytest
import torch

import course_utils.grading as grading
from course_utils.grading import GradingError


def fails(check, *args, **kwargs):
    with pytest.raises(GradingError) as failure:
        check(*args, **kwargs)
    return str(failure.value)


def test_assert_close_passes_equal_values_across_types():
    grading.assert_close(torch.tensor([1.0, 2.0]), np.array([1.0, 2.0 + 1e-7]))
    grading.assert_close([[1, 2]], np.array([[1.0, 2.0]]))


def test_assert_close_names_shape_and_largest_error():
    assert "shape (2, 3)" in fails(grading.assert_close, np.zeros((2, 3)), np.zeros((3, 2)))
    message = fails(grading.assert_close, np.array([[0.0, 1.0], [2.0, 3.0]]), np.array([[0.0, 1.0], [2.0, 7.0]]))
    assert "index (1, 1)" in message and "got 3" in message and "expected 7" in message


def test_assert_close_treats_nan_as_an_error_unless_expected():
    message = fails(grading.assert_close, np.array([np.nan, 1.0]), np.array([0.5, 1.0]))
    assert "index (0,)" in message and "nan" in message
    grading.assert_close(np.array([np.nan]), np.array([np.nan]))


def test_assert_shape_and_type():
    grading.assert_shape(torch.zeros(2, 3), (2, 3))
    assert "should have shape (3, 2)" in fails(grading.assert_shape, torch.zeros(2, 3), (3, 2))
    grading.assert_type(np.zeros(1), "numpy")
    assert "should be a NumPy array" in fails(grading.assert_type, torch.zeros(1), "numpy")
    assert "should be a torch.Tensor" in fails(grading.assert_type, [1.0], "torch")


def test_assert_sums_to_one_points_at_the_wrong_axis():
    weights = torch.softmax(torch.randn(2, 3, 4), dim=-1)
    grading.assert_sums_to_one(weights)
    message = fails(grading.assert_sums_to_one, weights.transpose(-1, -2))
    assert "sum to one along axis -2 instead" in message
    assert "negative" in fails(grading.assert_sums_to_one, np.array([[1.5, -0.5]]))


def test_assert_finite():
    grading.assert_finite(np.ones(3))
    assert "inf" in fails(grading.assert_finite, np.array([1.0, np.inf]), hint="subtract the maximum")


def test_assert_true():
    grading.assert_true(True, "never shown")
    assert fails(grading.assert_true, False, "the message") == "the message"


def test_permutation_equivariance_check():
    x = torch.randn(5, 4)
    grading.assert_permutation_equivariant(lambda x: torch.softmax(x @ x.T, -1) @ x, x)
    positional = lambda x: x + torch.arange(x.shape[0], dtype=x.dtype)[:, None]
    assert "not permutation-equivariant" in fails(grading.assert_permutation_equivariant, positional, x)


def test_causality_check():
    x = torch.randn(1, 6, 3)
    grading.assert_causal(lambda x: torch.cumsum(x, dim=-2), x)
    leaky = lambda x: x + x.mean(dim=-2, keepdim=True)
    assert "looks into the future" in fails(grading.assert_causal, leaky, x)


def test_mismatch_prints_as_many_digits_as_it_takes_to_see_the_difference():
    from course_utils.grading.checks import mismatch
    message = mismatch([2.364961], [2.364963], atol=0, rtol=1e-9, name="your result")
    assert "got 2.364961, expected 2.364963" in message


def test_mismatch_of_a_single_number_has_no_empty_index_and_agrees_with_a_plural_name():
    from course_utils.grading.checks import mismatch
    assert mismatch(13, 15, name="your receptive field") == "your receptive field is 13, but it should be 15."
    message = mismatch([1.0, 2.0], [1.0, 3.0], name="your weights")
    assert message.startswith("your weights: 50% of the entries differ")


def test_a_failing_hidden_case_of_short_arguments_is_written_as_the_call():
    from course_utils.reference.mistakes import causal_cnn
    exercise = causal_cnn.EXERCISES["causal_cnn_receptive_field"]
    case = exercise.cases()[0]
    described = exercise.describe_case(case)
    assert described.startswith(" (receptive_field(") and "shape" not in described
