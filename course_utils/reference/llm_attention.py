"""Reference answers of notebook 13 (attention as today's LLMs run it). Instructor side only.

Why these pieces: a Llama- or Mistral-style model changes little in attention itself; what it
changes is what attention costs. Grouped-query attention shares each key/value head among a
group of query heads, so the KV cache shrinks by that factor; a sliding window caps how far back
a query looks, so the cache can roll over and stay a fixed size; a backward pass that recomputes
the weights from the saved log-sum-exp never stores the (T, T) weights; RMSNorm and SwiGLU are
the block's normalisation and MLP.

Conventions as in `attention.py`: batch first, heads before time ((B, h, T, d)), boolean masks
with **True = may attend**. When there are fewer queries than keys (generation with a cache)
the queries are the *last* T_q positions: query t sits at absolute position T_k - T_q + t, so
a causal mask is aligned to the end and one new query sees every cached key.

* `grouped_query_attention(q, k, v, causal=True)`: query head i uses key/value head
  i // (h // h_kv) (torch.repeat_interleave on the head axis, as Llama and PyTorch group them).
* `sliding_window_mask(T_q, T_k, window)`: each query sees itself and the window - 1 keys before.
* `rolling_cache_append(cache_k, cache_v, k_new, v_new, window)`: the last `window` positions.
* `attention_forward_with_lse(q, k, v, causal=False)`: the output and the per-row log-sum-exp
  that `attention_backward` starts from (what a flash-attention forward saves).
* `attention_backward(q, k, v, out, lse, grad_out, causal=False)`: (dq, dk, dv) by hand.
* `rms_norm(x, weight, eps=1e-6)` and `swiglu(x, w_gate, w_up, w_down)`.
* `kv_cache_gib(...)`: the think-first question's number (a Mistral-7B-like cache, 4 GiB).
* `BlockedAttention.apply(q, k, v, is_causal)`: attention as FlashAttention-2 schedules it, on
  the CPU: the blocked loop of `course_utils.widgets.llm_attention` (online-softmax forward that
  saves out and lse, backward over block pairs) with the reference's per-block formulas, D
  computed once. The notebook runs the same loop with the student's attention_backward.
"""
import math

import torch

from course_utils.widgets import llm_attention as _blocked

__all__ = ["grouped_query_attention", "sliding_window_mask", "rolling_cache_append",
           "attention_forward_with_lse", "attention_backward", "rms_norm", "swiglu",
           "kv_cache_gib", "CACHE_QUESTION", "OutAndLseAttention", "BlockedAttention"]


def _end_aligned_causal(T_q, T_k):
    """(T_q, T_k) bool, True = may attend: query t at position T_k - T_q + t sees keys 0 .. that position."""
    return torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q)


def grouped_query_attention(q, k, v, causal=True):
    """softmax(q k^T / sqrt(d)) v with h query heads sharing h_kv key/value heads.

    Shapes: q (B, h, T_q, d); k and v (B, h_kv, T_k, d), with h a multiple of h_kv.
    Query head i reads key/value head i // (h // h_kv): heads 0 .. g-1 share kv head 0, and so on
    (g = h // h_kv). h_kv = h is ordinary multi-head attention; h_kv = 1 is multi-query attention.
    causal: query t (at absolute position T_k - T_q + t) sees the keys at positions <= its own.
    Returns (B, h, T_q, d).
    """
    h, h_kv = q.shape[1], k.shape[1]
    if h % h_kv:
        raise ValueError(f"the number of query heads ({h}) must be a multiple of the key/value heads ({h_kv})")
    group = h // h_kv
    k = k.repeat_interleave(group, dim=1)  # (B, h, T_k, d): kv head j serves query heads j*g .. j*g + g-1
    v = v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, h, T_q, T_k)
    if causal:
        allowed = _end_aligned_causal(q.shape[-2], k.shape[-2])
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v


def sliding_window_mask(T_q, T_k, window):
    """(T_q, T_k) bool, True = may attend, for the last T_q of T_k positions.

    Query t sits at position pos = T_k - T_q + t and sees the keys at positions p with
    pos - window < p <= pos: itself and the window - 1 keys before it (fewer near the start).
    """
    positions = torch.arange(T_k - T_q, T_k)[:, None]  # (T_q, 1): each query's absolute position
    keys = torch.arange(T_k)[None, :]  # (1, T_k)
    return (keys <= positions) & (keys > positions - window)


def rolling_cache_append(cache_k, cache_v, k_new, v_new, window):
    """Append the new keys and values along time and keep only the last `window` positions.

    Shapes: caches (B, h_kv, T_c, d) with T_c <= window; new (B, h_kv, T_new, d).
    Returns (keys, values), each (B, h_kv, min(T_c + T_new, window), d), oldest first.
    """
    keys = torch.cat([cache_k, k_new], dim=2)
    values = torch.cat([cache_v, v_new], dim=2)
    keep = min(keys.shape[2], window)
    return keys[:, :, keys.shape[2] - keep:], values[:, :, values.shape[2] - keep:]


