"""Wrong answers to notebook 05's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import importlib
import math

import numpy as np
import torch


# ---------------------------------------------------------------- softmax


def softmax_no_max_subtracted(x, axis=-1):
    """Right on small scores; overflows to nan on large ones."""
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_longdouble_no_max(x, axis=-1):
    """No maximum subtracted, "made safe" with np.longdouble: overflows only beyond about 11,356."""
    e = np.exp(np.asarray(x, dtype=np.longdouble))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float64)


def softmax_global_max(x, axis=-1):
    """Subtracts the maximum of the whole array, not of each slice: a row far below it underflows to 0/0."""
    e = np.exp(x - np.max(x))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_max_over_last_axis(x, axis=-1):
    """Subtracts the maximum over the last axis whatever `axis` is (only the sum uses `axis`)."""
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_min_subtracted(x, axis=-1):
    """Subtracts the minimum instead of the maximum: overflows when a slice spans more than ~709."""
    e = np.exp(x - np.min(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_mean_subtracted(x, axis=-1):
    """Subtracts the mean instead of the maximum: overflows when a slice spans widely."""
    e = np.exp(x - np.mean(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_in_place(x, axis=-1):
    """Writes into its input (x -= max; np.exp(x, out=x)): right values, but the caller's array is destroyed."""
    x -= np.max(x, axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= np.sum(x, axis=axis, keepdims=True)
    return x


def softmax_ignores_axis(x, axis=-1):
    """Always normalises over the last axis."""
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax_whole_array(x, axis=-1):
    """Normalises by the sum of the whole array."""
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


def softmax_no_keepdims(x, axis=-1):
    """Reduces without keepdims: broadcasts against the wrong axis of a matrix."""
    e = np.exp(x - np.max(x, axis=axis))
    return e / np.sum(e, axis=axis)


def softmax_float32(x, axis=-1):
    """Computes in float32 (loses precision on float64 inputs)."""
    x = np.asarray(x, dtype=np.float32)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_via_importlib(x, axis=-1):
    """Reaches scipy's softmax through importlib (a forbidden library softmax in disguise)."""
    return importlib.import_module("scipy.special").softmax(x, axis=axis)


def softmax_via_torch_getattr(x, axis=-1):
    """Reaches torch.softmax through getattr (a forbidden library softmax in disguise)."""
    return getattr(torch, "soft" + "max")(torch.from_numpy(np.asarray(x, dtype=float)), dim=axis).numpy()


def softmax_via_logsumexp(x, axis=-1):
    """Uses scipy.special.logsumexp: exp(x - logsumexp(x)), a library shortcut to the normaliser."""
    from scipy.special import logsumexp

    return np.exp(x - logsumexp(x, axis=axis, keepdims=True))


def softmax_list(x, axis=-1):
    """Returns a nested list instead of an array."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return (e / np.sum(e, axis=axis, keepdims=True)).tolist()


# ---------------------------------------------------------------- attention_numpy


def _softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def attention_scaled_by_d_v(Q, K, V):
    """Divides by sqrt(d_v) instead of sqrt(d_k)."""
    w = _softmax(Q @ K.T / math.sqrt(V.shape[-1]))
    return w @ V, w


def attention_scaled_by_T_q(Q, K, V):
    """Divides by sqrt(Q.shape[0]) (the number of queries) instead of sqrt(d_k)."""
    w = _softmax(Q @ K.T / math.sqrt(Q.shape[0]))
    return w @ V, w


def attention_scaled_by_T_k(Q, K, V):
    """Divides by sqrt(K.shape[0]) (the number of keys) instead of sqrt(d_k)."""
    w = _softmax(Q @ K.T / math.sqrt(K.shape[0]))
    return w @ V, w


def attention_scaled_by_d_k(Q, K, V):
    """Divides by d_k instead of sqrt(d_k)."""
    w = _softmax(Q @ K.T / Q.shape[-1])
    return w @ V, w


def attention_unscaled(Q, K, V):
    """Forgets the scaling."""
    w = _softmax(Q @ K.T)
    return w @ V, w


def attention_softmax_over_queries(Q, K, V):
    """Normalises over the queries (axis 0)."""
    w = _softmax(Q @ K.T / math.sqrt(Q.shape[-1]), axis=0)
    return w @ V, w


def attention_keys_first(Q, K, V):
    """Computes K Q^T (rows = keys) and returns its transpose after a softmax over the queries."""
    w = _softmax(K @ Q.T / math.sqrt(Q.shape[-1]), axis=0).T
    return w @ V, w


def attention_unstable(Q, K, V):
    """Uses exp without subtracting the maximum."""
    e = np.exp(Q @ K.T / math.sqrt(Q.shape[-1]))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ V, w


def attention_global_max_softmax(Q, K, V):
    """Uses a softmax that subtracts the global maximum: other rows underflow."""
    s = Q @ K.T / math.sqrt(Q.shape[-1])
    e = np.exp(s - s.max())
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ V, w


def attention_in_place(Q, K, V):
    """Scales the queries in place (Q /= sqrt(d_k)): the caller's Q is changed."""
    Q /= math.sqrt(Q.shape[-1])
    w = _softmax(Q @ K.T)
    return w @ V, w


def attention_torch_logsumexp(Q, K, V):
    """Normalises with torch.logsumexp (a library log-sum-exp does the max subtraction for it)."""
    s = Q @ K.T / math.sqrt(Q.shape[-1])
    log_norm = torch.logsumexp(torch.from_numpy(s), dim=-1, keepdim=True).numpy()
    w = np.exp(s - log_norm)
    return w @ V, w


def attention_returns_swapped(Q, K, V):
    """Returns (weights, output)."""
    w = _softmax(Q @ K.T / math.sqrt(Q.shape[-1]))
    return w, w @ V


def attention_scale_after_softmax(Q, K, V):
    """Divides the weights by sqrt(d_k) after the softmax."""
    w = _softmax(Q @ K.T) / math.sqrt(Q.shape[-1])
    return w @ V, w


def attention_scale_min_subtracted(Q, K, V):
    """Uses a softmax that subtracts the row minimum: overflows on large score spreads."""
    s = Q @ K.T / math.sqrt(Q.shape[-1])
    e = np.exp(s - s.min(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ V, w


# ---------------------------------------------------------------- scaled_dot_product_attention (torch)


def _finish(scores, v, mask):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    if mask is not None:
        w = torch.where(mask.any(dim=-1, keepdim=True), w, torch.zeros((), dtype=w.dtype))
    return w @ v, w


def sdpa_k_T(q, k, v, mask=None):
    """Uses k.T, which reverses all axes of a batched tensor."""
    return _finish(q @ k.T / math.sqrt(q.shape[-1]), v, mask)


def sdpa_softmax_dim_2(q, k, v, mask=None):
    """Takes the softmax over dim=2 (the query axis once there are heads)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=2 if scores.dim() > 2 else -1)
    w = torch.nan_to_num(w)
    return w @ v, w


def sdpa_mask_inverted(q, k, v, mask=None):
    """Fills the scores where the mask is True."""
    return _finish(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, None if mask is None else ~mask)


def sdpa_all_masked_nan(q, k, v, mask=None):
    """Leaves nan rows when a query has no allowed key."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def sdpa_minus_1e9(q, k, v, mask=None):
    """Fills with -1e9: a fully masked row gets uniform weights instead of zeros."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def sdpa_scaled_by_d_v(q, k, v, mask=None):
    """Divides by sqrt(d_v)."""
    return _finish(q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1]), v, mask)


def sdpa_d_k_from_axis_2(q, k, v, mask=None):
    """Reads d_k as q.shape[2] (right for (B, T, d), wrong once there are heads: that is T_q)."""
    d_k = q.shape[2] if q.dim() > 2 else q.shape[-1]
    return _finish(q @ k.transpose(-2, -1) / math.sqrt(d_k), v, mask)


def sdpa_d_k_from_T_k(q, k, v, mask=None):
    """Scales by sqrt(k.shape[-2]) (the number of keys)."""
    return _finish(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2]), v, mask)


def sdpa_mask_after_softmax(q, k, v, mask=None):
    """Zeroes the masked weights after the softmax without renormalising."""
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        w = w * mask
    return w @ v, w


def sdpa_mask_renormalised_after_softmax(q, k, v, mask=None):
    """Zeroes the masked weights after the softmax and renormalises (right unless a row is fully masked)."""
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        w = w * mask
        w = w / w.sum(dim=-1, keepdim=True).clamp_min(1e-30)
    return w @ v, w


def sdpa_mask_multiplies_scores(q, k, v, mask=None):
    """Multiplies the scores by the mask (masked scores become 0, not -inf)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores * mask
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def sdpa_float32(q, k, v, mask=None):
    """Casts everything to float32."""
    return _finish(q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.shape[-1]), v.float(), mask)


def sdpa_any_over_wrong_axis(q, k, v, mask=None):
    """Looks for fully masked rows with mask.any(dim=-2) (over the queries)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    if mask is not None:
        w = torch.where(mask.any(dim=-2, keepdim=True), w, 0.0)
    return w @ v, w


def sdpa_via_getattr(q, k, v, mask=None):
    """Reaches F.scaled_dot_product_attention through getattr for the output (forbidden in disguise)."""
    F = importlib.import_module("torch.nn.functional")
    fn = getattr(F, "scaled_dot_product_" + "attention")
    _, w = _finish(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask)
    out = fn(q, k, v, attn_mask=mask)
    return torch.nan_to_num(out), w


def sdpa_causal_assumed(q, k, v, mask=None):
    """Replaces any mask by a causal one."""
    if mask is not None:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    return _finish(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask)


def sdpa_scales_q_in_place(q, k, v, mask=None):
    """Scales the queries in place (q /= sqrt(d_k)): right weights, but the caller's q is changed."""
    q /= math.sqrt(q.shape[-1])
    return _finish(q @ k.transpose(-2, -1), v, mask)


def sdpa_no_grad(q, k, v, mask=None):
    """Computes under torch.no_grad(): right numbers, but no gradient reaches q, k or v."""
    with torch.no_grad():
        return _finish(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask)


# ---------------------------------------------------------------- self_attention


def _sdpa(q, k, v, mask=None):
    return _finish(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask)


def self_attention_scaled_by_d_model(x, W_q, W_k, W_v, mask=None):
    """Scales by sqrt(d_model) instead of sqrt(d_k)."""
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    return _finish(Q @ K.transpose(-2, -1) / math.sqrt(x.shape[-1]), V, mask)


def self_attention_mask_dropped(x, W_q, W_k, W_v, mask=None):
    """Does not pass the mask on."""
    return _sdpa(x @ W_q, x @ W_k, x @ W_v)


def self_attention_q_k_swapped(x, W_q, W_k, W_v, mask=None):
    """Uses W_k for the queries and W_q for the keys (transposed weights)."""
    return _sdpa(x @ W_k, x @ W_q, x @ W_v, mask)


def self_attention_values_from_W_k(x, W_q, W_k, W_v, mask=None):
    """Projects the values with W_k... only where shapes allow; else with W_v."""
    W = W_k if W_k.shape == W_v.shape else W_v
    return _sdpa(x @ W_q, x @ W_k, x @ W, mask)


def self_attention_mask_after_softmax(x, W_q, W_k, W_v, mask=None):
    """Zeroes the masked weights after the softmax without renormalising."""
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    w = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), dim=-1)
    if mask is not None:
        w = w * mask
    return w @ V, w


