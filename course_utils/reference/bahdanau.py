"""Attention in a seq2seq decoder: additive (Bahdanau), dot and multiplicative (Luong) scores.

Ground truth for notebook 04 (Bahdanau attention).

At each decoder step, the decoder state s scores every encoder state h_i; a softmax over the
source positions turns the scores into weights a_i; the context vector is sum_i a_i h_i.
The three scores differ only in how s and h_i are compared:

    additive:        score_i = v^T tanh(W1 h_i + W2 s)      (s and h_i may differ in size)
    dot:             score_i = s^T h_i                       (needs d_s == d_h)
    multiplicative:  score_i = s^T W h_i                     (W of shape (d_s, d_h))
"""

import torch

__all__ = ["additive_score", "additive_attention", "dot_score", "multiplicative_score"]


def additive_score(query, keys, W1, W2, v):
    """Bahdanau's scores v^T tanh(W1 h_i + W2 s) for every encoder position i.

    Shape of query (decoder state s): (batch_size, d_s)
    Shape of keys (encoder states h_i): (batch_size, T, d_h)
    Shape of W1: (d_a, d_h); W2: (d_a, d_s); v: (d_a,)
    Returns scores of shape (batch_size, T).
    """
    if W1.shape[-1] != keys.shape[-1] or W2.shape[-1] != query.shape[-1]:
        raise ValueError(
            f"W1 {tuple(W1.shape)} must be (d_a, d_h={keys.shape[-1]}) and "
            f"W2 {tuple(W2.shape)} must be (d_a, d_s={query.shape[-1]})"
        )
    # Row vectors, so W h becomes h @ W.T. Shape: (batch_size, T, d_a)
    projected_keys = keys @ W1.T
    # The same projected query is added at every position. Shape: (batch_size, 1, d_a)
    projected_query = (query @ W2.T)[:, None, :]
    # Shape: (batch_size, T, d_a) @ (d_a,) -> (batch_size, T)
    return torch.tanh(projected_keys + projected_query) @ v


def additive_attention(query, keys, W1, W2, v, mask=None):
    """Bahdanau attention: additive scores, softmax over source positions, weighted sum.

    Shape of query (decoder state s): (batch_size, d_s)
    Shape of keys (encoder states h_i, also the values): (batch_size, T, d_h)
    Shape of W1: (d_a, d_h); W2: (d_a, d_s); v: (d_a,)
    Shape of mask (optional, boolean): (batch_size, T), True = real position (not padding)

    Returns ``(context, weights)``:
    Shape of context: (batch_size, d_h), context = sum_i a_i h_i
    Shape of weights: (batch_size, T), summing to one over T.

    Masked positions get weight exactly zero. A fully masked sequence (no real position) gets
    all-zero weights and a zero context, without NaN.
    """
    scores = additive_score(query, keys, W1, W2, v)
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be boolean (True = real position), got {mask.dtype}")
        has_real = mask.any(dim=-1, keepdim=True)  # Shape: (batch_size, 1)
        # -inf gives padding zero weight; rows with nothing real are zeroed after the softmax
        # instead (all -inf would give 0 / 0 = NaN).
        scores = scores.masked_fill(~(mask | ~has_real), float("-inf"))
        weights = torch.softmax(scores, dim=-1) * has_real.to(scores.dtype)
    # Shape: (batch_size, 1, T) @ (batch_size, T, d_h) -> (batch_size, d_h)
    context = (weights[:, None, :] @ keys)[:, 0, :]
    return context, weights


def dot_score(query, keys):
    """Dot-product scores s^T h_i.

    Shape of query: (batch_size, d); keys: (batch_size, T, d). Returns (batch_size, T).
    """
    if query.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"dot scores need equal sizes: query has {query.shape[-1]}, keys have {keys.shape[-1]}"
        )
    # Shape: (batch_size, T, d) @ (batch_size, d, 1) -> (batch_size, T)
    return (keys @ query[:, :, None])[:, :, 0]


def multiplicative_score(query, keys, W):
    """Multiplicative (Luong "general") scores s^T W h_i.

    Shape of query: (batch_size, d_s); keys: (batch_size, T, d_h); W: (d_s, d_h).
    Returns (batch_size, T).
    """
    if W.shape != (query.shape[-1], keys.shape[-1]):
        raise ValueError(
            f"W must have shape (d_s, d_h) = ({query.shape[-1]}, {keys.shape[-1]}), "
            f"got {tuple(W.shape)}"
        )
    # s^T W is a row vector of size d_h; then a dot score with each h_i.
    return dot_score(query @ W, keys)
