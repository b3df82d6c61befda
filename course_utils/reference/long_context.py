"""Reference answers of notebook 12 (long contexts).

Instructor side. Conventions as in `attention.py`: batch first, boolean masks with
**True = may attend**, a fully masked query row gets a zero output.

* `apply_rope`: rotary position embedding (RoPE) in the *adjacent pairs* convention: columns
  (2i, 2i+1) of a query or key form one 2-D point, turned by the angle pos * theta_i with
  theta_i = base^(-2i/d). Then q_m . k_n depends on the positions only through m - n.
* `blocked_attention`: softmax(q k^T / sqrt(d_k)) v computed one block of keys at a time with
  a running maximum and a running sum (the "online softmax" of flash attention), so that no
  (Tq, Tk) matrix is ever built.
* `attention_weights_bytes`: the memory of the float32 attention weights of one layer.
"""
import math

import torch

__all__ = ["apply_rope", "rope_angles", "blocked_attention", "attention_weights_bytes"]


def rope_angles(positions, d, base=10000.0):
    """The rotation angle of every (position, column pair), float64.

    Shape of positions: (T,), integers. Returns shape (T, d // 2): angle[t, i] = positions[t] *
    base^(-2i / d)."""
    two_i = torch.arange(0, d, 2, dtype=torch.float64)
    theta = base ** (-two_i / d)
    return torch.as_tensor(positions, dtype=torch.float64)[:, None] * theta[None, :]


def apply_rope(x, positions=None, base=10000.0):
    """Rotate each adjacent column pair (2i, 2i+1) of x by the angle pos * base^(-2i/d).

    Shape of x: (..., T, d) with d even, float32 or float64.
    Shape of positions (optional): (T,) integers; default 0, 1, ..., T - 1.
    Returns a tensor of x's shape and dtype; x itself is not changed:

        out[..., t, 2i]     = x[..., t, 2i] cos(a) - x[..., t, 2i+1] sin(a)
        out[..., t, 2i + 1] = x[..., t, 2i] sin(a) + x[..., t, 2i+1] cos(a),   a = pos_t * theta_i

    Angles are computed in float64 (pos * theta reaches large values) and the result cast back.
    """
    *_, T, d = x.shape
    if d % 2:
        raise ValueError(f"RoPE needs an even feature size (pairs of columns), got d = {d}")
    if positions is None:
        positions = torch.arange(T)
    angles = rope_angles(positions, d, base)  # (T, d/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    x64 = x.to(torch.float64)
    even, odd = x64[..., 0::2], x64[..., 1::2]
    out = torch.empty_like(x64)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out.to(x.dtype)


def blocked_attention(q, k, v, mask=None, block_size=4):
    """softmax(q k^T / sqrt(d_k)) v, one block of `block_size` keys at a time (online softmax).

    Shape of q: (..., Tq, d_k); k: (..., Tk, d_k); v: (..., Tk, d_v)
    Shape of mask (optional, boolean, True = may attend): broadcastable to (..., Tq, Tk)
    Returns the output, shape (..., Tq, d_v), equal to
    `scaled_dot_product_attention(q, k, v, mask)[0]`: a query with no allowed key gets zeros.

    For every query it keeps the largest score seen so far (m), the sum of exp(score - m)
    over the keys seen so far (l) and the matching weighted sum of values (acc). A new block
    with a larger maximum m' rescales l and acc by exp(m - m'); at the end output = acc / l.
    """
    Tk = k.shape[-2]
    if mask is not None and mask.shape[-1] != Tk:  # a mask broadcast along the keys
        mask = mask.expand(*mask.shape[:-1], Tk)
    scale = 1.0 / math.sqrt(q.shape[-1])
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    running_max = torch.full((*lead, q.shape[-2], 1), float("-inf"), dtype=q.dtype)
    running_sum = torch.zeros((*lead, q.shape[-2], 1), dtype=q.dtype)
    acc = torch.zeros((*lead, q.shape[-2], v.shape[-1]), dtype=q.dtype)
    for start in range(0, Tk, block_size):
        stop = min(start + block_size, Tk)
        scores = q @ k[..., start:stop, :].transpose(-2, -1) * scale  # (..., Tq, block)
        if mask is not None:
            scores = scores.masked_fill(~mask[..., start:stop], float("-inf"))
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
        # While a row has seen no allowed key its maximum is -inf: subtract 0 instead, so that
        # -inf - (-inf) = nan never happens (every exp is then exp(-inf) = 0).
        safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        p = torch.exp(scores - safe_max)
        correction = torch.exp(running_max - safe_max)  # 0 when nothing was seen before
        running_sum = running_sum * correction + p.sum(dim=-1, keepdim=True)
        acc = acc * correction + p @ v[..., start:stop, :]
        running_max = new_max
    # A row with no allowed key has running_sum 0 and acc 0: divide by 1 to keep its zeros.
    return acc / torch.where(running_sum > 0, running_sum, torch.ones_like(running_sum))


def attention_weights_bytes(T, num_heads, batch_size=1, bytes_per_number=4):
    """Bytes of one layer's attention weights: batch_size * num_heads matrices of T x T numbers."""
    return batch_size * num_heads * T * T * bytes_per_number
