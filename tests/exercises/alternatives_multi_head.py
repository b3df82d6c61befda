"""Second correct implementations of notebook 07's exercises, written differently from the
reference (course_utils/reference/attention.py and multi_head.py): the exercise's tests must
pass them too (tests/exercises/test_mutations.py)."""
import math

import numpy as np
import torch
from torch import nn


def split_heads_chunks(x, num_heads):
    """Cut the features into num_heads chunks and stack them on a new head axis."""
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def split_heads_view_permute(x, num_heads):
    """view to (B, T, h, d_k), then permute the axes to (B, h, T, d_k)."""
    batch_size, T, d_model = x.shape
    return x.contiguous().view(batch_size, T, num_heads, d_model // num_heads).permute(0, 2, 1, 3)


def merge_heads_cat(x):
    """Concatenate the heads one after the other along the features."""
    return torch.cat(x.unbind(dim=1), dim=-1)


def merge_heads_permute(x):
    """permute to (B, T, h, d_k), make it contiguous, then flatten the last two axes."""
    return x.permute(0, 2, 1, 3).contiguous().flatten(start_dim=2)


class MultiHeadAttentionLoop(nn.Module):
    """One head at a time: slice each head's rows out of the projection weights, attend with
    einsum and a hand-made softmax, concatenate, project with W_O."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    @staticmethod
    def _slice(layer, rows):
        bias = None if layer.bias is None else layer.bias[rows]
        return layer.weight[rows], bias

    def forward(self, query, key, value):
        heads, all_weights = [], []
        for h in range(self.num_heads):
            rows = slice(h * self.d_k, (h + 1) * self.d_k)
            q = nn.functional.linear(query, *self._slice(self.q_proj, rows))
            k = nn.functional.linear(key, *self._slice(self.k_proj, rows))
            v = nn.functional.linear(value, *self._slice(self.v_proj, rows))
            scores = torch.einsum("bqd,bkd->bqk", q, k) / math.sqrt(self.d_k)
            e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
            weights = e / e.sum(dim=-1, keepdim=True)
            heads.append(torch.einsum("bqk,bkd->bqd", weights, v))
            all_weights.append(weights)
        return self.out_proj(torch.cat(heads, dim=-1)), torch.stack(all_weights, dim=1)


def make_multi_head_attention(d_model, num_heads, bias=True):
    """A factory instead of a class: all heads at once, with the 1/sqrt(d_k) folded into q."""

    class Fused(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(d_model, d_model, bias=bias)
            self.k_proj = nn.Linear(d_model, d_model, bias=bias)
            self.v_proj = nn.Linear(d_model, d_model, bias=bias)
            self.out_proj = nn.Linear(d_model, d_model, bias=bias)

        def forward(self, query, key, value):
            d_k = d_model // num_heads

            def heads(t):
                return t.unflatten(-1, (num_heads, d_k)).transpose(1, 2)

            q = heads(self.q_proj(query)) * d_k**-0.5
            k, v = heads(self.k_proj(key)), heads(self.v_proj(value))
            weights = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
            out = (weights @ v).transpose(1, 2).flatten(2)
            return self.out_proj(out), weights

    return Fused()


def attention_parameter_count_by_building(d_model, num_heads, bias=True):
    """Build the four projections and count their parameters."""
    layers = [nn.Linear(d_model, d_model, bias=bias) for _ in range(4)]
    return sum(p.numel() for layer in layers for p in layer.parameters())


def attention_parameter_count_per_head(d_model, num_heads, bias=True):
    """Sum over heads of each head's W_Q^i, W_K^i, W_V^i (d_model x d_k, plus d_k biases), then W_O."""
    d_k = d_model // num_heads
    per_head = 3 * (d_model * d_k + (d_k if bias else 0))
    return num_heads * per_head + d_model * d_model + (d_model if bias else 0)


ALTERNATIVES = {
    # a count computed with NumPy is a NumPy number
    "multi_head_weights_count": [1600, 1600.0, 2 * 8 * 10 ** 2, np.prod([2, 8, 10, 10]), np.float64(1600.0)],
    "multi_head_split_heads": [split_heads_chunks, split_heads_view_permute],
    "multi_head_merge_heads": [merge_heads_cat, merge_heads_permute],
    "multi_head_attention": [MultiHeadAttentionLoop, make_multi_head_attention],
    "multi_head_param_count": [attention_parameter_count_by_building, attention_parameter_count_per_head],
}
