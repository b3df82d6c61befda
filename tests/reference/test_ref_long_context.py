"""The reference answers of notebook 12: RoPE's relative property, blocked attention against
PyTorch's own attention and the course's reference, and the weights' bytes against PyTorch."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.reference import scaled_dot_product_attention
from course_utils.reference.long_context import apply_rope, attention_weights_bytes, blocked_attention

SETTINGS = settings(max_examples=30, deadline=None)


def test_rope_hand_values():
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]] * 3, dtype=torch.float64)
    out = apply_rope(x)
    assert out[0].tolist() == x[0].tolist()  # position 0: no rotation
    w1 = 10000 ** (-2 / 4)
    expected = [math.cos(2), math.sin(2), math.cos(2 * w1), math.sin(2 * w1)]
    assert out[2].tolist() == pytest.approx(expected)


def test_rope_keeps_shape_dtype_norm_and_input():
    x = torch.randn(2, 3, 7, 8)
    before = x.clone()
    out = apply_rope(x)
    assert out.shape == x.shape and out.dtype == torch.float32
    assert torch.equal(x, before)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))


def test_rope_equals_complex_multiplication():
    x = torch.randn(5, 6, dtype=torch.float64)
    positions = torch.tensor([3, 0, 9, 1, 4])
    theta = 10000.0 ** (-torch.arange(0, 6, 2, dtype=torch.float64) / 6)
    z = torch.view_as_complex(x.reshape(5, 3, 2).contiguous()) * torch.exp(1j * positions[:, None] * theta)
    torch.testing.assert_close(apply_rope(x, positions), torch.view_as_real(z).reshape(5, 6))


def test_rope_rejects_odd_d():
    with pytest.raises(ValueError, match="even"):
        apply_rope(torch.randn(3, 5))


@SETTINGS
@given(m=st.integers(0, 500), n=st.integers(0, 500), shift=st.integers(-200, 2000),
       d=st.sampled_from([2, 4, 8, 16]), seed=st.integers(0, 2**16))
def test_rope_score_depends_only_on_offset(m, n, shift, d, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, d, generator=g, dtype=torch.float64), torch.randn(1, d, generator=g, dtype=torch.float64)
    shift = max(shift, -min(m, n))  # positions stay >= 0

    def score(a, b):
        return float((apply_rope(q, torch.tensor([a])) * apply_rope(k, torch.tensor([b]))).sum())

    assert score(m + shift, n + shift) == pytest.approx(score(m, n), abs=1e-9)


def _random_mask(g, *shape):
    return torch.rand(*shape, generator=g) < 0.6


@SETTINGS
@given(Tq=st.integers(1, 9), Tk=st.integers(1, 13), block=st.integers(1, 15), seed=st.integers(0, 2**16),
       masked=st.booleans())
def test_blocked_equals_the_course_reference(Tq, Tk, block, seed, masked):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, T, d, generator=g, dtype=torch.float64) for T, d in ((Tq, 4), (Tk, 4), (Tk, 3)))
    mask = _random_mask(g, 2, Tq, Tk) if masked else None  # fully masked rows and blocks happen
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(blocked_attention(q, k, v, mask, block_size=block), expected)


@pytest.mark.parametrize("block", [1, 3, 4, 7, 64])
def test_blocked_equals_torch_sdpa_with_and_without_causal_mask(block):
    g = torch.Generator().manual_seed(block)
    q, k, v = (torch.randn(2, 3, 10, 8, generator=g) for _ in range(3))
    torch.testing.assert_close(blocked_attention(q, k, v, block_size=block), F.scaled_dot_product_attention(q, k, v),
                               atol=1e-5, rtol=1e-4)
    causal = torch.ones(10, 10, dtype=torch.bool).tril()
    torch.testing.assert_close(blocked_attention(q, k, v, causal, block_size=block),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5, rtol=1e-4)


def test_blocked_fully_masked_row_is_zero_and_large_scores_are_stable():
    q = torch.full((2, 4), 50.0, dtype=torch.float64)
    k = torch.cat([torch.full((3, 4), 50.0), torch.full((5, 4), -50.0)]).double()
    v = torch.randn(8, 3, dtype=torch.float64)
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[1] = False
    out = blocked_attention(q, k, v, mask, block_size=3)
    assert torch.isfinite(out).all()
    assert out[1].abs().max() == 0
    torch.testing.assert_close(out[0], v[:3].mean(dim=0))


def test_blocked_leaves_inputs_alone_and_keeps_dtype():
    q, k, v = torch.randn(4, 5), torch.randn(6, 5), torch.randn(6, 2)
    copies = [t.clone() for t in (q, k, v)]
    out = blocked_attention(q, k, v, block_size=4)
    assert out.dtype == torch.float32
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), copies))


def test_weights_bytes_match_a_real_tensor():
    for dtype in (torch.float16, torch.float32, torch.float64):
        t = torch.empty(3, 2, 5, 5, dtype=dtype)
        assert attention_weights_bytes(5, 2, 3, t.element_size()) == t.nelement() * t.element_size()
    assert attention_weights_bytes(32768, 16) == 64 * 2**30
