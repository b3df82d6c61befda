"""Student-safe: a small, readable decoder-only language model for notebook 11 (fast generation).

Notebook 08's `CharLM` is built from the student's block where it passes its checks, else from
`nn.TransformerEncoderLayer`, which hides its keys and values inside PyTorch. A key/value cache needs them, so this model spells every step out:

* `CausalSelfAttention`: multi-head causal self-attention with separate `q_proj`, `k_proj`,
  `v_proj`, `out_proj` (notebook 07), `split_heads` and `merge_heads`;
* `Block`: the pre-norm transformer block of notebook 08 (`norm1`, `attn`, `norm2`, `mlp`);
* `DecoderLM`: token and learned position embeddings, a stack of blocks, a final LayerNorm and
  a linear read-out. Its `forward` recomputes everything from the whole sequence: it is the
  ground truth a cached decoder must reproduce.

Nothing here uses a cache; notebook 11 asks the student to write one.
"""
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CausalSelfAttention", "Block", "DecoderLM"]


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention; every head has size head_dim = d_model // num_heads."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split_heads(self, x):
        """(B, T, d_model) -> (B, num_heads, T, head_dim)."""
        batch_size, T, _ = x.shape
        return x.reshape(batch_size, T, self.num_heads, self.head_dim).transpose(1, 2)

    def merge_heads(self, x):
        """(B, num_heads, T, head_dim) -> (B, T, d_model)."""
        batch_size, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(batch_size, T, self.num_heads * self.head_dim)

    def forward(self, x):
        """x (B, T, d_model) -> (B, T, d_model); position t attends to positions 0..t."""
        q = self.split_heads(self.q_proj(x))
        k = self.split_heads(self.k_proj(x))
        v = self.split_heads(self.v_proj(x))
        T = x.shape[1]
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # True = may attend
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return self.out_proj(self.merge_heads(out))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DecoderLM(nn.Module):
    """A decoder-only (GPT-style) language model over `vocab_size` tokens, for sequences of at
    most `context` tokens."""

    def __init__(self, vocab_size, context=64, d_model=32, num_heads=2, num_layers=2, d_ff=64):
        super().__init__()
        self.vocab_size, self.context, self.d_model = vocab_size, context, d_model
        self.token = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, num_heads, d_ff) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def __repr__(self):
        block = self.blocks[0]
        return (f"DecoderLM(vocab_size={self.vocab_size}, context={self.context}, d_model={self.d_model}, "
                f"num_heads={block.attn.num_heads}, num_layers={len(self.blocks)}, "
                f"d_ff={block.mlp[0].out_features})")

    def embed(self, tokens, positions):
        """Token plus position embedding: tokens (B, T) and positions (T,) -> (B, T, d_model)."""
        return self.token(tokens) + self.position(positions)

    def forward(self, tokens):
        """Full recomputation. tokens (B, T), T <= context -> logits (B, T, vocab_size):
        the logits at position t predict token t + 1 from tokens 0..t."""
        T = tokens.shape[-1]
        if T > self.context:
            raise ValueError(f"at most {self.context} tokens fit in the context, got {T}")
        x = self.embed(tokens, torch.arange(T, device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))
