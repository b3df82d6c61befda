"""Second correct implementations of notebook 13's exercises, written differently from the
reference (course_utils/reference/llm_attention.py): the exercise's tests must pass them too
(tests/exercises/test_mutations.py; until the notebook exists,
tests/reference/test_llm_attention_reference.py runs them through the catalogue)."""
import math

import torch


# ---------------------------------------------------------------- grouped_query_attention
def gqa_expand_reshape(q, k, v, causal=True):
    """Each kv head expanded to its group (a view, no copy) and folded into the head axis."""
    B, h, T_q, d = q.shape
    h_kv, T_k = k.shape[1], k.shape[2]
    g = h // h_kv
    k = k[:, :, None].expand(B, h_kv, g, T_k, d).reshape(B, h, T_k, d)
    v = v[:, :, None].expand(B, h_kv, g, T_k, d).reshape(B, h, T_k, d)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d)
    if causal:
        rows = torch.arange(T_q)[:, None] + (T_k - T_q)
        scores = torch.where(torch.arange(T_k)[None, :] <= rows, scores, torch.tensor(-math.inf, dtype=scores.dtype))
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    return torch.einsum("bhqk,bhkd->bhqd", weights / weights.sum(-1, keepdim=True), v)


def gqa_grouped_queries(q, k, v, causal=True):
    """The queries folded into (B, h_kv, g * T_q, d) instead: each kv head attended once by its
    whole group (no copy of k and v at all), as memory-bound kernels do."""
    B, h, T_q, d = q.shape
    h_kv, T_k = k.shape[1], k.shape[2]
    g = h // h_kv
    grouped = q.reshape(B, h_kv, g * T_q, d)  # heads j*g .. j*g+g-1 next to each other
    scores = grouped @ k.transpose(-2, -1) / math.sqrt(d)  # (B, h_kv, g*T_q, T_k)
    if causal:
        allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q).repeat(g, 1)
        scores = scores.masked_fill(~allowed, -math.inf)
    out = torch.softmax(scores, dim=-1) @ v
    return out.reshape(B, h, T_q, d)


def gqa_per_head_loop(q, k, v, causal=True):
    """A Python loop over the query heads, each reading its kv head i // g."""
    h, h_kv, T_q, T_k = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    outs = []
    for i in range(h):
        j = i // (h // h_kv)
        s = q[:, i] @ k[:, j].transpose(-1, -2) * q.shape[-1] ** -0.5
        if causal:
            s = s + torch.full((T_q, T_k), -math.inf, dtype=s.dtype).triu(T_k - T_q + 1)
        outs.append(torch.softmax(s, -1) @ v[:, j])
    return torch.stack(outs, dim=1)


