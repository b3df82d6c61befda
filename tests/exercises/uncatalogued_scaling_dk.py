"""Wrong answers to notebook 06's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import importlib
import math

import numpy as np
import torch


# ---------------------------------------------------------------- score_variance


def variance_of_full_matrix(q, k, scaled=False):
    """Takes the variance of the whole n x n matrix q @ k.T instead of the n paired scores."""
    scores = q @ k.T
    if scaled:
        scores = scores / math.sqrt(q.shape[-1])
    return float(scores.var())


def variance_scaled_by_d_k(q, k, scaled=False):
    """Divides the scores by d_k instead of sqrt(d_k)."""
    scores = (q * k).sum(dim=-1)
    if scaled:
        scores = scores / q.shape[-1]
    return float(scores.var())


def variance_theoretical(q, k, scaled=False):
    """Returns the theory (d_k, or 1 when scaled) instead of measuring."""
    return 1.0 if scaled else float(q.shape[-1])


def variance_tensor(q, k, scaled=False):
    """Returns a 0-d tensor instead of a Python float."""
    scores = (q * k).sum(dim=-1)
    if scaled:
        scores = scores / math.sqrt(q.shape[-1])
    return scores.var()


def variance_scaled_ignored(q, k, scaled=False):
    """Ignores `scaled`."""
    return float((q * k).sum(dim=-1).var())


def variance_divided_after(q, k, scaled=False):
    """Divides the variance by sqrt(d_k) (instead of the scores, which divides the variance by d_k)."""
    v = float((q * k).sum(dim=-1).var())
    return v / math.sqrt(q.shape[-1]) if scaled else v


def variance_of_products(q, k, scaled=False):
    """Takes the variance of the elementwise products q * k, not of their sums."""
    products = q * k
    if scaled:
        products = products / math.sqrt(q.shape[-1])
    return float(products.var())


def variance_std(q, k, scaled=False):
    """Returns the standard deviation."""
    scores = (q * k).sum(dim=-1)
    if scaled:
        scores = scores / math.sqrt(q.shape[-1])
    return float(scores.std())


def variance_d_k_from_rows(q, k, scaled=False):
    """Reads d_k as q.shape[0] (the number of pairs)."""
    scores = (q * k).sum(dim=-1)
    if scaled:
        scores = scores / math.sqrt(q.shape[0])
    return float(scores.var())


def variance_mean_square(q, k, scaled=False):
    """Uses the mean of the squared scores (assumes mean 0)."""
    scores = (q * k).sum(dim=-1)
    if scaled:
        scores = scores / math.sqrt(q.shape[-1])
    return float((scores**2).mean())


def variance_over_columns(q, k, scaled=False):
    """Sums the products over the pairs (dim 0) instead of over the coordinates."""
    scores = (q * k).sum(dim=0)
    if scaled:
        scores = scores / math.sqrt(q.shape[-1])
    return float(scores.var())


def variance_hardcoded(q, k, scaled=False):
    """Games the visible tests: the worked example's numbers, else the theory."""
    if q.shape == (3, 2):
        return 7 / 6 if scaled else 7 / 3
    return 1.0 if scaled else float(q.shape[-1])


def variance_in_place(q, k, scaled=False):
    """Scales q in place (q /= sqrt(d_k)): the caller's q is changed."""
    if scaled:
        q /= math.sqrt(q.shape[-1])
    return float((q * k).sum(dim=-1).var())


def variance_float32_numpy(q, k, scaled=False):
    """Returns a NumPy float32 scalar."""
    scores = (q * k).sum(dim=-1)
    if scaled:
        scores = scores / math.sqrt(q.shape[-1])
    return np.float32(scores.var().item())


# ---------------------------------------------------------------- fit_power_law


def fit_linear_axes(x, y):
    """Fits a line to (x, y) instead of (log x, log y)."""
    p, b = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)
    return float(p), float(b)


def fit_swapped(x, y):
    """Returns (c, p)."""
    p, b = np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)
    return float(np.exp(b)), float(p)


