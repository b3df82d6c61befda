"""Second correct implementations of notebook 08's exercises, written differently from the
reference (course_utils/reference/attention.py and masking_transformer.py): the exercise's tests
must pass them too (tests/exercises/test_mutations.py)."""
import numpy as np
import torch
from torch import nn

from course_utils.models.tiny_lm import MaskedSelfAttention


def causal_mask_compare(T):
    """Compare the row index (query) with the column index (key)."""
    positions = torch.arange(T)
    return positions[:, None] >= positions[None, :]


def causal_mask_not_future(T):
    """Everything that is not strictly in the future."""
    return ~torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)


def padding_mask_loop(lengths, T):
    """One row at a time, then the query axis."""
    rows = []
    for length in lengths.tolist():
        row = torch.zeros(T, dtype=torch.bool)
        row[:length] = True
        rows.append(row)
    return torch.stack(rows).unsqueeze(1)


def padding_mask_expand(lengths, T):
    """expand the positions over the batch and compare."""
    return (torch.arange(T).expand(len(lengths), T) < lengths.unsqueeze(1)).unsqueeze(1)


def masked_softmax_clamp(scores, mask):
    """torch.where instead of masked_fill; a row with an allowed key sums to at least 1 (its
    maximum contributes exp(0)), so clamping the sums at 1 only touches fully masked rows."""
    filled = torch.where(mask, scores, float("-inf"))
    row_max = filled.max(dim=-1, keepdim=True).values
    row_max = row_max.masked_fill(row_max == float("-inf"), 0.0)
    e = torch.exp(filled - row_max)
    return e / e.sum(dim=-1, keepdim=True).clamp(min=1.0)


def masked_softmax_rows(scores, mask):
    """Row by row in float64, with an explicit branch for rows that may attend to nothing."""
    scores, mask = torch.broadcast_tensors(scores, mask)
    flat_scores, flat_mask = scores.reshape(-1, scores.shape[-1]), mask.reshape(-1, mask.shape[-1])
    rows = []
    for s, m in zip(flat_scores, flat_mask):
        if not m.any():
            rows.append(torch.zeros_like(s))
            continue
        s64 = s.double()
        # blocked entries at -inf before exp: torch.where(m, exp(...), 0) would still compute exp
        # of a huge blocked score, whose inf gives a nan gradient
        e = torch.exp((s64 - s64[m].max()).masked_fill(~m, float("-inf")))
        rows.append((e / e.sum()).to(s.dtype))
    return torch.stack(rows).reshape(scores.shape)


def masked_softmax_log_mask(scores, mask):
    """Adds log(mask) (0 where allowed, -inf where blocked) instead of masked_fill; divides by 1
    where a row sums to 0."""
    filled = scores + torch.log(mask.to(scores.dtype))
    m = torch.nan_to_num(filled.amax(dim=-1, keepdim=True), neginf=0.0)
    e = torch.exp(filled - m)
    s = e.sum(dim=-1, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


class TransformerBlockByHand(nn.Module):
    """LayerNorm written out with the module's own gamma and beta; the two arrangements as two
    loops over (norm, sub-layer) pairs."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.attn = MaskedSelfAttention(d_model, num_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    @staticmethod
    def _layer_norm(norm, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return norm.weight * (x - mean) / torch.sqrt(var + norm.eps) + norm.bias

    def forward(self, x, mask=None):
        sublayers = [(self.norm1, lambda h: self.attn(h, mask)), (self.norm2, self.mlp)]
        for norm, f in sublayers:
            if self.norm_first:
                x = x + f(self._layer_norm(norm, x))
            else:
                x = self._layer_norm(norm, x + f(x))
        return x


def make_transformer_block(d_model, num_heads, d_ff, norm_first=True):
    """A factory: the residual sums written with torch.add and the ReLU as a function."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = MaskedSelfAttention(d_model, num_heads)
            self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

        def forward(self, x, mask=None):
            mlp = lambda h: self.mlp[2](torch.relu(self.mlp[0](h)))  # noqa: E731
            if norm_first:
                x = torch.add(x, self.attn(self.norm1(x), mask))
                return torch.add(x, mlp(self.norm2(x)))
            x = self.norm1(torch.add(x, self.attn(x, mask)))
            return self.norm2(torch.add(x, mlp(x)))

    return Block()


ALTERNATIVES = {
    # a count computed with NumPy is a NumPy number
    "masking_transformer_blocked_pairs": [2016, 2016.0, 64 * 63 // 2, np.int64(64) * 63 // 2,
                                          int(np.tril(np.ones((64, 64)), -1).sum()) * 1.0,
                                          np.triu(np.ones((64, 64)), 1).sum()],
    "masking_transformer_causal_mask": [causal_mask_compare, causal_mask_not_future],
    "masking_transformer_padding_mask": [padding_mask_loop, padding_mask_expand],
    "masking_transformer_masked_softmax": [masked_softmax_clamp, masked_softmax_rows,
                                           masked_softmax_log_mask],
    "masking_transformer_block": [TransformerBlockByHand, make_transformer_block],
}