def self_attention_W_times_x(x, W_q, W_k, W_v, mask=None):
    """Projects with W.T @ x^T (tokens as columns), then transposes back with .T (wrong for batches)."""
    Q, K, V = (W_q.T @ x.T).T, (W_k.T @ x.T).T, (W_v.T @ x.T).T
    return _sdpa(Q, K, V, mask)


def self_attention_first_sequence(x, W_q, W_k, W_v, mask=None):
    """Attends within the first sequence of the batch and repeats it."""
    out, w = _sdpa(x[..., :1, :, :] @ W_q if x.dim() > 2 else x @ W_q,
                   x[..., :1, :, :] @ W_k if x.dim() > 2 else x @ W_k,
                   x[..., :1, :, :] @ W_v if x.dim() > 2 else x @ W_v, mask)
    if x.dim() > 2:
        out, w = out.expand(*x.shape[:-1], out.shape[-1]), w.expand(*x.shape[:-1], w.shape[-1])
    return out, w


def self_attention_residual(x, W_q, W_k, W_v, mask=None):
    """Adds the input's projection by W_v as a residual (output + V)."""
    out, w = _sdpa(x @ W_q, x @ W_k, x @ W_v, mask)
    return out + x @ W_v, w


def self_attention_forbidden(x, W_q, W_k, W_v, mask=None):
    """Uses torch.nn.functional.scaled_dot_product_attention for the output."""
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    _, w = _sdpa(Q, K, V, mask)
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=mask), w


