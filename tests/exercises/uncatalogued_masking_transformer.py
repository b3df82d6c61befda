"""Wrong answers to notebook 08's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import numpy as np
import torch
from torch import nn

from course_utils.models.tiny_lm import MaskedSelfAttention


# ---------------------------------------------------------------- causal_mask
def causal_upper(T):
    """Upper triangle: query i sees the future."""
    return torch.ones(T, T, dtype=torch.bool).triu()


def causal_strict(T):
    """Strictly below the diagonal: a token may not see itself."""
    return torch.ones(T, T, dtype=torch.bool).tril(-1)


def causal_float(T):
    """A float 0/1 mask instead of a boolean one."""
    return torch.ones(T, T).tril()


def causal_hardcoded(T):
    """Gaming: the visible cases hard-coded, all-True otherwise."""
    if T == 4:
        return torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    if T == 1:
        return torch.ones(1, 1, dtype=torch.bool)
    return torch.ones(T, T, dtype=torch.bool)


_SMALL = torch.ones(8, 8, dtype=torch.bool).tril()


def causal_table(T):
    """Gaming: slices a precomputed 8 x 8 mask, wrong past T = 8."""
    out = torch.zeros(T, T, dtype=torch.bool)
    n = min(T, 8)
    out[:n, :n] = _SMALL[:n, :n]
    return out


_WINDOW = torch.ones(32, 32, dtype=torch.bool).tril()


def causal_window_table(T):
    """Slices a mask precomputed for the language model's window (32): wrong shape past T = 32."""
    return _WINDOW[:T, :T]


def causal_numpy(T):
    """A NumPy array instead of a tensor."""
    return np.tril(np.ones((T, T), dtype=bool))


def causal_batched(T):
    """An extra leading axis: shape (1, T, T)."""
    return torch.ones(T, T, dtype=torch.bool).tril()[None]


def causal_band(T):
    """Only the diagonal and the previous key: a window of 2 instead of the whole past."""
    i = torch.arange(T)
    return (i[None, :] <= i[:, None]) & (i[None, :] >= i[:, None] - 2) if T > 4 else \
        (i[None, :] <= i[:, None])


# ---------------------------------------------------------------- blocked_pairs (T = 64: 2016)
blocked_allowed = 2080     # counted the allowed pairs (64 * 65 / 2), or blocked the diagonal too
blocked_half = 2048        # T * T / 2
blocked_off_by_one = 1953  # 63 * 62 / 2
blocked_string = "2016"    # the right number, as a string
blocked_numpy_nan = np.float64("nan")  # nan, as a NumPy scalar"


# ---------------------------------------------------------------- padding_mask
def pad_le(lengths, T):
    """<= instead of <: one padding key too many is allowed."""
    return (torch.arange(T)[None, :] <= lengths[:, None])[:, None, :]


def pad_no_middle_axis(lengths, T):
    """Shape (B, T): forgets the query axis."""
    return torch.arange(T)[None, :] < lengths[:, None]


def pad_last_axis(lengths, T):
    """Shape (B, T, 1): the size-1 axis in the wrong place."""
    return (torch.arange(T)[None, :] < lengths[:, None])[:, :, None]


def pad_left(lengths, T):
    """Padding first, real tokens last."""
    return (torch.arange(T)[None, :] >= (T - lengths)[:, None])[:, None, :]


def pad_max_length(lengths, T):
    """Uses the longest length instead of T for the key axis."""
    Tm = int(lengths.max())
    return (torch.arange(Tm)[None, :] < lengths[:, None])[:, None, :]


def pad_first_length(lengths, T):
    """Uses lengths[0] for every sequence."""
    return (torch.arange(T)[None, :] < lengths[:1, None]).expand(len(lengths), T)[:, None, :]


def pad_transposed_reshape(lengths, T):
    """Compares with the axes swapped, (T, B), then reshapes to (B, 1, T): right only in special cases."""
    m = torch.arange(T)[:, None] < lengths[None, :]
    return m.reshape(len(lengths), 1, T) if len(lengths) != T else m.T[:, None, :]


