"""Scaled dot-product attention, the masks that go with it, and multi-head attention.

This is the ground truth the hidden tests of notebooks 05 (self-attention), 06 (scaling by
sqrt(d_k)), 07 (multi-head) and 08 (masking) compare against.

Conventions used everywhere in this module:

* Tensors are batch-first. Any number of leading dimensions (batch, heads, ...) may come before
  the last two, which are always (sequence length, feature size).
* A mask is a boolean tensor where **True means "may attend"**, the same convention as
  ``torch.nn.functional.scaled_dot_product_attention``. (``torch.nn.MultiheadAttention``'s
  ``attn_mask`` uses the opposite convention: there True means "blocked".)
"""

import math

import torch
from torch import nn

__all__ = [
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
]


def scaled_dot_product_attention(q, k, v, mask=None):
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V.

    Shape of q: (..., no. of queries Tq, d_k)
    Shape of k: (..., no. of key-value pairs Tk, d_k)
    Shape of v: (..., no. of key-value pairs Tk, d_v)
    Shape of mask (optional, boolean, True = may attend): broadcastable to (..., Tq, Tk)

    Returns ``(output, weights)``:
    Shape of output: (..., Tq, d_v)
    Shape of weights: (..., Tq, Tk); each row sums to one over the keys.

    Masked-out scores are set to -inf before the softmax, so they get exactly zero weight.

    A fully masked row (a query that may attend to no key at all) has no meaningful softmax:
    plain code would compute 0 / 0 = NaN there. Here such a row gets weights that are all
    zero, and therefore an output row of zeros; no NaN appears in the forward or the
    backward pass. Every other row is unaffected.

    Raises ValueError if q and k disagree on d_k, if k and v disagree on Tk, if the mask is
    not boolean, or if the mask does not broadcast to (..., Tq, Tk).
    """
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(
            "q, k and v need at least 2 dimensions (sequence length, features); got shapes "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    d_k = q.shape[-1]
    if k.shape[-1] != d_k:
        raise ValueError(
            "queries and keys must have the same feature size d_k: "
            f"q has {d_k}, k has {k.shape[-1]}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            "keys and values must come in pairs (same length Tk): "
            f"k has {k.shape[-2]}, v has {v.shape[-2]}"
        )

    # Shape of scores: (..., Tq, Tk). Dividing by sqrt(d_k) keeps the variance of the scores
    # near 1 whatever d_k is, so the softmax does not saturate (notebook 06).
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)

    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        mask = _check_mask(mask, scores.shape)
        # A row with at least one allowed key. Shape: (..., Tq, 1)
        row_has_key = mask.any(dim=-1, keepdim=True)
        # For fully masked rows, let the softmax see every key (a finite, harmless result)
        # and zero those rows afterwards: -inf everywhere would give 0 / 0 = NaN.
        softmax_mask = mask | ~row_has_key
        scores = scores.masked_fill(~softmax_mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        weights = weights * row_has_key.to(weights.dtype)

    # Shape of output: (..., Tq, d_v): each query's output is a weighted average of the values.
    return weights @ v, weights


def _check_mask(mask, scores_shape):
    """Validate a boolean mask against the scores and return it broadcast to their shape.

    Shape of mask: broadcastable to scores_shape = (..., Tq, Tk)
    """
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        dtype = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(
            "mask must be a boolean tensor (True = may attend), got "
            f"{dtype}; use e.g. `mask.bool()` or `mask == 1`"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    # The mask may broadcast, but must not enlarge the scores (e.g. add a dimension).
    if broadcast != torch.Size(scores_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention scores' "
            f"shape {tuple(scores_shape)} (..., Tq, Tk)"
        )
    return mask.expand(scores_shape)


def causal_mask(T, device=None):
    """The mask that lets position i attend to positions 0..i only (no peeking at the future).

    Returns a boolean tensor of shape (T, T), True on and below the diagonal.
    Row i is query i; column j is key j; mask[i, j] = (j <= i).
    """
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def padding_mask(lengths, T, device=None):
    """The key mask that hides padding at the end of each sequence in a batch.

    Shape of lengths: (batch_size,) integers, the number of real tokens of each sequence
    Returns a boolean tensor of shape (batch_size, 1, T): mask[b, 0, j] = (j < lengths[b]).

    The middle axis of size 1 stands for "every query": the mask broadcasts against scores of
    shape (batch_size, Tq, Tk = T), hiding the padded keys from every query. For multi-head
    scores (batch_size, num_heads, Tq, Tk), add a head axis: ``padding_mask(...)[:, None]``
    (``MultiHeadAttention`` does this itself for 3-D masks).
    """
    lengths = torch.as_tensor(lengths, device=device)
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (batch_size,), got shape {tuple(lengths.shape)}")
    if (lengths < 0).any() or (lengths > T).any():
        raise ValueError(f"every length must be between 0 and T={T}, got {lengths.tolist()}")
    positions = torch.arange(T, device=lengths.device)
    # Shape: (batch_size, T) -> (batch_size, 1, T)
    return (positions[None, :] < lengths[:, None])[:, None, :]


def split_heads(x, num_heads):
    """Cut the feature axis into num_heads pieces, one per head.

    Shape of x: (batch_size, T, d_model)
    Returns shape (batch_size, num_heads, T, d_k) with d_k = d_model // num_heads;
    head h gets features h*d_k .. (h+1)*d_k - 1.
    """
    batch_size, T, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    # (B, T, d_model) -> (B, T, h, d_k) -> (B, h, T, d_k): heads become a batch-like axis.
    return x.reshape(batch_size, T, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x):
    """Undo split_heads: concatenate the heads' features again.

    Shape of x: (batch_size, num_heads, T, d_k)
    Returns shape (batch_size, T, num_heads * d_k)
    """
    batch_size, num_heads, T, d_k = x.shape
    # transpose makes the tensor non-contiguous, so reshape (not view) copies when needed.
    return x.transpose(1, 2).reshape(batch_size, T, num_heads * d_k)


class MultiHeadAttention(nn.Module):
    """Multi-head attention: num_heads scaled dot-product attentions side by side.

    Each head attends in its own d_k = d_model // num_heads dimensional subspace; the heads'
    outputs are concatenated and mixed by the output projection W_O (``out_proj``).

    Attributes ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj`` are ``nn.Linear(d_model, d_model)``.
    With the same weights it computes what ``torch.nn.MultiheadAttention(d_model, num_heads,
    bias=bias, batch_first=True)`` computes (without dropout).
    """

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(
                f"d_model={d_model} must be divisible by num_heads={num_heads} "
                "(each head gets d_model // num_heads features)"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        # One big projection per role, computing all heads' projections at once; split_heads
        # then cuts the result into heads.
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        """Attend from query to key/value.

        Shape of query: (batch_size, Tq, d_model)
        Shape of key, value: (batch_size, Tk, d_model)
        Shape of mask (optional, boolean, True = may attend): broadcastable to
            (batch_size, num_heads, Tq, Tk), e.g. (Tq, Tk) for a causal mask or
            (batch_size, 1, Tq, Tk). A 3-D mask is read as (batch_size, Tq, Tk) or
            (batch_size, 1, Tk) and shared by all heads (a head axis is inserted).

        Returns ``(output, weights)``:
        Shape of output: (batch_size, Tq, d_model)
        Shape of weights: (batch_size, num_heads, Tq, Tk), one attention pattern per head.
        """
        # Shape of q: (batch_size, num_heads, Tq, d_k); k, v: (batch_size, num_heads, Tk, d_k)
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        if mask is not None and mask.dim() == 3:
            # A per-example mask: without this, its batch axis would line up with the heads.
            mask = mask.unsqueeze(1)
        # Shape of heads: (batch_size, num_heads, Tq, d_k)
        heads, weights = scaled_dot_product_attention(q, k, v, mask)
        # Concatenate the heads and let W_O mix them. Shape: (batch_size, Tq, d_model)
        return self.out_proj(merge_heads(heads)), weights