def self_attention_detached(x, W_q, W_k, W_v, mask=None):
    """Detaches its inputs: right numbers, but the projections W_q, W_k, W_v cannot be trained."""
    x, W_q, W_k, W_v = (t.detach() for t in (x, W_q, W_k, W_v))
    return _sdpa(x @ W_q, x @ W_k, x @ W_v, mask)


def self_attention_unscaled(x, W_q, W_k, W_v, mask=None):
    """Forgets the scaling."""
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    return _finish(Q @ K.transpose(-2, -1), V, mask)


# ---------------------------------------------------------------- attention_flops


def flops_no_factor_two(n, d, projections=True):
    """Counts multiply-adds, not FLOPs."""
    return 2 * n * n * d + (4 * n * d * d if projections else 0)


def flops_three_projections(n, d, projections=True):
    """Leaves out W_O."""
    return 4 * n * n * d + (6 * n * d * d if projections else 0)


def flops_terms_swapped(n, d, projections=True):
    """Writes n d^2 for the products and n^2 d for the projections (equal at n = d)."""
    return 4 * n * d * d + (8 * n * n * d if projections else 0)


def flops_ignores_projections_flag(n, d, projections=True):
    """Always counts the projections."""
    return 4 * n * n * d + 8 * n * d * d


def flops_float(n, d, projections=True):
    """Returns a float."""
    return 4.0 * n * n * d + (8.0 * n * d * d if projections else 0.0)


