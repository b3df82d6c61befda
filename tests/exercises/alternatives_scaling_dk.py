"""Second correct implementations of notebook 06's exercises, written differently from the
reference (course_utils/reference/scaling_dk.py): the exercise's tests must pass them too
(tests/exercises/test_mutations.py)."""
import math

import numpy as np
import torch


def score_variance_numpy(q, k, scaled=False):
    """einsum for the dot products, NumPy's variance dividing by n (not n - 1)."""
    scores = torch.einsum("nd,nd->n", q, k).double().numpy()
    if scaled:
        scores = scores / np.sqrt(q.shape[1])
    return float(np.var(scores))


def score_variance_by_hand(q, k, scaled=False):
    """Scale q and k by d_k^(-1/4) each (so their product is scaled by d_k^(-1/2)); variance as
    the mean squared deviation from the mean, divided by n - 1."""
    if scaled:
        factor = q.shape[-1] ** -0.25
        q, k = q * factor, k * factor
    scores = torch.stack([torch.dot(a, b) for a, b in zip(q, k)])
    deviation = scores - scores.mean()
    return (deviation**2).sum().item() / (len(scores) - 1)


def fit_power_law_normal_equations(x, y):
    """Least squares in closed form: slope = cov(log x, log y) / var(log x); log10 throughout."""
    u = np.log10(np.asarray(x, dtype=float))
    v = np.log10(np.asarray(y, dtype=float))
    slope = np.sum((u - u.mean()) * (v - v.mean())) / np.sum((u - u.mean()) ** 2)
    intercept = v.mean() - slope * u.mean()
    return slope, 10.0**intercept


def fit_power_law_lstsq(x, y):
    """np.linalg.lstsq on the design matrix [log x, 1], with torch tensors as input allowed."""
    x = torch.as_tensor(x, dtype=torch.float64)
    y = torch.as_tensor(y, dtype=torch.float64)
    design = torch.stack([torch.log(x), torch.ones_like(x)], dim=1).numpy()
    (slope, intercept), *_ = np.linalg.lstsq(design, torch.log(y).numpy(), rcond=None)
    return float(slope), float(math.exp(intercept))


def softmax_jacobian_eye(z):
    """J = s_i (delta_ij - s_j) written literally, with a hand-made stable softmax."""
    e = torch.exp(z - z.max(dim=-1, keepdim=True).values)
    s = e / e.sum(dim=-1, keepdim=True)
    eye = torch.eye(z.shape[-1], dtype=z.dtype)
    return s.unsqueeze(-1) * (eye - s.unsqueeze(-2))


def softmax_jacobian_loop(z):
    """One vector at a time over the flattened batch, diag(s) - outer(s, s)."""
    flat = z.reshape(-1, z.shape[-1])
    blocks = []
    for row in flat:
        s = torch.softmax(row, dim=0)
        blocks.append(torch.diag(s) - torch.outer(s, s))
    return torch.stack(blocks).reshape(*z.shape, z.shape[-1])


ALTERNATIVES = {
    # a variance computed with NumPy is a NumPy number
    "scaling_dk_raw_variance": [1024, 1024.0, 4 ** 5, 256 * 4, np.int64(256) * 2 * 2, np.float64(1024.0)],
    "scaling_dk_variance": [score_variance_numpy, score_variance_by_hand],
    "scaling_dk_fit": [fit_power_law_normal_equations, fit_power_law_lstsq],
    "scaling_dk_jacobian": [softmax_jacobian_eye, softmax_jacobian_loop],
}
