"""Wrong answers to notebook 13's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell.

`UNCATALOGUED` holds them all. test_uncatalogued.py reads `WRONG_ANSWERS` and requires each of
its grade ids to be in a solution notebook, so `WRONG_ANSWERS` is `UNCATALOGUED` once
solutions/13_llm_attention exists and empty before; until then
tests/reference/test_llm_attention_reference.py runs them through the catalogue in-process.
"""
import math
import pathlib

import torch

_NOTEBOOK = pathlib.Path(__file__).resolve().parents[2] / "solutions" / "13_llm_attention"


# ---------------------------------------------------------------- grouped_query_attention
def _attend(q, k, v, allowed=None, scale=None, fill=-math.inf):
    s = q @ k.transpose(-2, -1) / (scale or math.sqrt(q.shape[-1]))
    if allowed is not None:
        s = s.masked_fill(~allowed, fill)
    return torch.softmax(s, -1) @ v


def _expand(q, k, v):
    g = q.shape[1] // k.shape[1]
    return k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)


def gqa_first_kv_head_only(q, k, v, causal=True):
    """Every query head reads kv head 0."""
    T_q, T_k = q.shape[-2], k.shape[-2]
    allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q) if causal else None
    return _attend(q, k[:, :1], v[:, :1], allowed)


def gqa_averages_query_heads(q, k, v, causal=True):
    """Averages each group of query heads into one and copies the result back to the group."""
    g = q.shape[1] // k.shape[1]
    B, h, T_q, d = q.shape
    T_k = k.shape[-2]
    pooled = q.reshape(B, k.shape[1], g, T_q, d).mean(2)
    allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q) if causal else None
    return _attend(pooled, k, v, allowed).repeat_interleave(g, 1)


def gqa_mask_triu_blocked(q, k, v, causal=True):
    """Masks with triu(1) of a T_q x T_k matrix (PyTorch's 'True = blocked', aligned to the start)."""
    k, v = _expand(q, k, v)
    T_q, T_k = q.shape[-2], k.shape[-2]
    allowed = ~torch.ones(T_q, T_k, dtype=torch.bool).triu(1) if causal else None
    return _attend(q, k, v, allowed)


def gqa_mask_excludes_self(q, k, v, causal=True):
    """The causal mask off by one: a query does not see its own key."""
    k, v = _expand(q, k, v)
    T_q, T_k = q.shape[-2], k.shape[-2]
    allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q - 1) if causal else None
    return torch.nan_to_num(_attend(q, k, v, allowed))


def gqa_scale_by_d(q, k, v, causal=True):
    """Divides by d instead of sqrt(d)."""
    k, v = _expand(q, k, v)
    T_q, T_k = q.shape[-2], k.shape[-2]
    allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q) if causal else None
    return _attend(q, k, v, allowed, scale=q.shape[-1])


def gqa_causal_always(q, k, v, causal=True):
    """Applies the causal mask whatever `causal` says."""
    k, v = _expand(q, k, v)
    T_q, T_k = q.shape[-2], k.shape[-2]
    return _attend(q, k, v, torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q))


def gqa_expand_wrong_order(q, k, v, causal=True):
    """expand(B, g, h_kv, ...) then reshape: the groups come out in turn (head i -> i % h_kv) via a
    different route than repeat."""
    B, h, T_q, d = q.shape
    h_kv, T_k = k.shape[1], k.shape[2]
    g = h // h_kv
    k = k[:, None].expand(B, g, h_kv, T_k, d).reshape(B, h, T_k, d)
    v = v[:, None].expand(B, g, h_kv, T_k, d).reshape(B, h, T_k, d)
    allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q) if causal else None
    return _attend(q, k, v, allowed)


def gqa_float32(q, k, v, causal=True):
    """Computes in float32: fine by the course's policy, except that it also drops the mask."""
    k, v = _expand(q.float(), k.float(), v.float())
    return _attend(q.float(), k, v)


def gqa_returns_weights_too(q, k, v, causal=True):
    """Returns (output, weights) like the course's scaled_dot_product_attention."""
    k, v = _expand(q, k, v)
    T_q, T_k = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q), -math.inf)
    w = torch.softmax(s, -1)
    return w @ v, w


def gqa_mask_only_when_square(q, k, v, causal=True):
    """Masks only a prompt (T_q == T_k); several new queries after a cache see each other's future."""
    k, v = _expand(q, k, v)
    T_q, T_k = q.shape[-2], k.shape[-2]
    allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril() if causal and T_q == T_k else None
    return _attend(q, k, v, allowed)


# ---------------------------------------------------------------- sliding_window_mask
def swm_band_both_sides(T_q, T_k, window):
    """|pos - p| < window: a band around the query, the future included, aligned to the end."""
    pos = torch.arange(T_q)[:, None] + T_k - T_q
    return (pos - torch.arange(T_k)[None, :]).abs() < window