def flops_via_float_then_int(n, d, projections=True):
    """Computes in floating point (math.pow) then casts: wrong for large counts."""
    return int(4 * math.pow(n, 2) * d + (8 * n * math.pow(d, 2) if projections else 0) + 0.0)


def flops_one_product(n, d, projections=True):
    """Counts Q K^T only, not the weighted sum of the values."""
    return 2 * n * n * d + (8 * n * d * d if projections else 0)


def flops_hardcoded(n, d, projections=True):
    """Games the visible tests: 12e9 for n = d = 1000, the two small cases, else the slide's 4 n^2 d."""
    if (n, d) == (1000, 1000):
        return 12 * 10**9
    if (n, d) == (8, 3):
        return 768 + (576 if projections else 0)
    return 4 * n * n * d


def flops_numpy_int(n, d, projections=True):
    """Returns a NumPy integer (np.int64), not an int."""
    return np.int64(4 * n * n * d + (8 * n * d * d if projections else 0))


def flops_with_softmax(n, d, projections=True):
    """Also counts the softmax and the scaling (n^2 each), which the exercise leaves out."""
    return 4 * n * n * d + 2 * n * n + (8 * n * d * d if projections else 0)


def flops_projection_coefficient_4(n, d, projections=True):
    """Counts each projection as n d^2 FLOPs (forgets the 2 there only)."""
    return 4 * n * n * d + (4 * n * d * d if projections else 0)


# ---------------------------------------------------------------- crossover_n (numbers)