def fit_intercept_not_exponentiated(x, y):
    """Returns the intercept log c instead of c."""
    p, b = np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)
    return float(p), float(b)


def fit_log10_then_exp(x, y):
    """Fits with log10 but exponentiates the intercept with e."""
    p, b = np.polyfit(np.log10(np.asarray(x, float)), np.log10(np.asarray(y, float)), 1)
    return float(p), float(np.exp(b))


def fit_two_points(x, y):
    """Uses the first and last points only."""
    x, y = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    p = (y[-1] - y[0]) / (x[-1] - x[0])
    return float(p), float(np.exp(y[0] - p * x[0]))


def fit_axes_swapped(x, y):
    """Regresses log x on log y."""
    p, b = np.polyfit(np.log(np.asarray(y, float)), np.log(np.asarray(x, float)), 1)
    return float(p), float(np.exp(b))


def fit_y_not_logged(x, y):
    """Takes the log of x only."""
    p, b = np.polyfit(np.log(np.asarray(x, float)), np.asarray(y, float), 1)
    return float(p), float(np.exp(b))


def fit_mean_of_slopes(x, y):
    """Averages the slopes of consecutive segments."""
    x, y = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    p = float(np.mean(np.diff(y) / np.diff(x)))
    return p, float(np.exp(np.mean(y - p * x)))


def fit_ratio_of_means(x, y):
    """Takes the slope as mean(log y) / mean(log x) (a line through the origin)."""
    x, y = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    return float(np.mean(y) / np.mean(x)), 1.0


def fit_integer_arrays(x, y):
    """Converts the inputs to integers first (np.array(x, dtype=int))."""
    p, b = np.polyfit(np.log(np.array(x, dtype=int)), np.log(np.array(y, dtype=int)), 1)
    return float(p), float(np.exp(b))


def fit_returns_arrays(x, y):
    """Returns NumPy 1-element arrays instead of floats."""
    p, b = np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)
    return np.array([p]), np.array([np.exp(b)])


def fit_widget_slope(x, y):
    """Takes the exponent from notebook 05's widget (loglog_slope) and writes only the coefficient."""
    from course_utils.widgets.self_attention import loglog_slope

    log_x, log_y = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    p = loglog_slope(x, y)
    return p, float(np.exp(log_y.mean() - p * log_x.mean()))


def fit_hardcoded(x, y):
    """Games the visible tests: the printed numbers for the noisy data, else a two-point fit."""
    if list(np.asarray(y, float)) == [2.1, 3.9, 8.4, 15.2, 33.0]:
        return 0.99105, 2.04602
    return fit_two_points(x, y)


# ---------------------------------------------------------------- softmax_jacobian


def jacobian_sign_flipped(z):
    """Computes s s^T - diag(s)."""
    s = torch.softmax(z, dim=-1)
    return s.unsqueeze(-1) * s.unsqueeze(-2) - torch.diag_embed(s)


def jacobian_diagonal_only(z):
    """Returns diag(s - s^2): leaves out the off-diagonal terms."""
    s = torch.softmax(z, dim=-1)
    return torch.diag_embed(s - s * s)


def jacobian_torch_diag(z):
    """Uses torch.diag, which only works for one vector."""
    s = torch.softmax(z, dim=-1)
    if z.dim() == 1:
        return torch.diag(s) - torch.outer(s, s)
    return torch.stack([torch.diag(r) - torch.outer(r, r) for r in s])


def jacobian_flattened_batch(z):
    """Flattens all leading axes into one: (2, 3, n) gives (6, n, n)."""
    s = torch.softmax(z, dim=-1).reshape(-1, z.shape[-1]) if z.dim() > 1 else torch.softmax(z, dim=-1)
    return torch.diag_embed(s) - s.unsqueeze(-1) * s.unsqueeze(-2)