def pad_two_sequences(lengths, T):
    """Gaming: loops over the first two sequences only."""
    out = torch.zeros(len(lengths), 1, T, dtype=torch.bool)
    for b in range(min(2, len(lengths))):
        out[b, 0, :int(lengths[b])] = True
    return out


def pad_fixed_range(lengths, T):
    """Compares lengths with a fixed torch.arange(32)[:T]: breaks past T = 32."""
    grid = torch.arange(32)[None, :T].expand(len(lengths), T)
    return (grid < lengths[:, None])[:, None, :]


def pad_int(lengths, T):
    """An integer 0/1 mask."""
    return (torch.arange(T)[None, :] < lengths[:, None])[:, None, :].long()


def pad_hardcoded(lengths, T):
    """Gaming: the visible cases hard-coded, all True otherwise."""
    if lengths.tolist() == [3, 1] and T == 4:
        return torch.tensor([[[True, True, True, False]], [[True, False, False, False]]])
    if lengths.tolist() == [0, 2] and T == 2:
        return torch.tensor([[[False, False]], [[True, True]]])
    return torch.ones(len(lengths), 1, T, dtype=torch.bool)


# ---------------------------------------------------------------- masked_softmax
def _softmax_from_exp(filled, dim=-1):
    m = filled.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(filled - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


def ms_fill_minus_1e9(scores, mask):
    """Fills with -1e9: a fully masked row becomes uniform."""
    filled = scores.masked_fill(~mask, -1e9)
    e = torch.exp(filled - filled.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def ms_fill_zero(scores, mask):
    """Fills blocked scores with 0."""
    filled = scores.masked_fill(~mask, 0.0)
    e = torch.exp(filled - filled.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def ms_zero_after(scores, mask):
    """Zeroes the weights after a plain softmax: rows no longer sum to one."""
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True) * mask


def ms_no_max(scores, mask):
    """No maximum subtracted: overflows on scores in the hundreds."""
    e = torch.exp(scores.masked_fill(~mask, float("-inf")))
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


def ms_nan_to_num(scores, mask):
    """NOT WRONG (kept for the record, listed nowhere): nan_to_num after a plain -inf softmax; masked_fill's
    backward zeroes the nan gradients of fully masked rows, so values and gradients are right."""
    filled = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(filled - filled.amax(-1, keepdim=True))
    return torch.nan_to_num(e / e.sum(-1, keepdim=True), nan=0.0)


def ms_where_after_exp(scores, mask):
    """torch.where(mask, exp(scores - max), 0): max over all scores, exp of blocked ones still computed."""
    e = torch.where(mask, torch.exp(scores - scores.amax(-1, keepdim=True)), torch.zeros(()))
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


def ms_in_place(scores, mask):
    """Writes -inf into the caller's scores when it can (no gradient needed)."""
    if scores.requires_grad:
        return _softmax_from_exp(scores.masked_fill(~mask, float("-inf")))
    scores.masked_fill_(~mask.expand_as(scores), float("-inf"))
    return _softmax_from_exp(scores)


def ms_float32(scores, mask):
    """Right numbers, but always in float32."""
    return _softmax_from_exp(scores.float().masked_fill(~mask, float("-inf")))


def ms_captured_softmax(scores, mask):
    """Gaming: torch.softmax captured through a lambda default, then nan_to_num."""
    fn = getattr(torch.nn.functional, "soft" + "max")
    return torch.nan_to_num(fn(scores.masked_fill(~mask, float("-inf")), dim=-1), nan=0.0)


def ms_logsumexp(scores, mask):
    """Gaming: exp(x - logsumexp(x)), then nan_to_num: the fully masked row's gradient is nan."""
    filled = scores.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(torch.exp(filled - torch.logsumexp(filled, -1, keepdim=True)), nan=0.0)


def ms_mask_shape_of_scores(scores, mask):
    """Assumes the mask has the scores' exact shape: fails to broadcast a (T_q, T_k) mask."""
    out = scores.clone()
    out[~mask] = float("-inf")
    return _softmax_from_exp(out)


def ms_uniform_full_rows_fixed(scores, mask):
    """Small fill (-1e4) plus an explicit zero for fully masked rows: wrong when allowed scores are below -1e4."""
    filled = scores.masked_fill(~mask, -1e4)
    w = _softmax_from_exp(filled)
    return w * mask.any(-1, keepdim=True)


def ms_minus_1e9_then_zero_rows(scores, mask):
    """Fills with -1e9 and zeroes the fully masked rows (mask.any): right until allowed scores fall below -1e9."""
    filled = scores.masked_fill(~mask, -1e9)
    e = torch.exp(filled - filled.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True) * mask.any(-1, keepdim=True)


def ms_logsumexp_safe(scores, mask):
    """exp(x - logsumexp(x)) with fully masked rows made finite first: right values in exact arithmetic,
    but float32 loses the digits of the logsumexp of scores near -30000."""
    filled = scores.masked_fill(~mask, float("-inf"))
    safe = torch.where(mask.any(-1, keepdim=True), filled, torch.zeros_like(filled))
    return torch.exp(safe - torch.logsumexp(safe, -1, keepdim=True)) * mask


def ms_softmax_wrong_axis(scores, mask):
    """Normalises over the queries (axis -2)."""
    return _softmax_from_exp(scores.masked_fill(~mask, float("-inf")), dim=-2)


def ms_eps_denominator(scores, mask):
    """Adds 1e-6 to every denominator: rows sum to slightly less than one."""
    filled = scores.masked_fill(~mask, float("-inf"))
    m = filled.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(filled - m)
    return e / (e.sum(-1, keepdim=True) + 1e-3)


# ---------------------------------------------------------------- TransformerBlock
class _Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.attn = MaskedSelfAttention(d_model, num_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self.norm1(x), mask)
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x, mask))
        return self.norm2(x + self.mlp(x))