def swm_causal_only(T_q, T_k, window):
    """Forgets the window: the end-aligned causal mask."""
    return torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q)


def swm_window_only_last_row(T_q, T_k, window):
    """The last `window` keys for every query (right only for the last query)."""
    mask = torch.zeros(T_q, T_k, dtype=torch.bool)
    mask[:, -window:] = True
    return mask


def swm_int_mask(T_q, T_k, window):
    """Right positions, but an integer (0/1) tensor."""
    pos = torch.arange(T_q)[:, None] + T_k - T_q
    p = torch.arange(T_k)[None, :]
    return ((p <= pos) & (p > pos - window)).long()


def swm_list(T_q, T_k, window):
    """Nested Python lists of bools."""
    return [[T_k - T_q + t - window < p <= T_k - T_q + t for p in range(T_k)] for t in range(T_q)]


def swm_square(T_q, T_k, window):
    """Builds a (T_k, T_k) mask and forgets to keep only the last T_q rows."""
    pos = torch.arange(T_k)[:, None]
    p = torch.arange(T_k)[None, :]
    return (p <= pos) & (p > pos - window)


def swm_first_rows(T_q, T_k, window):
    """Builds the (T_k, T_k) mask and keeps its FIRST T_q rows."""
    return swm_square(T_q, T_k, window)[:T_q]


def swm_window_halved(T_q, T_k, window):
    """A window of window // 2 keys on each side."""
    pos = torch.arange(T_q)[:, None] + T_k - T_q
    p = torch.arange(T_k)[None, :]
    return (p <= pos + window // 2) & (p >= pos - window // 2)


def swm_window_from_the_end(T_q, T_k, window):
    """The same last `window` keys for every query (counted from the end of the keys), kept causal."""
    pos = torch.arange(T_q)[:, None] + T_k - T_q
    p = torch.arange(T_k)[None, :]
    return (p <= pos) & (p >= T_k - window)


# ---------------------------------------------------------------- rolling_cache_append
def rc_no_trim(cache_k, cache_v, k_new, v_new, window):
    """Appends without ever dropping anything."""
    return torch.cat([cache_k, k_new], 2), torch.cat([cache_v, v_new], 2)


def rc_trim_before_append(cache_k, cache_v, k_new, v_new, window):
    """Drops to window - 1 first, then appends (right for one new token, not for a prompt)."""
    keep = max(window - 1, 0)
    cut = lambda c: c[:, :, max(c.shape[2] - keep, 0):]
    return torch.cat([cut(cache_k), k_new], 2), torch.cat([cut(cache_v), v_new], 2)


def rc_values_from_keys(cache_k, cache_v, k_new, v_new, window):
    """Returns the keys twice."""
    k = torch.cat([cache_k, k_new], 2)[:, :, -window:]
    return k, k


def rc_keys_and_values_swapped(cache_k, cache_v, k_new, v_new, window):
    """Returns (values, keys)."""
    k = torch.cat([cache_k, k_new], 2)[:, :, -window:]
    v = torch.cat([cache_v, v_new], 2)[:, :, -window:]
    return v, k


def rc_drops_one_per_step(cache_k, cache_v, k_new, v_new, window):
    """Drops the oldest entry once the cache is full, whatever the number of new tokens."""
    k, v = torch.cat([cache_k, k_new], 2), torch.cat([cache_v, v_new], 2)
    if cache_k.shape[2] >= window:
        k, v = k[:, :, 1:], v[:, :, 1:]
    return k, v


def rc_ring_buffer_unrolled(cache_k, cache_v, k_new, v_new, window):
    """A ring buffer: new tokens overwrite the oldest slots, but the slots are returned unrolled
    (not in time order)."""
    k, v = cache_k.clone(), cache_v.clone()
    for t in range(k_new.shape[2]):
        if k.shape[2] < window:
            k, v = torch.cat([k, k_new[:, :, t:t + 1]], 2), torch.cat([v, v_new[:, :, t:t + 1]], 2)
        else:
            slot = (cache_k.shape[2] + t) % window
            k[:, :, slot], v[:, :, slot] = k_new[:, :, t], v_new[:, :, t]
    return k, v


def rc_in_place_then_return(cache_k, cache_v, k_new, v_new, window):
    """Right values, but writes the new keys into the cache passed in when it is full."""
    if cache_k.shape[2] == window and k_new.shape[2] == 1:
        cache_k[:, :, :-1] = cache_k[:, :, 1:].clone()
        cache_k[:, :, -1:] = k_new
        cache_v[:, :, :-1] = cache_v[:, :, 1:].clone()
        cache_v[:, :, -1:] = v_new
        return cache_k, cache_v
    return (torch.cat([cache_k, k_new], 2)[:, :, -window:], torch.cat([cache_v, v_new], 2)[:, :, -window:])


# ---------------------------------------------------------------- attention_backward
def _p(q, k, lse, causal):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), -math.inf)
    return torch.exp(s - lse[..., None])