def gqa_square_mask_sliced(q, k, v, causal=True):
    """The (T_k, T_k) causal mask's last T_q rows, filled with -1e9 instead of -inf (no row is
    ever fully masked here, so the finite fill gives the same weights)."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    T_q, T_k = s.shape[-2:]
    if causal:
        s = s.masked_fill(~torch.ones(T_k, T_k, dtype=torch.bool).tril()[T_k - T_q:], -1e9)
    return torch.softmax(s, -1) @ v


# ---------------------------------------------------------------- sliding_window_mask
def window_from_difference(T_q, T_k, window):
    """From the distance query position - key position: 0 <= distance < window."""
    distance = (torch.arange(T_q)[:, None] + T_k - T_q) - torch.arange(T_k)[None, :]
    return (distance >= 0) & (distance < window)


def window_two_triangles(T_q, T_k, window):
    """The causal triangle minus everything `window` or more steps back (tril - tril)."""
    ones = torch.ones(T_q, T_k, dtype=torch.bool)
    offset = T_k - T_q
    return ones.tril(offset) & ~ones.tril(offset - window)


# ---------------------------------------------------------------- rolling_cache_append
def rolling_negative_slice(cache_k, cache_v, k_new, v_new, window):
    """cat, then x[:, :, -window:] (a negative start larger than the length keeps everything)."""
    return (torch.cat((cache_k, k_new), dim=-2)[:, :, -window:],
            torch.cat((cache_v, v_new), dim=-2)[:, :, -window:])


def rolling_narrow(cache_k, cache_v, k_new, v_new, window):
    """torch.narrow on the time axis, cloned (a fresh tensor, not a view into the concatenation)."""
    out = []
    for cache, new in ((cache_k, k_new), (cache_v, v_new)):
        both = torch.cat([cache, new], 2)
        keep = min(window, both.shape[2])
        out.append(both.narrow(2, both.shape[2] - keep, keep).clone())
    return tuple(out)


# ---------------------------------------------------------------- attention_backward
def backward_einsum_D_from_out(q, k, v, out, lse, grad_out, causal=False):
    """einsum throughout; D as an einsum of dO and O (the same rowsum(dO * O), another form)."""
    d = q.shape[-1]
    s = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(d)
    if causal:
        T = q.shape[-2]
        s = torch.where(torch.ones(T, T, dtype=torch.bool).tril(k.shape[-2] - T), s,
                        torch.tensor(-math.inf, dtype=s.dtype))
    p = torch.exp(s - lse.unsqueeze(-1))
    dv = torch.einsum("bhij,bhid->bhjd", p, grad_out)
    dp = torch.einsum("bhid,bhjd->bhij", grad_out, v)
    D = torch.einsum("bhid,bhid->bhi", grad_out, out)
    ds = p * (dp - D.unsqueeze(-1))
    return (torch.einsum("bhij,bhjd->bhid", ds, k) / math.sqrt(d),
            torch.einsum("bhij,bhid->bhjd", ds, q) / math.sqrt(d), dv)


def backward_row_by_row(q, k, v, out, lse, grad_out, causal=False):
    """One query row at a time, accumulating into dk and dv (how a kernel's loop is written);
    the row's D as a dot product of dO_i and O_i."""
    d = q.shape[-1]
    c = 1.0 / math.sqrt(d)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    T = q.shape[-2]
    for i in range(T):
        last = i + 1 if causal else k.shape[-2]
        s = (k[..., :last, :] @ q[..., i, :, None]).squeeze(-1) * c  # (B, h, last)
        p = torch.exp(s - lse[..., i, None])
        dv[..., :last, :] += p[..., :, None] * grad_out[..., i, None, :]
        dp = (v[..., :last, :] @ grad_out[..., i, :, None]).squeeze(-1)
        D = (grad_out[..., i, None, :] @ out[..., i, :, None]).squeeze(-1)  # (B, h, 1)
        ds = p * (dp - D)
        dq[..., i, :] = (ds[..., None, :] @ k[..., :last, :]).squeeze(-2) * c
        dk[..., :last, :] += ds[..., :, None] * q[..., i, None, :] * c
    return dq, dk, dv


def backward_lse_as_a_divisor(q, k, v, out, lse, grad_out, causal=False):
    """Reads lse in another form: P = exp(S - m) / exp(lse - m) with m the row maximum (the
    division by the saved sum, never a softmax's own), and D from out by torch.linalg.vecdot."""
    c = 1 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(-2, -1) * c
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), -math.inf)
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m) / torch.exp(lse[..., None] - m)
    dp = grad_out @ v.transpose(-2, -1)
    ds = p * (dp - torch.linalg.vecdot(grad_out, out)[..., None])
    return ds @ k * c, ds.transpose(-2, -1) @ q * c, p.transpose(-2, -1) @ grad_out


# ---------------------------------------------------------------- rms_norm
def rms_norm_rsqrt(x, weight, eps=1e-6):
    """x.pow(2).mean, torch.rsqrt and a multiplication (how Llama's code writes it)."""
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rms_norm_from_vector_norm(x, weight, eps=1e-6):
    """The root mean square from the Euclidean norm: ||x|| / sqrt(d)."""
    d = x.shape[-1]
    rms2 = torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / d
    return x * weight / (rms2 + eps).sqrt()


# ---------------------------------------------------------------- swiglu
def swiglu_functional(x, w_gate, w_up, w_down):
    """torch.nn.functional.silu and torch.matmul."""
    return torch.matmul(torch.nn.functional.silu(torch.matmul(x, w_gate)) * torch.matmul(x, w_up), w_down)


def swiglu_fused_einsum(x, w_gate, w_up, w_down):
    """Gate and up as one (d, 2f) matrix, split after (as fused implementations store them)."""
    f = w_gate.shape[1]
    both = torch.einsum("...d,df->...f", x, torch.cat([w_gate, w_up], dim=1))
    gate, up = both[..., :f], both[..., f:]
    return torch.einsum("...f,fd->...d", gate / (1 + torch.exp(-gate)) * up, w_down)


ALTERNATIVES = {
    "llm_attention_gqa": [gqa_expand_reshape, gqa_grouped_queries, gqa_per_head_loop, gqa_square_mask_sliced],
    "llm_attention_sliding_window_mask": [window_from_difference, window_two_triangles],
    "llm_attention_rolling_cache": [rolling_negative_slice, rolling_narrow],
    "llm_attention_cache_guess": [4, 4.0, 2**32 / 2**30, 2 * 32 * 8 * 128 * 2 * 32768 / 1024**3, 4.005],
    "llm_attention_backward": [backward_einsum_D_from_out, backward_row_by_row, backward_lse_as_a_divisor],
    "llm_attention_rms_norm": [rms_norm_rsqrt, rms_norm_from_vector_norm],
    "llm_attention_swiglu": [swiglu_functional, swiglu_fused_einsum],
}
