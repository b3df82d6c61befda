"""Reference answers of notebook 10 (the encoder–decoder Transformer).

Instructor side. Conventions: batch first; a source mask `src_mask` is boolean (B, S),
True = a real source token (may be attended to); the projections are applied as x @ W
(notebook 05's convention), W_q, W_k: (d_model, d_k), W_v: (d_model, d_v).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.models.transformer_seq2seq import Attention

__all__ = ["cross_attention", "DecoderBlock", "teacher_forcing_loss", "greedy_decode",
           "CROSS_WEIGHTS_QUESTION", "cross_weights_count"]


def cross_attention(x, memory, W_q, W_k, W_v, src_mask=None):
    """Single-head cross-attention: queries from the decoder, keys and values from the encoder.

    Shape of x: (B, T, d_model), the decoder's positions; memory: (B, S, d_model), the encoder's
    output; W_q, W_k: (d_model, d_k); W_v: (d_model, d_v); src_mask: (B, S) boolean or None.
    Returns (output, weights): (B, T, d_v) and (B, T, S); each row of weights is a distribution
    over the source positions, zero on padding.
    """
    q = x @ W_q
    k = memory @ W_k
    v = memory @ W_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(W_q.shape[-1])
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))  # hide padded keys
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


class DecoderBlock(nn.Module):
    """A Transformer decoder block: masked self-attention, cross-attention over the encoder's
    output, and a position-wise MLP, each with a residual connection and a LayerNorm.

    * pre-norm (norm_first=True): x = x + self_attn(n1, n1, causal); n1 = norm1(x);
      x = x + cross_attn(norm2(x), memory, src_mask); x = x + mlp(norm3(x))
    * post-norm (norm_first=False): x = norm1(x + self_attn(x, x, causal));
      x = norm2(x + cross_attn(x, memory, src_mask)); x = norm3(x + mlp(x))

    Attributes: self_attn, cross_attn (`transformer_seq2seq.Attention(d_model, num_heads)`),
    norm1, norm2, norm3 (nn.LayerNorm(d_model)), mlp (Linear(d_model, d_ff), ReLU,
    Linear(d_ff, d_model)).
    """

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = Attention(d_model, num_heads)
        self.cross_attn = Attention(d_model, num_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x, memory, src_mask=None):
        """x (B, T, d_model), memory (B, S, d_model), src_mask (B, S) or None -> (B, T, d_model)."""
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.self_attn(h, h, causal=True)
            x = x + self.cross_attn(self.norm2(x), memory, src_mask)
            return x + self.mlp(self.norm3(x))
        x = self.norm1(x + self.self_attn(x, x, causal=True))
        x = self.norm2(x + self.cross_attn(x, memory, src_mask))
        return self.norm3(x + self.mlp(x))


def teacher_forcing_loss(model, src, src_mask, tgt, bos):
    """Mean cross-entropy of a batch under teacher forcing.

    tgt (B, L): the target ids (ending with EOS, no BOS). The decoder reads the target shifted
    right behind BOS, [bos, y_1, ..., y_{L-1}], so that position t, which sees y_1..y_t-1 only
    (causal mask), is scored against y_t: model(src, src_mask, decoder_input) -> (B, L, V).
    Returns a 0-d tensor, the mean over all B * L target tokens.
    """
    decoder_input = torch.cat([torch.full_like(tgt[:, :1], bos), tgt[:, :-1]], dim=1)
    logits = model(src, src_mask, decoder_input)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))


def greedy_decode(model, src, src_mask, bos, steps):
    """Greedy decoding of a batch: run the encoder once, then `steps` times feed the tokens so
    far (BOS first) to the decoder and append the most probable next token of every sentence.

    model.encode(src, src_mask) -> memory (B, S, d); model.decode(tokens, memory, src_mask) ->
    logits (B, t, V). Returns the chosen ids (B, steps), a long tensor without the BOS.
    """
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        tokens = torch.full((src.shape[0], 1), bos, dtype=torch.long)
        for _ in range(steps):
            logits = model.decode(tokens, memory, src_mask)
            tokens = torch.cat([tokens, logits[:, -1, :].argmax(dim=-1, keepdim=True)], dim=1)
    return tokens[:, 1:]


# The "think first" question: how many numbers one decoder layer's cross-attention weights hold
# for a batch of B dates padded to S source characters, decoded over T positions by H heads.
CROSS_WEIGHTS_QUESTION = dict(batch=8, heads=4, target_positions=11, source_length=29)


def cross_weights_count(batch, heads, target_positions, source_length):
    """Weights (B, H, T, S): one per (sentence, head, decoder position, source position)."""
    return batch * heads * target_positions * source_length
