"""Reference answers of notebook 05 (QKV self-attention) not already in `attention.py`.

Instructor side: the hidden tests of `solutions/05_self_attention/self_attention.ipynb` compare
a student's functions with these. The PyTorch exercise `scaled_dot_product_attention` has its
reference in `course_utils.reference.attention`.

Conventions: rows are tokens. A sequence of T tokens of width d is a (T, d) matrix (with any
leading batch/head dimensions in PyTorch), so a projection is ``x @ W`` with ``W`` of shape
(d_in, d_out), and the score matrix is ``Q @ K^T`` of shape (Tq, Tk): row i holds query i's
scores against every key.
"""
import math

import numpy as np

from course_utils.reference.attention import scaled_dot_product_attention

__all__ = ["softmax", "attention_numpy", "self_attention", "attention_flops", "CROSSOVER_WIDTH", "crossover_length"]


def softmax(x, axis=-1):
    """Numerically stable softmax of a NumPy array along `axis`.

    Shape of x: any; returns an array of the same shape whose slices along `axis` are
    probability distributions. Subtracting each slice's maximum first leaves the result
    unchanged (softmax(x) = softmax(x - c)) and keeps every exponent <= 0, so exp never
    overflows, however large the scores.
    """
    x = np.asarray(x, dtype=np.float64)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def attention_numpy(Q, K, V):
    """Scaled dot-product attention for one sequence, in NumPy.

    Shape of Q: (Tq, d_k); K: (Tk, d_k); V: (Tk, d_v)
    Returns (output, weights): output (Tq, d_v), weights (Tq, Tk), each row summing to one.
    """
    d_k = Q.shape[-1]
    # Shape of scores: (Tq, Tk)
    scores = Q @ K.T / math.sqrt(d_k)
    # The stable softmax over the keys, written out (not a call of `softmax` above: the
    # forbidden-API guard counts any call of a reference function as a shortcut).
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ V, weights


def self_attention(x, W_q, W_k, W_v, mask=None):
    """Self-attention of a sequence with itself: queries, keys and values all come from x.

    Shape of x: (..., T, d_model); W_q, W_k: (d_model, d_k); W_v: (d_model, d_v)
    Shape of mask (optional, boolean, True = may attend): broadcastable to (..., T, T)
    Returns (output, weights): output (..., T, d_v), weights (..., T, T).
    """
    q = x @ W_q
    k = x @ W_k
    v = x @ W_v
    return scaled_dot_product_attention(q, k, v, mask)


def attention_flops(n, d, projections=True):
    """FLOPs of one single-head self-attention layer over n tokens of width d (d_k = d_v = d),
    counting a multiply-add as 2 FLOPs and leaving out the element-wise work (scaling, softmax).

    The scores Q K^T and the weighted sum A V are n x n x d multiply-adds each; the projections
    (W_Q, W_K, W_V and W_O) are n x d x d each. Returns an int.
    """
    pairwise = 2 * (2 * n * n * d)
    return pairwise + (2 * (4 * n * d * d) if projections else 0)


CROSSOVER_WIDTH = 1000  # d of the think-first question


def crossover_length(d=CROSSOVER_WIDTH):
    """The length n at which the two n x n products cost as much as the four projections:
    2 n^2 d = 4 n d^2, so n = 2 d."""
    return 2 * d
