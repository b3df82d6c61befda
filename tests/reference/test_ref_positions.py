"""The reference sinusoidal positional encoding and its rotation property."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.reference.positions import relative_rotation, sinusoidal_positional_encoding

SETTINGS = settings(max_examples=30, deadline=None)


def test_shape_dtype_and_hand_values():
    pe = sinusoidal_positional_encoding(50, 6)
    assert pe.shape == (50, 6) and pe.dtype == torch.float32
    # Position 0: sin(0) = 0 in even columns, cos(0) = 1 in odd ones.
    assert pe[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    # Column pair 0 has frequency 1: PE[pos, 0] = sin(pos), PE[pos, 1] = cos(pos).
    assert pe[1, 0].item() == pytest.approx(math.sin(1), abs=1e-6)
    assert pe[1, 1].item() == pytest.approx(math.cos(1), abs=1e-6)
    # Column pair 1 (2i = 2): frequency 1 / 10000^(2/6).
    w = 1 / 10000 ** (2 / 6)
    assert pe[7, 2].item() == pytest.approx(math.sin(7 * w), abs=1e-6)
    assert pe[7, 3].item() == pytest.approx(math.cos(7 * w), abs=1e-6)
    w = 1 / 10000 ** (4 / 6)
    assert pe[49, 4].item() == pytest.approx(math.sin(49 * w), abs=1e-6)
    assert pe[49, 5].item() == pytest.approx(math.cos(49 * w), abs=1e-6)


def test_odd_d_model_last_column_is_an_unpaired_sine():
    pe = sinusoidal_positional_encoding(20, 5, dtype=torch.float64)
    assert pe.shape == (20, 5)
    w = 1 / 10000 ** (4 / 5)
    expected = torch.sin(torch.arange(20, dtype=torch.float64) * w)
    torch.testing.assert_close(pe[:, 4], expected)
    # The first four columns use the same formula, with d_model = 5 in the exponent.
    w1 = 1 / 10000 ** (2 / 5)
    assert pe[3, 3].item() == pytest.approx(math.cos(3 * w1))
    with pytest.raises(ValueError, match="even"):
        relative_rotation(1, 5)


@SETTINGS
@given(st.integers(1, 16).map(lambda n: 2 * n), st.integers(-40, 40))
def test_rotation_moves_every_position_by_k(d_model, k):
    max_len = 100
    pe = sinusoidal_positional_encoding(max_len, d_model, dtype=torch.float64)
    R = relative_rotation(k, d_model, dtype=torch.float64)
    assert R.shape == (d_model, d_model)
    positions = torch.arange(max(0, -k), min(max_len, max_len - k))
    torch.testing.assert_close(pe[positions] @ R, pe[positions + k])
    # A rotation: orthogonal, and R_k R_{-k} = I.
    eye = torch.eye(d_model, dtype=torch.float64)
    torch.testing.assert_close(R @ R.T, eye)
    torch.testing.assert_close(R @ relative_rotation(-k, d_model, torch.float64), eye)


def test_rotation_is_block_diagonal():
    R = relative_rotation(3, 8)
    assert R.dtype == torch.float32
    block_mask = torch.block_diag(*[torch.ones(2, 2)] * 4).bool()
    assert (R[~block_mask] == 0).all()
    torch.testing.assert_close(relative_rotation(0, 8), torch.eye(8))


@SETTINGS
@given(st.integers(1, 16).map(lambda n: 2 * n), st.integers(0, 30))
def test_dot_products_depend_only_on_offset(d_model, k):
    pe = sinusoidal_positional_encoding(80, d_model, dtype=torch.float64)
    dots = (pe[: 80 - k] * pe[k:]).sum(-1)  # PE[p] . PE[p + k] for every p
    torch.testing.assert_close(dots, dots[0].expand_as(dots))
    # And the value is sum_i cos(k w_i).
    w = 1 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    assert dots[0].item() == pytest.approx(torch.cos(k * w).sum().item())
