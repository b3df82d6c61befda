"""Student-safe building blocks for notebook 08 (masking and the transformer block).

* `MaskedSelfAttention`: multi-head self-attention with a boolean mask (True = may attend),
  the attention sub-layer students put inside their own transformer block. It is built on
  PyTorch's `torch.nn.functional.scaled_dot_product_attention` (off limits in notebooks 05 and
  07, whose guards catch it), so it gives nothing away there.
* `CharLM`: a tiny causal character-level language model for the notebook's demos. Its blocks
  are PyTorch's own `torch.nn.TransformerEncoderLayer` (pre-norm) with PyTorch's own causal
  mask, so this module holds none of notebook 08's answers in a callable form (its block
  exercise forbids `torch.nn.TransformerEncoderLayer`).
"""

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MaskedSelfAttention", "CharLM"]


class MaskedSelfAttention(nn.Module):
    """Multi-head self-attention (notebook 07) that takes a boolean mask.

    Attributes ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``: ``nn.Linear(d_model, d_model)``.
    """

    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x, mask=None):
        """Shape of x: (batch_size, T, d_model).
        Shape of mask (optional, boolean, True = may attend): broadcastable to (batch_size, T, T),
        e.g. (T, T) for a causal mask or (batch_size, 1, T) for padding.
        Returns the output, shape (batch_size, T, d_model). A query with no allowed key gets a
        zero attention output."""
        batch_size, T, d_model = x.shape

        def heads(t):  # (B, T, d_model) -> (B, h, T, d_k)
            return t.reshape(batch_size, T, self.num_heads, d_model // self.num_heads).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        if mask is not None:
            if mask.dtype != torch.bool:
                raise ValueError(f"mask must be boolean (True = may attend), got {mask.dtype}")
            if mask.dim() == 3:  # (B, Tq, Tk) or (B, 1, Tk): one mask for every head
                mask = mask.unsqueeze(1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if mask is not None:  # a fully masked query: zero output, whatever the backend does
            out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return self.out_proj(out.transpose(1, 2).reshape(batch_size, T, d_model))


class CharLM(nn.Module):
    """A causal character-level language model: token and learned position embeddings, a stack
    of pre-norm transformer blocks (`torch.nn.TransformerEncoderLayer` with a causal mask), a
    final LayerNorm and a linear read-out to one logit per character of the vocabulary."""

    def __init__(self, vocab_size, context=32, d_model=64, num_heads=4, num_layers=2, d_ff=128):
        super().__init__()
        self.context = context
        self.token = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        self.d_model = d_model

    def forward(self, tokens):
        """Shape of tokens: (batch_size, T) with T <= context. Returns logits (batch_size, T,
        vocab_size): position t's logits predict token t + 1 from tokens 0..t only."""
        T = tokens.shape[-1]
        if T > self.context:
            raise ValueError(f"at most {self.context} tokens fit in the context, got {T}")
        x = self.token(tokens) + self.position(torch.arange(T, device=tokens.device))
        # PyTorch's convention here is the opposite of the course's: True = blocked.
        blocked = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
        for block in self.blocks:
            x = block(x, src_mask=blocked)
        return self.head(self.norm(x))
