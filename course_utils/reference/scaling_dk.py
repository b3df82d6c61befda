"""Reference answers of notebook 06 (why divide by sqrt(d_k)).

Instructor side: the hidden tests of `solutions/06_scaling_dk/scaling_dk.ipynb` compare a
student's functions with these (through `course_utils.reference.mistakes.scaling_dk`).

* `score_variance(q, k, scaled=False)`: the measured variance of the scores q_i . k_i.
* `fit_power_law(x, y)`: least-squares fit of y = c * x^p on log-log axes.
* `softmax_jacobian(z)`: d softmax(z) / d z = diag(s) - s s^T, batched.
"""
import math

import numpy as np
import torch

__all__ = ["dot_product_variance", "score_variance", "fit_power_law", "softmax_jacobian"]


def score_variance(q, k, scaled=False):
    """The sample variance of the dot products of paired queries and keys.

    Shape of q, k: (n, d_k); pair i is (q[i], k[i]), so there are n scores q[i] . k[i].
    With scaled=True every score is divided by sqrt(d_k) first (as in attention).
    Returns a Python float: the unbiased sample variance (dividing by n - 1) of the n scores.
    (Dividing by n instead changes it by a factor n / (n - 1), which the tests allow.)
    """
    # Shape of scores: (n,), one dot product per pair
    scores = (q * k).sum(dim=-1)
    if scaled:
        scores = scores / math.sqrt(q.shape[-1])
    return float(scores.var())


def fit_power_law(x, y):
    """Fit y = coefficient * x ** exponent by least squares on log-log axes.

    Shape of x, y: (m,) positive numbers (lists, NumPy arrays or tensors), m >= 2.
    log y = exponent * log x + log coefficient is a straight line; its slope is the exponent and
    exp(intercept) the coefficient. Returns (exponent, coefficient) as Python floats.
    """
    log_x = np.log(np.asarray(x, dtype=np.float64))
    log_y = np.log(np.asarray(y, dtype=np.float64))
    slope, intercept = np.polyfit(log_x, log_y, 1)
    return float(slope), float(np.exp(intercept))


def softmax_jacobian(z):
    """The Jacobian of s = softmax(z) (over the last axis) with respect to z.

    Shape of z: (..., n). Returns shape (..., n, n) with J[..., i, j] = d s_i / d z_j
    = s_i (delta_ij - s_j), that is diag(s) - s s^T. J is symmetric, and every row and column
    sums to zero (adding a constant to all logits does not change the softmax).
    """
    s = torch.softmax(z, dim=-1)
    return torch.diag_embed(s) - s.unsqueeze(-1) * s.unsqueeze(-2)


def dot_product_variance(d_k, variance_q=1.0, variance_k=1.0):
    """Var(q . k) for independent zero-mean entries: d_k products, each of variance
    Var(q_i) Var(k_i), added up. Notebook 06's think-first question: 256 * 2 * 2 = 1024."""
    return d_k * variance_q * variance_k
