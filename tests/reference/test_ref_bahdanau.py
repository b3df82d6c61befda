"""The reference Bahdanau (additive), dot and multiplicative attention scores."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.reference.bahdanau_attention import (
    additive_attention,
    additive_score,
    dot_score,
    multiplicative_score,
)

SETTINGS = settings(max_examples=30, deadline=None)
DT = torch.float64

dims = st.tuples(
    st.integers(1, 3),  # B
    st.integers(1, 6),  # T
    st.integers(1, 5),  # d_h
    st.integers(1, 5),  # d_s
    st.integers(1, 5),  # d_a
    st.integers(0, 10_000),  # seed
)


def make(B, T, d_h, d_s, d_a, seed):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(B, d_s, generator=g, dtype=DT),
        torch.randn(B, T, d_h, generator=g, dtype=DT),
        torch.randn(d_a, d_h, generator=g, dtype=DT),
        torch.randn(d_a, d_s, generator=g, dtype=DT),
        torch.randn(d_a, generator=g, dtype=DT),
    )


def loop_additive_attention(query, keys, W1, W2, v, mask=None):
    """The textbook formula, one example and one position at a time."""
    B, T, d_h = keys.shape
    contexts, all_weights = [], []
    for b in range(B):
        s = query[b]
        scores = []
        for i in range(T):
            if mask is not None and not mask[b, i]:
                scores.append(-math.inf)
            else:
                scores.append(float(v @ torch.tanh(W1 @ keys[b, i] + W2 @ s)))
        exps = [math.exp(x - max(scores)) for x in scores]
        weights = [e / sum(exps) for e in exps]
        contexts.append(sum(a * keys[b, i] for i, a in enumerate(weights)))
        all_weights.append(weights)
    return torch.stack(contexts), torch.tensor(all_weights, dtype=DT)


@SETTINGS
@given(dims)
def test_additive_attention_matches_loop(d):
    query, keys, W1, W2, v = make(*d)
    B, T, d_h = keys.shape
    context, weights = additive_attention(query, keys, W1, W2, v)
    assert context.shape == (B, d_h) and weights.shape == (B, T)
    exp_context, exp_weights = loop_additive_attention(query, keys, W1, W2, v)
    torch.testing.assert_close(context, exp_context)
    torch.testing.assert_close(weights, exp_weights)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, dtype=DT))


@SETTINGS
@given(dims)
def test_additive_attention_respects_mask(d):
    query, keys, W1, W2, v = make(*d)
    B, T, _ = keys.shape
    g = torch.Generator().manual_seed(d[-1])
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    context, weights = additive_attention(query, keys, W1, W2, v, mask)
    assert (weights[~mask] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, dtype=DT))
    exp_context, exp_weights = loop_additive_attention(query, keys, W1, W2, v, mask)
    torch.testing.assert_close(context, exp_context)
    torch.testing.assert_close(weights, exp_weights)
    # Changing padded encoder states changes nothing.
    changed = keys.masked_fill(~mask[..., None], 7.0)
    torch.testing.assert_close(additive_attention(query, changed, W1, W2, v, mask)[0], context)


def test_fully_masked_sequence_gives_zeros():
    query, keys, W1, W2, v = make(2, 4, 3, 3, 5, 0)
    mask = torch.tensor([[True, True, False, False], [False] * 4])
    context, weights = additive_attention(query, keys, W1, W2, v, mask)
    assert not context.isnan().any()
    assert (weights[1] == 0).all() and (context[1] == 0).all()
    with pytest.raises(ValueError, match="boolean"):
        additive_attention(query, keys, W1, W2, v, mask.long())


def test_hand_example():
    # d_a = 1, W1 = W2 = [[1]], v = [1]: score_i = tanh(h_i + s).
    one = torch.ones(1, 1, dtype=DT)
    query = torch.tensor([[0.0]], dtype=DT)
    keys = torch.tensor([[[0.0], [1.0]]], dtype=DT)
    scores = additive_score(query, keys, one, one, torch.ones(1, dtype=DT))
    torch.testing.assert_close(scores, torch.tensor([[0.0, math.tanh(1.0)]], dtype=DT))
    context, weights = additive_attention(query, keys, one, one, torch.ones(1, dtype=DT))
    a1 = math.exp(math.tanh(1.0)) / (1 + math.exp(math.tanh(1.0)))
    torch.testing.assert_close(weights, torch.tensor([[1 - a1, a1]], dtype=DT))
    torch.testing.assert_close(context, torch.tensor([[a1]], dtype=DT))


@SETTINGS
@given(dims)
def test_dot_and_multiplicative_scores(d):
    B, T, d_h, d_s, _, seed = d
    query, keys, *_ = make(*d)
    W = torch.randn(d_s, d_h, generator=torch.Generator().manual_seed(seed), dtype=DT)
    scores = multiplicative_score(query, keys, W)
    assert scores.shape == (B, T)
    torch.testing.assert_close(scores, torch.einsum("bs,sh,bth->bt", query, W, keys))
    same = torch.randn(B, T, d_s, dtype=DT)
    torch.testing.assert_close(dot_score(query, same), torch.einsum("bd,btd->bt", query, same))
    # With W = I the multiplicative score is the dot score.
    torch.testing.assert_close(
        multiplicative_score(query, same, torch.eye(d_s, dtype=DT)), dot_score(query, same)
    )


def test_score_shape_errors():
    query, keys, W1, W2, v = make(2, 3, 4, 5, 6, 0)
    with pytest.raises(ValueError):
        dot_score(query, keys)  # d_s = 5 != d_h = 4
    with pytest.raises(ValueError):
        multiplicative_score(query, keys, torch.zeros(4, 5, dtype=DT))
    with pytest.raises(ValueError):
        additive_attention(query, keys, W2, W1, v)
