"""The reference attention (course_utils.reference.attention) against PyTorch and properties."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.reference.attention import (
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)

SETTINGS = settings(max_examples=30, deadline=None)
DT = torch.float64


def random_qkv(lead, Tq, Tk, d_k, d_v, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, Tq, d_k, generator=g, dtype=DT)
    k = torch.randn(*lead, Tk, d_k, generator=g, dtype=DT)
    v = torch.randn(*lead, Tk, d_v, generator=g, dtype=DT)
    return q, k, v


def random_mask(shape, seed=0):
    """A random boolean mask with at least one True in every row (last axis)."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(*shape, generator=g) < 0.5
    first = torch.randint(shape[-1], shape[:-1], generator=g)
    return mask | F.one_hot(first, shape[-1]).bool()


def softmax_weights(q, k, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1)


shapes = st.tuples(
    st.lists(st.integers(1, 3), max_size=2),  # leading dims
    st.integers(1, 6),  # Tq
    st.integers(1, 6),  # Tk
    st.integers(1, 8),  # d_k
    st.integers(1, 8),  # d_v
    st.integers(0, 10_000),  # seed
)


@SETTINGS
@given(shapes, st.booleans())
def test_sdpa_matches_torch(shape, use_mask):
    lead, Tq, Tk, d_k, d_v, seed = shape
    q, k, v = random_qkv(lead, Tq, Tk, d_k, d_v, seed)
    mask = random_mask((*lead, Tq, Tk), seed) if use_mask else None
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert out.shape == (*lead, Tq, d_v)
    assert weights.shape == (*lead, Tq, Tk)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, softmax_weights(q, k, mask))
    torch.testing.assert_close(weights.sum(-1), torch.ones(*lead, Tq, dtype=DT))
    if mask is not None:
        assert (weights[~mask] == 0).all()


def test_sdpa_broadcast_mask_and_leading_dims():
    q, k, v = random_qkv((2, 3), 4, 5, 6, 7)
    mask = random_mask((4, 5))  # broadcast over (2, 3)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert weights.shape == (2, 3, 4, 5)


@SETTINGS
@given(shapes)
def test_sdpa_permutation_equivariance(shape):
    lead, Tq, Tk, d_k, d_v, seed = shape
    q, k, v = random_qkv(lead, Tq, Tk, d_k, d_v, seed)
    g = torch.Generator().manual_seed(seed)
    pq, pk = torch.randperm(Tq, generator=g), torch.randperm(Tk, generator=g)
    out, _ = scaled_dot_product_attention(q, k, v)
    # Permuting the queries permutes the outputs the same way.
    out_q, _ = scaled_dot_product_attention(q[..., pq, :], k, v)
    torch.testing.assert_close(out_q, out[..., pq, :])
    # Permuting keys and values together changes nothing.
    out_kv, _ = scaled_dot_product_attention(q, k[..., pk, :], v[..., pk, :])
    torch.testing.assert_close(out_kv, out)


def test_sdpa_fully_masked_row_is_zero_without_nan():
    q, k, v = random_qkv((2,), 3, 4, 5, 6)
    q.requires_grad_(True)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[0, 1] = False  # query 1 of example 0 may attend to nothing
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not out.isnan().any() and not weights.isnan().any()
    assert (weights[0, 1] == 0).all() and (out[0, 1] == 0).all()
    # Other rows are ordinary attention.
    full, _ = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out[1], full[1])
    torch.testing.assert_close(out[0, [0, 2]], full[0, [0, 2]])
    out.sum().backward()
    assert not q.grad.isnan().any()


def test_causal_mask_values():
    expected = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(3), expected)
    assert causal_mask(5).dtype == torch.bool and causal_mask(5).shape == (5, 5)


@SETTINGS
@given(st.integers(1, 8), st.integers(1, 6), st.integers(0, 10_000))
def test_causal_self_attention_ignores_the_future(T, d, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, T, d, generator=g, dtype=DT)
    t = int(torch.randint(T, (1,), generator=g))
    out, weights = scaled_dot_product_attention(x, x, x, causal_mask(T))
    changed = x.clone()
    changed[:, t + 1 :] += torch.randn_like(changed[:, t + 1 :]) * 10
    out2, _ = scaled_dot_product_attention(changed, changed, changed, causal_mask(T))
    torch.testing.assert_close(out2[:, : t + 1], out[:, : t + 1])
    assert (weights.triu(1) == 0).all()