class BlockSwapped(_Block):
    """Pre-norm when norm_first is False and post-norm when True."""

    def forward(self, x, mask=None):
        self.norm_first = not self.norm_first
        try:
            return super().forward(x, mask)
        finally:
            self.norm_first = not self.norm_first


class BlockNoRelu(_Block):
    """Skips the ReLU between the two linear layers."""

    def forward(self, x, mask=None):
        mlp = lambda h: self.mlp[2](self.mlp[0](h))  # noqa: E731
        if self.norm_first:
            x = x + self.attn(self.norm1(x), mask)
            return x + mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x, mask))
        return self.norm2(x + mlp(x))


class BlockIgnoresMask(_Block):
    """Never passes the mask to the attention."""

    def forward(self, x, mask=None):
        return super().forward(x, None)


class BlockOneNorm(_Block):
    """Uses norm1 in both places."""

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self.norm1(x), mask)
            return x + self.mlp(self.norm1(x))
        x = self.norm1(x + self.attn(x, mask))
        return self.norm1(x + self.mlp(x))


class BlockResidualFromNormed(_Block):
    """Pre-norm residual added to the normalised input, h + Attn(h)."""

    def forward(self, x, mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = h + self.attn(h, mask)
            h = self.norm2(x)
            return h + self.mlp(h)
        return super().forward(x, mask)


class BlockInvertedMask(_Block):
    """Passes ~mask, PyTorch's convention, to an attention that takes True = may attend."""

    def forward(self, x, mask=None):
        return super().forward(x, None if mask is None else ~mask)


class BlockAlwaysPreNorm(_Block):
    """Ignores norm_first: always pre-norm."""

    def forward(self, x, mask=None):
        x = x + self.attn(self.norm1(x), mask)
        return x + self.mlp(self.norm2(x))


class BlockOnlyCausalMasks(_Block):
    """Uses the mask only when it is 2-D (causal); a padding mask (B, 1, T) is dropped."""

    def forward(self, x, mask=None):
        return super().forward(x, mask if mask is not None and mask.dim() == 2 else None)


class BlockNorm2OnInput(_Block):
    """Pre-norm MLP reads norm2 of the block's input instead of the updated stream."""

    def forward(self, x, mask=None):
        if self.norm_first:
            y = x + self.attn(self.norm1(x), mask)
            return y + self.mlp(self.norm2(x))
        return super().forward(x, mask)


class BlockThreeHeads(_Block):
    """Hard-codes 3 heads, the visible tests' number, whatever num_heads says."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__(d_model, 3, d_ff, norm_first)


class BlockNoGrad(_Block):
    """Right numbers, computed under torch.no_grad(): the block cannot train."""

    def forward(self, x, mask=None):
        with torch.no_grad():
            return super().forward(x, mask)


class BlockDetachedAttention(_Block):
    """Detaches the attention's output: values right, the attention weights never learn."""

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self.norm1(x), mask).detach()
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x, mask).detach())
        return self.norm2(x + self.mlp(x))


