"""Reference answers of notebook 08 (masking and the transformer block) not already in
`attention.py` (which has `causal_mask`, `padding_mask`, `scaled_dot_product_attention` and
`MultiHeadAttention`).

Instructor side. Conventions as in `attention.py`: batch first, boolean masks with
**True = may attend**.
"""
import torch
from torch import nn

from .attention import MultiHeadAttention

__all__ = ["causally_blocked_pairs", "masked_softmax", "TransformerBlock"]


def masked_softmax(scores, mask):
    """Softmax over the last axis (the keys) in which blocked keys get exactly zero weight.

    Shape of scores: (..., Tq, Tk), any float tensor
    Shape of mask: boolean, broadcastable to scores' shape; True = may attend
    Returns weights of the broadcast shape: each row with at least one allowed key is a
    probability distribution over its allowed keys (zero on the blocked ones).

    A fully masked row (no allowed key) has no meaningful softmax: plain code computes
    0 / 0 = NaN there. Its weights here are all zero instead, and no NaN appears in the forward
    or the backward pass.

    Built from exp (no torch.softmax): the row maximum is taken over the allowed keys only, and
    a fully masked row's maximum (-inf) is replaced by 0 before it is subtracted, so that
    -inf - (-inf) = NaN never happens.
    """
    scores, mask = torch.broadcast_tensors(scores, mask)
    blocked = scores.masked_fill(~mask, float("-inf"))
    row_max = blocked.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max)).detach()
    e = torch.exp(blocked - row_max)  # exactly 0 where blocked
    total = e.sum(dim=-1, keepdim=True)
    # A fully masked row has total 0: divide by 1 there, which leaves its zeros.
    return e / torch.where(total > 0, total, torch.ones_like(total))


class TransformerBlock(nn.Module):
    """One transformer block: masked multi-head self-attention and a position-wise MLP, each
    wrapped in a residual connection and a LayerNorm, in one of two arrangements.

    * pre-norm (``norm_first=True``, GPT-2 and most models since):
      ``x = x + attn(norm1(x), mask)``; ``x = x + mlp(norm2(x))``
    * post-norm (``norm_first=False``, the 2017 Transformer):
      ``x = norm1(x + attn(x, mask))``; ``x = norm2(x + mlp(x))``

    Attributes: ``attn`` (multi-head self-attention with ``q_proj``, ``k_proj``, ``v_proj``,
    ``out_proj``), ``norm1``, ``norm2`` (``nn.LayerNorm(d_model)``) and ``mlp``
    (``nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))``).
    With the same weights it computes what ``torch.nn.TransformerEncoderLayer(d_model,
    num_heads, d_ff, dropout=0.0, activation="relu", batch_first=True, norm_first=...)`` computes.
    """

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, num_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def _attend(self, x, mask):
        return self.attn(x, x, x, mask)[0]

    def forward(self, x, mask=None):
        """Shape of x: (batch_size, T, d_model); mask (optional, boolean, True = may attend):
        broadcastable to (batch_size, T, T), e.g. (T, T) or (batch_size, 1, T).
        Returns shape (batch_size, T, d_model)."""
        if self.norm_first:
            x = x + self._attend(self.norm1(x), mask)
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self._attend(x, mask))
        return self.norm2(x + self.mlp(x))


def causally_blocked_pairs(T):
    """(query, key) pairs a causal mask blocks in a window of T: the keys after the query, above
    the diagonal. T = 64: 64 * 63 / 2 = 2016."""
    return T * (T - 1) // 2