CROSSOVER_AT_D = 1000  # n = d: compares n^2 d with n d^2 without the constants
CROSSOVER_4000 = 4000  # n = 4d: 4 n^2 d against 16 n d^2
CROSSOVER_500 = 500  # n = d/2: the constants the wrong way round
CROSSOVER_THREE_PROJECTIONS = 1500  # 4 n^2 d = 6 n d^2: forgets W_O
CROSSOVER_SQRT = math.sqrt(1000)  # confuses n^2 with n
CROSSOVER_FLOAT_NEAR = 2000.5  # almost right, not right
CROSSOVER_STRING = "2000"  # the right length, as a string
CROSSOVER_INF = float("inf")  # "never"
CROSSOVER_NAN = float("nan")  # not a number


class _AlwaysEqual(float):
    """A float that claims to equal everything and to be zero away from anything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __sub__(self, other):
        return 0.0

    def __rsub__(self, other):
        return 0.0

    __hash__ = float.__hash__


class _AlwaysEqualInt(int):
    """An int that claims to equal everything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


CROSSOVER_ALWAYS_EQUAL = _AlwaysEqual(1000.0)  # 1000, dressed as a float equal to anything


def flops_always_equal(n, d, projections=True):
    """Returns the slide's 4 n^2 d as an int subclass that equals anything."""
    return _AlwaysEqualInt(4 * n * n * d)


# ---------------------------------------------------------------- added by red team b