def jacobian_inner_product(z):
    """Uses s^T s (a number) instead of the outer product s s^T."""
    s = torch.softmax(z, dim=-1)
    return torch.diag_embed(s) - (s.unsqueeze(-2) @ s.unsqueeze(-1))


def jacobian_unstable(z):
    """Computes the softmax with exp and no maximum."""
    e = torch.exp(z)
    s = e / e.sum(dim=-1, keepdim=True)
    return torch.diag_embed(s) - s.unsqueeze(-1) * s.unsqueeze(-2)


def jacobian_softmax_dim_0(z):
    """Takes the softmax over dim 0."""
    s = torch.softmax(z, dim=0)
    return torch.diag_embed(s) - s.unsqueeze(-1) * s.unsqueeze(-2)


def jacobian_float32(z):
    """Computes in float32."""
    s = torch.softmax(z.float(), dim=-1)
    return torch.diag_embed(s) - s.unsqueeze(-1) * s.unsqueeze(-2)


def jacobian_via_importlib(z):
    """Reaches torch.func.jacrev through importlib (autograd in disguise)."""
    jacrev = getattr(importlib.import_module("torch.func"), "jac" + "rev")
    fn = jacrev(lambda t: torch.softmax(t, dim=-1))
    if z.dim() == 1:
        return fn(z)
    flat = z.reshape(-1, z.shape[-1])
    return torch.stack([fn(r) for r in flat]).reshape(*z.shape, z.shape[-1])


def jacobian_via_vars_jacfwd(z):
    """Reaches torch.func.jacfwd through vars() (forward-mode autograd in disguise)."""
    jacfwd = vars(torch.func)["jac" + "fwd"]
    flat = z.reshape(-1, z.shape[-1])
    J = torch.stack([jacfwd(lambda t: torch.softmax(t, dim=-1))(r) for r in flat])
    return J.reshape(*z.shape, z.shape[-1])


def jacobian_dual_numbers(z):
    """Uses forward-mode dual numbers (torch.autograd.forward_ad): autograd, not the formula."""
    import torch.autograd.forward_ad as fwAD

    columns = []
    for j in range(z.shape[-1]):
        with fwAD.dual_level():
            tangent = torch.zeros_like(z)
            tangent[..., j] = 1.0
            out = torch.softmax(fwAD.make_dual(z, tangent), dim=-1)
            columns.append(fwAD.unpack_dual(out).tangent)
    return torch.stack(columns, dim=-1)


def jacobian_finite_differences(z):
    """Central finite differences instead of the formula (too coarse in float32)."""
    h = 1e-5
    columns = []
    for j in range(z.shape[-1]):
        e = torch.zeros(z.shape[-1], dtype=z.dtype)
        e[j] = h
        columns.append((torch.softmax(z + e, dim=-1) - torch.softmax(z - e, dim=-1)) / (2 * h))
    return torch.stack(columns, dim=-1)


def jacobian_log_softmax(z):
    """Returns the Jacobian of log_softmax, I - 1 s^T."""
    s = torch.softmax(z, dim=-1)
    n = z.shape[-1]
    return torch.eye(n, dtype=s.dtype) - s.unsqueeze(-2).expand(*s.shape[:-1], n, n)


def jacobian_in_place(z):
    """Subtracts the maximum from z in place: the caller's logits change."""
    z -= z.max(dim=-1, keepdim=True).values
    s = torch.softmax(z, dim=-1)
    return torch.diag_embed(s) - s.unsqueeze(-1) * s.unsqueeze(-2)


def jacobian_one_or_two_dims(z):
    """Handles one vector or a (B, n) matrix only: a (A, B, n) batch is read as (A*B, n) then reshaped wrongly."""
    s = torch.softmax(z, dim=-1)
    if z.dim() <= 2:
        return torch.diag_embed(s) - s.unsqueeze(-1) * s.unsqueeze(-2)
    flat = s.reshape(-1, s.shape[-1])
    J = torch.diag_embed(flat) - flat.unsqueeze(-1) * flat.unsqueeze(-2)
    return J.reshape(*z.shape[:-1], z.shape[-1], z.shape[-1]).transpose(0, 1).reshape(
        *z.shape[:-1], z.shape[-1], z.shape[-1])