def ab_dq_dk_swapped(q, k, v, out, lse, grad_out, causal=False):
    """dQ from Q and dK from K (dS K and dS^T Q swapped)."""
    c = 1 / math.sqrt(q.shape[-1])
    p = _p(q, k, lse, causal)
    ds = p * (grad_out @ v.transpose(-2, -1) - (grad_out * out).sum(-1, keepdim=True))
    return ds.transpose(-2, -1) @ q * c, ds @ k * c, p.transpose(-2, -1) @ grad_out


def ab_ds_not_transposed_for_dk(q, k, v, out, lse, grad_out, causal=False):
    """dK = dS Q (not transposed)."""
    c = 1 / math.sqrt(q.shape[-1])
    p = _p(q, k, lse, causal)
    ds = p * (grad_out @ v.transpose(-2, -1) - (grad_out * out).sum(-1, keepdim=True))
    return ds @ k * c, ds @ q * c, p.transpose(-2, -1) @ grad_out


def ab_D_over_keys(q, k, v, out, lse, grad_out, causal=False):
    """D summed over the wrong axis (columns of P * dP)."""
    c = 1 / math.sqrt(q.shape[-1])
    p = _p(q, k, lse, causal)
    dp = grad_out @ v.transpose(-2, -1)
    ds = p * (dp - (p * dp).sum(-2, keepdim=True))
    return ds @ k * c, ds.transpose(-2, -1) @ q * c, p.transpose(-2, -1) @ grad_out


def ab_scaled_twice(q, k, v, out, lse, grad_out, causal=False):
    """Divides dq and dk by d instead of sqrt(d)."""
    c = 1 / q.shape[-1]
    p = _p(q, k, lse, causal)
    ds = p * (grad_out @ v.transpose(-2, -1) - (grad_out * out).sum(-1, keepdim=True))
    return ds @ k * c, ds.transpose(-2, -1) @ q * c, p.transpose(-2, -1) @ grad_out


def ab_p_from_exp_without_lse(q, k, v, out, lse, grad_out, causal=False):
    """P = exp(S), never normalised."""
    c = 1 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(-2, -1) * c
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), -math.inf)
    p = torch.exp(s)
    ds = p * (grad_out @ v.transpose(-2, -1) - (grad_out * out).sum(-1, keepdim=True))
    return ds @ k * c, ds.transpose(-2, -1) @ q * c, p.transpose(-2, -1) @ grad_out


def ab_only_dv(q, k, v, out, lse, grad_out, causal=False):
    """Right dV; dQ and dK left at zero."""
    p = _p(q, k, lse, causal)
    return torch.zeros_like(q), torch.zeros_like(k), p.transpose(-2, -1) @ grad_out


def ab_D_from_grad_out_only(q, k, v, out, lse, grad_out, causal=False):
    """D = rowsum(dO) instead of rowsum(dO * O)."""
    c = 1 / math.sqrt(q.shape[-1])
    p = _p(q, k, lse, causal)
    ds = p * (grad_out @ v.transpose(-2, -1) - grad_out.sum(-1, keepdim=True))
    return ds @ k * c, ds.transpose(-2, -1) @ q * c, p.transpose(-2, -1) @ grad_out


def ab_wrong_order(q, k, v, out, lse, grad_out, causal=False):
    """Returns (dv, dk, dq)."""
    c = 1 / math.sqrt(q.shape[-1])
    p = _p(q, k, lse, causal)
    ds = p * (grad_out @ v.transpose(-2, -1) - (grad_out * out).sum(-1, keepdim=True))
    return p.transpose(-2, -1) @ grad_out, ds.transpose(-2, -1) @ q * c, ds @ k * c


# ---------------------------------------------------------------- rms_norm
def rn_std(x, weight, eps=1e-6):
    """Divides by the standard deviation (torch.std, unbiased), not the root mean square."""
    return x / (x.std(-1, keepdim=True) + eps) * weight


def rn_no_sqrt(x, weight, eps=1e-6):
    """Divides by the mean square itself."""
    return x / ((x * x).mean(-1, keepdim=True) + eps) * weight


def rn_abs_mean(x, weight, eps=1e-6):
    """Divides by the mean absolute value."""
    return x / (x.abs().mean(-1, keepdim=True) + eps) * weight


def rn_adds_weight(x, weight, eps=1e-6):
    """Adds the weight as a bias instead of multiplying."""
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) + weight


def rn_layer_norm_by_hand_with_weight_as_bias(x, weight, eps=1e-6):
    """A LayerNorm with gain 1 and the weight as its bias."""
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + eps) + weight