class BlockDefaultPostNorm(_Block):
    """Right block, wrong default: norm_first=False (the tests always passed norm_first)."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, norm_first)


class BlockDropout(_Block):
    """Dropout 0.1 after each sub-layer, active in training mode."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, norm_first)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.drop(self.attn(self.norm1(x), mask))
            return x + self.drop(self.mlp(self.norm2(x)))
        x = self.norm1(x + self.drop(self.attn(x, mask)))
        return self.norm2(x + self.drop(self.mlp(x)))


class BlockDffIgnored(_Block):
    """Ignores d_ff and widens to 4 * d_model."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__(d_model, num_heads, 4 * d_model, norm_first)


class BlockFinalNorm(_Block):
    """Pre-norm with an extra LayerNorm (norm2) on the block's output."""

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self.norm1(x), mask)
            x = x + self.mlp(self.norm2(x))
            return self.norm2(x)
        return super().forward(x, mask)


class BlockGelu(_Block):
    """GELU instead of ReLU in the MLP."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, norm_first)
        self.mlp[1] = nn.GELU()


class BlockNoAffineNorm(_Block):
    """LayerNorms without a learned scale and shift."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, norm_first)
        self.norm1 = nn.LayerNorm(d_model, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(d_model, elementwise_affine=False)


class BlockLayerNormEps(_Block):
    """LayerNorms with eps=1e-6 instead of PyTorch's default 1e-5 (nn.LayerNorm(d_model))."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, norm_first)
        self.norm1 = nn.LayerNorm(d_model, eps=1e-6)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-6)


class BlockHandLayerNorm(_Block):
    """LayerNorm written by hand with eps added to the standard deviation, outside the square root."""

    @staticmethod
    def _ln(norm, t):
        sd = t.std(-1, keepdim=True, unbiased=False)
        return norm.weight * (t - t.mean(-1, keepdim=True)) / (sd + 1e-5) + norm.bias

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self._ln(self.norm1, x), mask)
            return x + self.mlp(self._ln(self.norm2, x))
        x = self._ln(self.norm1, x + self.attn(x, mask))
        return self._ln(self.norm2, x + self.mlp(x))


class BlockDetachedNormParams(_Block):
    """LayerNorms applied with detached gamma and beta: right values and input gradient, but the
    LayerNorms never learn."""

    def forward(self, x, mask=None):
        def ln(norm, t):
            return nn.functional.layer_norm(t, t.shape[-1:], norm.weight.detach(), norm.bias.detach())
        if self.norm_first:
            x = x + self.attn(ln(self.norm1, x), mask)
            return x + self.mlp(ln(self.norm2, x))
        x = ln(self.norm1, x + self.attn(x, mask))
        return ln(self.norm2, x + self.mlp(x))


class BlockMlpFromData(_Block):
    """The MLP written out with `.data` of its weights: the MLP's parameters get no gradient."""

    def _mlp(self, h):
        h = torch.relu(h @ self.mlp[0].weight.data.T + self.mlp[0].bias.data)
        return h @ self.mlp[2].weight.data.T + self.mlp[2].bias.data

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self.norm1(x), mask)
            return x + self._mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x, mask))
        return self.norm2(x + self._mlp(x))