def attention_forward_with_lse(q, k, v, causal=False):
    """(out, lse): the attention output and, per query row, logsumexp of its scaled scores.

    Shapes: q (B, h, T_q, d), k and v (B, h, T_k, d); out (B, h, T_q, d), lse (B, h, T_q).
    A flash-attention forward saves exactly these two: exp(scores - lse) gives the weights back.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(~_end_aligned_causal(q.shape[-2], k.shape[-2]), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.exp(scores - lse[..., None]) @ v, lse


def attention_backward(q, k, v, out, lse, grad_out, causal=False):
    """The gradients (dq, dk, dv) of out = softmax(q k^T / sqrt(d)) v, from out and lse alone.

    Shapes: q, k, v, out, grad_out (B, h, T, d); lse (B, h, T), the log-sum-exp of each query
    row's scaled (and masked) scores. No (T, T) matrix is saved by the forward; the weights are
    recomputed here:

        P  = exp(S - lse)          S = q k^T / sqrt(d), masked to -inf where causal forbids
        dV = P^T dO
        dP = dO V^T
        D  = rowsum(dO * O)        (= rowsum(P * dP): the softmax's Jacobian term)
        dS = P * (dP - D)
        dQ = dS K / sqrt(d),  dK = dS^T Q / sqrt(d)
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1) * scale
    if causal:
        scores = scores.masked_fill(~_end_aligned_causal(q.shape[-2], k.shape[-2]), float("-inf"))
    p = torch.exp(scores - lse[..., None])  # the attention weights, exactly as in the forward
    dv = p.transpose(-2, -1) @ grad_out
    dp = grad_out @ v.transpose(-2, -1)
    D = (grad_out * out).sum(dim=-1, keepdim=True)  # (B, h, T, 1)
    ds = p * (dp - D)  # gradient with respect to the scaled scores S
    dq = ds @ k * scale
    dk = ds.transpose(-2, -1) @ q * scale
    return dq, dk, dv


def rms_norm(x, weight, eps=1e-6):
    """x / sqrt(mean(x^2 over the last axis) + eps) * weight. No mean is subtracted, no bias.

    Shapes: x (..., d), weight (d,). Returns x's shape."""
    mean_square = (x * x).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(mean_square + eps) * weight


def swiglu(x, w_gate, w_up, w_down):
    """The gated MLP of Llama: (silu(x @ w_gate) * (x @ w_up)) @ w_down, silu(z) = z * sigmoid(z).

    Shapes: x (..., d), w_gate and w_up (d, f), w_down (f, d). Returns (..., d)."""
    gate = x @ w_gate
    silu = gate * torch.sigmoid(gate)
    return (silu * (x @ w_up)) @ w_down


# The think-first question: a Mistral-7B-like model at its full context, one sequence.
CACHE_QUESTION = dict(num_layers=32, num_kv_heads=8, head_dim=128, bytes_per_value=2, T=32768, batch_size=1)


def kv_cache_gib(num_layers=32, num_kv_heads=8, head_dim=128, bytes_per_value=2, T=32768, batch_size=1):
    """GiB of the KV cache: K and V (2), per layer, per key/value head, per dimension, per token."""
    return 2 * num_layers * num_kv_heads * head_dim * bytes_per_value * T * batch_size / 2**30


class OutAndLseAttention(torch.autograd.Function):
    """Attention whose forward saves q, k, v, the output and the log-sum-exp (no T x T weights),
    and whose backward recomputes the weights from them: what the notebook's Function does with
    the student's attention_backward, here with the reference (for the bench and the tests)."""

    @staticmethod
    def forward(ctx, q, k, v):
        out, lse = attention_forward_with_lse(q, k, v)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        return attention_backward(*ctx.saved_tensors, grad_out)


def _block_backward_from_D(q, k, v, D, lse, grad_out, causal=False):
    """One (query block, key block) pair's share of (dq, dk, dv), as in `attention_backward`, with
    the query rows' D = rowsum(dO * O), shape (..., T_q, 1), given: FlashAttention-2 computes it
    once before the loop over blocks instead of once per block."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1) * scale
    if causal:
        scores = scores.masked_fill(~_end_aligned_causal(q.shape[-2], k.shape[-2]), float("-inf"))
    p = torch.exp(scores - lse[..., None])
    ds = p * (grad_out @ v.transpose(-2, -1) - D)
    return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, p.transpose(-2, -1) @ grad_out


# apply(q, k, v, is_causal): q, k, v (B, h, T, d), any T; blocks of 128 queries and keys.
BlockedAttention = _blocked.blocked_attention_function(_block_backward_from_D, rowsum_first=True)
BlockedAttention.__doc__ = ("Attention in blocks, forward and backward, as FlashAttention-2 schedules it (on the "
                            "CPU): apply(q, k, v, is_causal=False); saves q, k, v, out and lse only.")
