"""Second correct implementations of notebook 05's exercises, written differently from the
reference (course_utils/reference/self_attention.py and attention.py): the exercise's tests
must pass them too (tests/exercises/test_mutations.py)."""
import math

import numpy as np
import torch


def softmax_logsumexp(x, axis=-1):
    """exp(x - logsumexp(x)), the log-sum-exp computed with the row maximum."""
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    log_sum = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return np.exp(x - log_sum)


def softmax_longdouble(x, axis=-1):
    """The maximum subtracted, then exp and the sum in np.longdouble, the result back in float64."""
    z = np.asarray(x, dtype=np.longdouble)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float64)


def softmax_moveaxis(x, axis=-1):
    """Move the axis last, normalise row by row with a loop, move it back."""
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    flat = x.reshape(-1, x.shape[-1])
    rows = []
    for row in flat:
        e = np.exp(row - row.max())
        rows.append(e / e.sum())
    out = np.array(rows).reshape(x.shape)
    return np.moveaxis(out, -1, axis)


def attention_numpy_einsum(Q, K, V):
    """Scores with einsum, a log-sum-exp softmax, the weighted sum with einsum."""
    scores = np.einsum("qd,kd->qk", Q, K) / np.sqrt(K.shape[1])
    log_norm = scores.max(axis=1, keepdims=True)
    log_norm = log_norm + np.log(np.exp(scores - log_norm).sum(axis=1, keepdims=True))
    weights = np.exp(scores - log_norm)
    return np.einsum("qk,kv->qv", weights, V), weights


def attention_numpy_loop(Q, K, V):
    """One query at a time, as in the lectures' six steps."""
    d_k = Q.shape[1]
    outputs, all_weights = [], []
    for q in Q:
        scores = np.array([q @ k for k in K]) / math.sqrt(d_k)
        e = np.exp(scores - scores.max())
        weights = e / e.sum()
        outputs.append(sum(w * v for w, v in zip(weights, V)))
        all_weights.append(weights)
    return np.array(outputs), np.array(all_weights)


def sdpa_einsum_where(q, k, v, mask=None):
    """einsum scores, torch.where for the mask, NaN rows (nothing to attend to) zeroed."""
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)
    return torch.einsum("...qk,...kv->...qv", weights, v), weights


def sdpa_manual_softmax(q, k, v, mask=None):
    """matmul with mT, a hand-written softmax that gives fully masked rows zero weight."""
    scores = q @ k.mT / math.sqrt(k.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -math.inf)
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(scores - top)
    total = e.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, e / total.clamp_min(1e-300), torch.zeros_like(e))
    return weights @ v, weights


def self_attention_einsum(x, W_q, W_k, W_v, mask=None):
    """Projections with einsum; attention by the alternative above (a student would call
    their own scaled_dot_product_attention)."""
    q = torch.einsum("...td,de->...te", x, W_q)
    k = torch.einsum("...td,de->...te", x, W_k)
    v = torch.einsum("...td,de->...te", x, W_v)
    return sdpa_manual_softmax(q, k, v, mask)


def self_attention_matmul(x, W_q, W_k, W_v, mask=None):
    """torch.matmul projections, attention via einsum and torch.where."""
    return sdpa_einsum_where(torch.matmul(x, W_q), torch.matmul(x, W_k), torch.matmul(x, W_v), mask)


def attention_flops_by_operation(n, d, projections=True):
    """Sum the FLOPs of each matrix product in turn, 2 m k p for an (m, k) @ (k, p) product."""
    products = [(n, d, n), (n, n, d)]                 # Q K^T, then A V
    if projections:
        products += [(n, d, d)] * 4                   # x W_Q, x W_K, x W_V, then W_O
    return sum(2 * m * k * p for m, k, p in products)


def attention_flops_factored(n, d, projections=True):
    return 4 * n * d * (n + (2 * d if projections else 0))


ALTERNATIVES = {
    "self_attention_softmax": [softmax_logsumexp, softmax_moveaxis, softmax_longdouble],
    "self_attention_attention_numpy": [attention_numpy_einsum, attention_numpy_loop],
    "self_attention_sdpa_torch": [sdpa_einsum_where, sdpa_manual_softmax],
    "self_attention_self_attention": [self_attention_einsum, self_attention_matmul],
    "self_attention_flops": [attention_flops_by_operation, attention_flops_factored],
    # a length computed with NumPy is a NumPy number
    "self_attention_crossover": [2000, 2000.0, 2 * 1000, np.int64(2000), np.float64(2000.0)],
}
