"""Second correct implementations of notebook 10's exercises, written differently from the
reference (course_utils/reference/encoder_decoder.py): the exercise's tests must pass them too
(tests/exercises/test_mutations.py)."""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.models.transformer_seq2seq import Attention


def cross_attention_einsum(x, memory, W_q, W_k, W_v, src_mask=None):
    """einsum everywhere, a softmax written out with the row maximum, padding by torch.where."""
    q = torch.einsum("btd,dk->btk", x, W_q) / math.sqrt(W_q.shape[1])
    k = torch.einsum("bsd,dk->bsk", memory, W_k)
    v = torch.einsum("bsd,dv->bsv", memory, W_v)
    scores = torch.einsum("btk,bsk->bts", q, k)
    if src_mask is not None:
        scores = torch.where(src_mask.unsqueeze(1), scores, torch.full_like(scores, -math.inf))
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weights = e / e.sum(dim=-1, keepdim=True)
    return torch.einsum("bts,bsv->btv", weights, v), weights


def cross_attention_per_sentence(x, memory, W_q, W_k, W_v, src_mask=None):
    """One sentence at a time, its padding cut off instead of masked."""
    outputs, all_weights = [], []
    S = memory.shape[1]
    for b in range(x.shape[0]):
        length = S if src_mask is None else int(src_mask[b].sum())
        k, v = memory[b, :length] @ W_k, memory[b, :length] @ W_v
        scores = (x[b] @ W_q) @ k.T / math.sqrt(W_k.shape[1])
        weights = torch.softmax(scores, dim=-1)
        outputs.append(weights @ v)
        all_weights.append(F.pad(weights, (0, S - length)))
    return torch.stack(outputs), torch.stack(all_weights)


def cross_attention_renormalised(x, memory, W_q, W_k, W_v, src_mask=None):
    """Softmax over every source position, then the padding zeroed and each row renormalised;
    log of the mask added to the scores is the same thing, so gradients agree too."""
    scores = (x @ W_q) @ (memory @ W_k).transpose(1, 2) * W_q.shape[-1] ** -0.5
    weights = torch.softmax(scores, dim=2)
    if src_mask is not None:
        weights = weights * src_mask[:, None, :]
        weights = weights / weights.sum(dim=2, keepdim=True)
    return torch.bmm(weights, memory @ W_v), weights


class DecoderBlockSublayers(nn.Module):
    """The three sub-layers as a list of (norm, function) pairs, one residual rule for all."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = Attention(d_model, num_heads)
        self.cross_attn = Attention(d_model, num_heads)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x, memory, src_mask=None):
        steps = [(self.norm1, lambda h: self.self_attn(h, h, None, causal=True)),
                 (self.norm2, lambda h: self.cross_attn(h, memory, key_mask=src_mask)),
                 (self.norm3, self.mlp)]
        for norm, sublayer in steps:
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x


def teacher_forcing_loss_long_input(model, src, src_mask, tgt, bos):
    """Feed [bos, y_1, ..., y_L] and score the first L positions (the last one predicts nothing)."""
    bos_column = torch.full((tgt.shape[0], 1), bos, dtype=tgt.dtype)
    logits = model(src, src_mask, torch.cat([bos_column, tgt], dim=1))[:, :-1]
    return F.cross_entropy(logits.transpose(1, 2), tgt)


def teacher_forcing_loss_roll(model, src, src_mask, tgt, bos):
    """torch.roll to the right, then BOS over the wrapped-around token; log-softmax by hand."""
    decoder_input = torch.roll(tgt, shifts=1, dims=1).clone()
    decoder_input[:, 0] = bos
    log_probs = torch.log_softmax(model(src, src_mask, decoder_input), dim=-1)
    return -log_probs.gather(-1, tgt.unsqueeze(-1)).mean()


def greedy_decode_preallocated(model, src, src_mask, bos, steps):
    """The output tensor allocated up front and filled one column per step."""
    memory = model.encode(src, src_mask)
    tokens = torch.empty(src.shape[0], steps + 1, dtype=torch.long)
    tokens[:, 0] = bos
    with torch.no_grad():
        for t in range(steps):
            logits = model.decode(tokens[:, :t + 1], memory, src_mask)
            tokens[:, t + 1] = logits[:, t].argmax(dim=-1)
    return tokens[:, 1:].clone()


def greedy_decode_list(model, src, src_mask, bos, steps):
    """Tokens kept as a Python list of columns."""
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        columns = [torch.full((len(src),), bos, dtype=torch.long)]
        for _ in range(steps):
            logits = model.decode(torch.stack(columns, dim=1), memory, src_mask)
            columns.append(torch.max(logits[:, -1], dim=-1).indices)
        return torch.stack(columns, dim=1)[:, 1:]  # the BOS column dropped (steps may be 0)


ALTERNATIVES = {
    "encoder_decoder_cross_attention": [cross_attention_einsum, cross_attention_per_sentence,
                                        cross_attention_renormalised],
    "encoder_decoder_block": [DecoderBlockSublayers],
    "encoder_decoder_teacher_forcing": [teacher_forcing_loss_long_input, teacher_forcing_loss_roll],
    "encoder_decoder_greedy": [greedy_decode_preallocated, greedy_decode_list],
    # A count computed with NumPy (np.prod of the axes) is a NumPy integer
    "encoder_decoder_cross_weights": [8 * 4 * 11 * 29, 10208.0, np.prod([8, 4, 11, 29])],
}