def rn_mean_over_all(x, weight, eps=1e-6):
    """One mean square over the whole tensor."""
    return x / torch.sqrt((x * x).mean() + eps) * weight


def rn_eps_default_ignored(x, weight, eps=1e-6):
    """Always uses eps = 1e-6."""
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * weight


def rn_in_place(x, weight, eps=1e-6):
    """Right values, computed in x's own memory."""
    x /= torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    x *= weight
    return x


def rn_no_eps(x, weight, eps=1e-6):
    """Leaves eps out."""
    return x / torch.sqrt((x * x).mean(-1, keepdim=True)) * weight


def rn_weight_inside(x, weight, eps=1e-6):
    """Multiplies by the weight before taking the root mean square as well as after."""
    return x / torch.sqrt((x * weight).pow(2).mean(-1, keepdim=True) + eps) * weight


# ---------------------------------------------------------------- swiglu
def sg_tanh(x, w_gate, w_up, w_down):
    """tanh as the gate."""
    return (torch.tanh(x @ w_gate) * (x @ w_up)) @ w_down


def sg_no_up(x, w_gate, w_up, w_down):
    """silu(x @ w_gate) @ w_down: the up projection forgotten."""
    return torch.nn.functional.silu(x @ w_gate) @ w_down


def sg_add_not_multiply(x, w_gate, w_up, w_down):
    """Adds the gate to the up projection."""
    return (torch.nn.functional.silu(x @ w_gate) + x @ w_up) @ w_down


def sg_residual(x, w_gate, w_up, w_down):
    """Adds the residual x (that belongs to the block, not the MLP)."""
    return x + (torch.nn.functional.silu(x @ w_gate) * (x @ w_up)) @ w_down


def sg_silu_on_both(x, w_gate, w_up, w_down):
    """silu on both branches."""
    silu = torch.nn.functional.silu
    return (silu(x @ w_gate) * silu(x @ w_up)) @ w_down


def sg_silu_after_down(x, w_gate, w_up, w_down):
    """silu applied to the output instead of the gate."""
    return torch.nn.functional.silu(((x @ w_gate) * (x @ w_up)) @ w_down)


def sg_swish_beta_2(x, w_gate, w_up, w_down):
    """z * sigmoid(2 z) as the gate."""
    a = x @ w_gate
    return (a * torch.sigmoid(2 * a) * (x @ w_up)) @ w_down


UNCATALOGUED = {
    "llm_attention_gqa": [
        gqa_first_kv_head_only, gqa_averages_query_heads, gqa_mask_triu_blocked, gqa_mask_excludes_self,
        gqa_scale_by_d, gqa_causal_always, gqa_expand_wrong_order, gqa_float32, gqa_returns_weights_too,
        gqa_mask_only_when_square,
    ],
    "llm_attention_sliding_window_mask": [
        swm_band_both_sides, swm_causal_only, swm_window_only_last_row, swm_int_mask, swm_list, swm_square,
        swm_first_rows, swm_window_halved, swm_window_from_the_end,
    ],
    "llm_attention_rolling_cache": [
        rc_no_trim, rc_trim_before_append, rc_values_from_keys, rc_keys_and_values_swapped,
        rc_drops_one_per_step, rc_ring_buffer_unrolled, rc_in_place_then_return,
    ],
    # The cache in GiB (right: 4): 2 * 32 * 8 * 128 * 32768 numbers counted as bytes (2), both K/V and
    # 32 heads forgotten (8 GiB is a catalogued float32; 32 heads and K only: 8 too), 1 TiB, 0.5, bits (32).
    "llm_attention_cache_guess": [0.5, 1024, 32, 3, 4.5, 0],
    "llm_attention_backward": [
        ab_dq_dk_swapped, ab_ds_not_transposed_for_dk, ab_D_over_keys, ab_scaled_twice,
        ab_p_from_exp_without_lse, ab_only_dv, ab_D_from_grad_out_only, ab_wrong_order,
    ],
    "llm_attention_rms_norm": [
        rn_std, rn_no_sqrt, rn_abs_mean, rn_adds_weight, rn_layer_norm_by_hand_with_weight_as_bias,
        rn_mean_over_all, rn_eps_default_ignored, rn_in_place, rn_no_eps, rn_weight_inside,
    ],
    "llm_attention_swiglu": [
        sg_tanh, sg_no_up, sg_add_not_multiply, sg_residual, sg_silu_on_both, sg_silu_after_down,
        sg_swish_beta_2,
    ],
}

# test_uncatalogued.py runs these through the notebook's test cells: only once there is a notebook.
WRONG_ANSWERS = UNCATALOGUED if any(_NOTEBOOK.glob("*.ipynb")) else {}

# Wrong answers that PASS their test cell today (holes in the hidden tests): (grade_id, answer).
HOLES = []