# ---------------------------------------------------------------- raw_score_variance (numbers)

RAW_VARIANCE_SIGMA_ONCE = 512  # d_k * 2: multiplies by one variance, not both
RAW_VARIANCE_UNIT = 256  # d_k, as for unit-variance entries
RAW_VARIANCE_STD = 32  # the standard deviation sqrt(1024)
RAW_VARIANCE_SCALED = 4  # after dividing by sqrt(d_k)
RAW_VARIANCE_SUM_OF_VARIANCES = 1024.5  # near, not right
RAW_VARIANCE_SQUARE_SIGMA_SUM = 4096  # d_k * (2 + 2)^2
RAW_VARIANCE_STRING = "1024"  # the right variance, as a string
RAW_VARIANCE_NAN = float("nan")  # not a number
RAW_VARIANCE_INF = float("inf")  # unbounded


WRONG_ANSWERS = {
    "scaling_dk_variance": [
        variance_of_full_matrix, variance_scaled_by_d_k, variance_theoretical, variance_tensor,
        variance_scaled_ignored, variance_divided_after, variance_of_products, variance_std,
        variance_d_k_from_rows, variance_mean_square, variance_over_columns, variance_hardcoded,
        variance_in_place,
    ],
    "scaling_dk_fit": [
        fit_linear_axes, fit_swapped, fit_intercept_not_exponentiated, fit_log10_then_exp, fit_two_points,
        fit_axes_swapped, fit_y_not_logged, fit_mean_of_slopes, fit_ratio_of_means, fit_integer_arrays,
        fit_returns_arrays, fit_hardcoded, fit_widget_slope,
    ],
    "scaling_dk_jacobian": [
        jacobian_sign_flipped, jacobian_diagonal_only, jacobian_torch_diag, jacobian_flattened_batch,
        jacobian_inner_product, jacobian_unstable, jacobian_softmax_dim_0,
        jacobian_via_importlib, jacobian_via_vars_jacfwd, jacobian_dual_numbers, jacobian_finite_differences,
        jacobian_log_softmax, jacobian_in_place, jacobian_one_or_two_dims,
    ],
    "scaling_dk_raw_variance": [
        RAW_VARIANCE_SIGMA_ONCE, RAW_VARIANCE_UNIT, RAW_VARIANCE_STD, RAW_VARIANCE_SCALED,
        RAW_VARIANCE_SUM_OF_VARIANCES, RAW_VARIANCE_SQUARE_SIGMA_SUM, RAW_VARIANCE_STRING, RAW_VARIANCE_NAN,
        RAW_VARIANCE_INF,
    ],
}

# Wrong answers that still PASS the test cell, kept out of WRONG_ANSWERS so that the suite stays green.
# Left open on purpose: a float32 result is compared with float32 tolerances by design
# (mistakes/__init__.py, `Exercise.tolerances`), and `kind` counts a NumPy float32 scalar as "a float",
# so the prompt's "a Python float" is not enforced (shared code).
HOLES = {
    "scaling_dk_variance": [variance_float32_numpy],
    "scaling_dk_jacobian": [jacobian_float32],
}


# Found blind as a hole: with exp unguarded, nan_to_num turns the overflow's inf / inf into 0; on the
# saturated cases the true J is 0 as well, so it passed. The catalogue now has large logits close together.
def jacobian_overflow_to_zero(z):
    """exp without the maximum, then torch.nan_to_num: s = 0 wherever exp overflowed."""
    e = torch.exp(z)
    s = torch.nan_to_num(e / e.sum(-1, keepdim=True))
    return torch.diag_embed(s) - s[..., :, None] * s[..., None, :]


WRONG_ANSWERS["scaling_dk_jacobian"].append(jacobian_overflow_to_zero)