class BlockRemembersMask(_Block):
    """Keeps the last mask it was given and reuses it when called with mask=None (same length)."""

    def forward(self, x, mask=None):
        if mask is not None:
            self._last_mask = mask
        elif getattr(self, "_last_mask", None) is not None and self._last_mask.shape[-1] == x.shape[1]:
            mask = self._last_mask
        return super().forward(x, mask)


WRONG_ANSWERS = {
    "masking_transformer_causal_mask": [causal_upper, causal_strict, causal_float, causal_hardcoded,
                                        causal_numpy, causal_batched, causal_band, causal_table,
                                        causal_window_table],
    "masking_transformer_blocked_pairs": [blocked_allowed, blocked_half, blocked_off_by_one, blocked_string,
                                          blocked_numpy_nan],
    "masking_transformer_padding_mask": [pad_le, pad_no_middle_axis, pad_last_axis, pad_left, pad_max_length,
                                         pad_first_length, pad_transposed_reshape, pad_two_sequences, pad_int,
                                         pad_hardcoded, pad_fixed_range],
    "masking_transformer_masked_softmax": [ms_fill_minus_1e9, ms_fill_zero, ms_zero_after, ms_no_max,
                                           ms_where_after_exp, ms_in_place, ms_captured_softmax,
                                           ms_logsumexp, ms_mask_shape_of_scores, ms_uniform_full_rows_fixed,
                                           ms_softmax_wrong_axis, ms_eps_denominator,
                                           ms_minus_1e9_then_zero_rows, ms_logsumexp_safe],
    "masking_transformer_block": [BlockSwapped, BlockNoRelu, BlockIgnoresMask, BlockOneNorm, BlockResidualFromNormed,
                                  BlockInvertedMask, BlockAlwaysPreNorm, BlockOnlyCausalMasks, BlockNorm2OnInput,
                                  BlockThreeHeads, BlockDropout, BlockDffIgnored, BlockFinalNorm,
                                  BlockGelu, BlockNoAffineNorm, BlockNoGrad, BlockDetachedAttention,
                                  BlockDefaultPostNorm, BlockLayerNormEps, BlockHandLayerNorm,
                                  BlockDetachedNormParams, BlockMlpFromData, BlockRemembersMask],
}

# Wrong answers that still PASS the test cell. Left open on purpose: each returns float32 for
# float64 inputs, which the shared comparison accepts by design (Exercise.tolerances widens the
# tolerance for a float32 result, "a correct float32 answer must not fail"), and every tensor the
# notebook feeds these functions is float32 anyway.
HOLES = {
    'masking_transformer_masked_softmax': [ms_float32],
}


# --- issue 39: float16, sizes past a fixed table ------------------------------------------------

_GPT2_BUFFER = torch.ones(1024, 1024, dtype=torch.bool).tril()


def causal_gpt2_buffer(T):
    """Slices GPT-2's fixed 1024 x 1024 causal buffer: wrong (too small) past T = 1024."""
    return _GPT2_BUFFER[:T, :T]


def ms_clamped_denominator(scores, mask):
    """Right in float32 and float64, but the row sums are clamped at 1e-30, which is 0 in float16:
    a fully masked float16 row is 0 / 0 = nan."""
    filled = scores.masked_fill(~mask, float("-inf"))
    m = filled.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(filled - m)
    return e / e.sum(-1, keepdim=True).clamp(min=1e-30)


def ms_fill_minus_1e30_rows_zeroed(scores, mask):
    """-1e30 for -inf, fully masked rows zeroed: right in float32 and float64 (every allowed score
    is far above -1e30), but -1e30 does not fit in float16 (masked_fill raises)."""
    filled = scores.masked_fill(~mask, -1e30)
    e = torch.exp(filled - filled.amax(-1, keepdim=True))
    weights = e / e.sum(-1, keepdim=True)
    return weights * torch.broadcast_to(mask, weights.shape).any(-1, keepdim=True)


WRONG_ANSWERS["masking_transformer_causal_mask"].append(causal_gpt2_buffer)
WRONG_ANSWERS["masking_transformer_masked_softmax"] += [ms_clamped_denominator, ms_fill_minus_1e30_rows_zeroed]