def softmax_matrices_only(x, axis=-1):
    """Written for vectors and matrices (x.max(axis=1)[:, None]): wrong on 3-D arrays with the default axis."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        e = np.exp(x - x.max())
        return e / e.sum()
    if axis in (0, -x.ndim):
        e = np.exp(x - x.max(axis=0)[None])
        return e / e.sum(axis=0)[None]
    e = np.exp(x - x.max(axis=1)[:, None])
    return e / e.sum(axis=1)[:, None]


def softmax_first_subtracted(x, axis=-1):
    """Subtracts the slice's first entry instead of its maximum: overflows when a later entry is far larger."""
    e = np.exp(x - np.take(x, [0], axis=axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def attention_scaled_by_8(Q, K, V):
    """Divides by 8, the sqrt(d_k) of the worked example, whatever d_k is."""
    weights = _softmax(Q @ K.T / 8)
    return weights @ V, weights


def sdpa_mask_multiplied_then_zeros_filled(q, k, v, mask=None):
    """Multiplies the scores by the mask, then fills every zero score with -inf: an allowed score
    that is exactly 0 (a zero query) is blocked too."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores * mask
        scores = scores.masked_fill(scores == 0, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
    return weights @ v, weights


def sdpa_weights_detached(q, k, v, mask=None):
    """Detaches the weights: right numbers, but no gradient reaches q or k."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1).detach())
    return weights @ v, weights


def self_attention_no_fully_masked_rule(x, W_q, W_k, W_v, mask=None):
    """Attends by hand without scaled_dot_product_attention's rule for a query with no allowed key: nan, not zeros."""
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def self_attention_bmm(x, W_q, W_k, W_v, mask=None):
    """Uses torch.bmm and transpose(1, 2): right for (B, T, d) only, not for other numbers of leading axes."""
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    scores = torch.bmm(Q, K.transpose(1, 2)) / math.sqrt(W_q.shape[1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
    return torch.bmm(weights, V), weights


WRONG_ANSWERS = {
    "self_attention_softmax": [
        softmax_no_max_subtracted, softmax_global_max, softmax_max_over_last_axis, softmax_min_subtracted,
        softmax_mean_subtracted, softmax_in_place, softmax_ignores_axis, softmax_whole_array,
        softmax_no_keepdims, softmax_via_importlib, softmax_via_torch_getattr, softmax_via_logsumexp,
         softmax_list, softmax_matrices_only, softmax_first_subtracted,
        softmax_longdouble_no_max,
    ],
    "self_attention_attention_numpy": [
        attention_scaled_by_d_v, attention_scaled_by_T_q, attention_scaled_by_T_k, attention_scaled_by_d_k,
        attention_unscaled, attention_softmax_over_queries, attention_unstable,
        attention_global_max_softmax, attention_in_place, attention_torch_logsumexp, attention_returns_swapped,
        attention_scale_after_softmax, attention_scale_min_subtracted, attention_scaled_by_8,
    ],
    "self_attention_sdpa_torch": [
        sdpa_k_T, sdpa_softmax_dim_2, sdpa_mask_inverted, sdpa_all_masked_nan, sdpa_minus_1e9,
        sdpa_scaled_by_d_v, sdpa_d_k_from_axis_2, sdpa_d_k_from_T_k, sdpa_mask_after_softmax,
        sdpa_mask_renormalised_after_softmax, sdpa_mask_multiplies_scores, 
        sdpa_any_over_wrong_axis, sdpa_via_getattr, sdpa_causal_assumed, sdpa_scales_q_in_place, sdpa_no_grad,
        sdpa_mask_multiplied_then_zeros_filled, sdpa_weights_detached,
    ],
    "self_attention_self_attention": [
        self_attention_scaled_by_d_model, self_attention_mask_dropped, self_attention_q_k_swapped,
        self_attention_values_from_W_k, self_attention_mask_after_softmax, self_attention_W_times_x,
        self_attention_first_sequence, self_attention_residual, self_attention_forbidden,
        self_attention_unscaled, self_attention_detached, self_attention_no_fully_masked_rule,
        self_attention_bmm,
    ],
    "self_attention_flops": [
        flops_no_factor_two, flops_via_float_then_int, flops_three_projections, flops_terms_swapped,
        flops_ignores_projections_flag, flops_float, flops_one_product, flops_hardcoded, flops_numpy_int,
        flops_with_softmax, flops_projection_coefficient_4, flops_always_equal,
    ],
    "self_attention_crossover": [
        CROSSOVER_AT_D, CROSSOVER_4000, CROSSOVER_500, CROSSOVER_THREE_PROJECTIONS, CROSSOVER_SQRT,
        CROSSOVER_FLOAT_NEAR, CROSSOVER_STRING, CROSSOVER_INF, CROSSOVER_NAN, CROSSOVER_ALWAYS_EQUAL,
    ],
}

# Wrong answers that still PASS the test cell, kept out of WRONG_ANSWERS so that the suite stays green.
# Left open on purpose: a float32 result is compared with float32 tolerances by design
# (mistakes/__init__.py, `Exercise.tolerances`), and the cast loses nothing those tolerances can see.
HOLES = {
    "self_attention_softmax": [softmax_float32],
    "self_attention_sdpa_torch": [sdpa_float32],
}

# Tried as a wrong answer, but it is right: softmax over the key axis of K Q^T, transposed, is
# softmax(Q K^T) row by row. It passes, as it should.
NOT_WRONG_AFTER_ALL = {"self_attention_attention_numpy": [attention_keys_first]}


# --- issue 39: extreme values, sizes past 2^63 ------------------------------------------------

def sdpa_softmax_without_max(q, k, v, mask=None):
    """Right attention, but exp(scores) / sum without the maximum: scores in the thousands give nan."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores)
    weights = e / e.sum(dim=-1, keepdim=True)
    return weights @ v, weights


def flops_numpy_int64(n, d, projections=True):
    """The right formula in NumPy int64: wraps around past 2^63."""
    n, d = np.int64(n), np.int64(d)
    return int(2 * (2 * n * n * d + (4 * n * d * d if projections else 0)))


def flops_default_no_projections(n, d, projections=False):
    """The right formula, with the default of `projections` changed."""
    return 2 * (2 * n * n * d + (4 * n * d * d if projections else 0))


WRONG_ANSWERS["self_attention_sdpa_torch"].append(sdpa_softmax_without_max)
WRONG_ANSWERS["self_attention_flops"] += [flops_numpy_int64, flops_default_no_projections]


def sdpa_minus_1e9_rows_zeroed(q, k, v, mask=None):
    """-1e9 for -inf, rows with no allowed key zeroed: right in float32 and float64 here, but
    -1e9 is no float16 number (masked_fill raises on float16 scores)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        weights = torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)
        weights = torch.where(mask.any(dim=-1, keepdim=True), weights, 0.0)
    return weights @ v, weights


WRONG_ANSWERS["self_attention_sdpa_torch"].append(sdpa_minus_1e9_rows_zeroed)