def test_padding_mask():
    mask = padding_mask(torch.tensor([2, 4, 0]), 4)
    assert mask.shape == (3, 1, 4) and mask.dtype == torch.bool
    assert mask[:, 0].tolist() == [
        [True, True, False, False],
        [True, True, True, True],
        [False, False, False, False],
    ]
    # Broadcasts against (B, Tq, Tk) scores: padded keys get zero weight.
    q, k, v = random_qkv((3,), 5, 4, 2, 3)
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    assert (weights[0, :, 2:] == 0).all()
    torch.testing.assert_close(weights[:2].sum(-1), torch.ones(2, 5, dtype=DT))
    assert (weights[2] == 0).all()  # nothing real to attend to
    with pytest.raises(ValueError):
        padding_mask([5], 4)


def test_sdpa_errors():
    q, k, v = random_qkv((2,), 3, 4, 5, 6)
    with pytest.raises(ValueError, match="d_k"):
        scaled_dot_product_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="Tk"):
        scaled_dot_product_attention(q, k, v[:, :3])
    with pytest.raises(ValueError, match="boolean"):
        scaled_dot_product_attention(q, k, v, torch.ones(3, 4))
    with pytest.raises(ValueError, match="broadcast"):
        scaled_dot_product_attention(q, k, v, torch.ones(3, 3, dtype=torch.bool))


# ---------------------------------------------------------------- multi-head attention


def torch_mha_like(mha, d_model, num_heads, bias):
    """A torch.nn.MultiheadAttention carrying the same weights as our module."""
    ref = torch.nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True)
    ref = ref.to(DT)
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight])
        )
        ref.out_proj.weight.copy_(mha.out_proj.weight)
        if bias:
            ref.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
            ref.out_proj.bias.copy_(mha.out_proj.bias)
    return ref


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d_model,num_heads", [(8, 2), (12, 3), (6, 1)])
def test_mha_matches_torch(bias, causal, d_model, num_heads):
    torch.manual_seed(d_model * 10 + num_heads)
    B, T = 2, 5
    mha = MultiHeadAttention(d_model, num_heads, bias=bias).to(DT)
    ref = torch_mha_like(mha, d_model, num_heads, bias)
    x = torch.randn(B, T, d_model, dtype=DT)
    mask = causal_mask(T) if causal else None
    out, weights = mha(x, x, x, mask=mask)
    # torch's boolean attn_mask means True = NOT allowed: the opposite of ours.
    expected, expected_w = ref(
        x, x, x, attn_mask=None if mask is None else ~mask, average_attn_weights=False
    )
    assert out.shape == (B, T, d_model) and weights.shape == (B, num_heads, T, T)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_w)


def test_mha_cross_attention_and_padding_mask():
    torch.manual_seed(1)
    d_model, h, B, Tq, Tk = 8, 4, 3, 2, 6
    mha = MultiHeadAttention(d_model, h).to(DT)
    ref = torch_mha_like(mha, d_model, h, True)
    query = torch.randn(B, Tq, d_model, dtype=DT)
    memory = torch.randn(B, Tk, d_model, dtype=DT)
    lengths = torch.tensor([6, 3, 1])
    keep = padding_mask(lengths, Tk)  # (B, 1, Tk), inserted as a head axis by the module
    out, weights = mha(query, memory, memory, mask=keep)
    expected, expected_w = ref(
        query, memory, memory, key_padding_mask=~keep[:, 0], average_attn_weights=False
    )
    assert weights.shape == (B, h, Tq, Tk)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_w)
    # The same mask written as (B, 1, 1, Tk) gives the same result.
    out4, _ = mha(query, memory, memory, mask=keep[:, None])
    torch.testing.assert_close(out4, out)


def test_split_merge_heads():
    x = torch.arange(2 * 3 * 12.0).reshape(2, 3, 12)
    heads = split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 3)
    assert torch.equal(heads[1, 2, 0], x[1, 0, 6:9])  # head 2 holds features 6..8
    assert torch.equal(merge_heads(heads), x)
    with pytest.raises(ValueError):
        split_heads(x, 5)


def test_mha_rejects_indivisible_d_model():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    mha = MultiHeadAttention(6, 2)
    assert all(
        isinstance(getattr(mha, name), torch.nn.Linear)
        for name in ("q_proj", "k_proj", "v_proj", "out_proj")
    )
