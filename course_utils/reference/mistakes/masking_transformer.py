"""Mistake catalogue of notebook 08 (masking and the transformer block).

Instructor side, as secret as the reference. Each `Mistake.compute` is a `functools.partial`
of one self-contained function (or class) per exercise: the forbidden-API guard counts every
function of `course_utils.reference` as the answer, so a mistake never calls the reference.

Why the cases look the way they do (every mistake must differ from the reference and from
every other mistake on them):

* masks: several T and lengths including 0 and T, so that an off-by-one or a missing diagonal
  shows; masks are compared as booleans (`MaskExercise` says so when the dtype is wrong).
* masked_softmax: Tq != Tk; every case but one has a fully masked row (told apart: NaN, uniform
  weights of a large finite negative, zeros); one case has scores in the hundreds, where exp
  overflows without subtracting the row maximum; masks of shapes (Tq, Tk) and (B, 1, Tk); one
  case with a blocked score 1e4 above the allowed ones (its maximum must not count) and one with
  allowed scores near -3e4 (a finite fill such as -1e4 leaks there). The gradient cases (the
  LM trains through this function) have huge blocked scores: exp of them overflows, and a
  `torch.where` that drops the overflow forward still gives a nan gradient.
* transformer_block: both arrangements, LayerNorms with random weights and biases (so a
  LayerNorm in the wrong place shows), random MLP biases, a causal and a padding mask.
"""
import dataclasses
import functools
import math

import torch
from torch import nn

from course_utils.grading import SOFTMAX_BUILTINS, GradingError, call_without
from course_utils.reference import attention
from course_utils.reference import masking_transformer as reference
from course_utils.reference.mistakes import Exercise, Mistake, think_first
from course_utils.reference.mistakes import diagnose as _diagnose
from course_utils.reference.mistakes import check as _check
from course_utils.reference.mistakes.gradients import GradientExercise
from course_utils.models.tiny_lm import MaskedSelfAttention

__all__ = ["EXERCISES", "HIDDEN_ONLY", "BlockExercise", "check"]

# Every catalogued mistake also fails a visible check, except:
HIDDEN_ONLY = {
    # the visible tests always pass norm_first; only a hidden case leaves it at its default
    "default_post_norm",
    # right wherever the allowed scores stay above -1e9: only the hidden case near -2**34 shows it
    "minus_1e9_rows_zeroed",
}

TRANSFORMER_BUILTINS = (
    "torch.nn:TransformerEncoderLayer",
    "torch.nn:TransformerDecoderLayer",
    "torch.nn:TransformerEncoder",
    "torch.nn:Transformer",
)


@dataclasses.dataclass(frozen=True)
class MaskExercise(Exercise):
    """Masks are compared as values and must be boolean tensors."""

    def difference(self, got, expected):
        wanted = expected.dtype if isinstance(expected, torch.Tensor) else None
        if not isinstance(got, torch.Tensor) or got.dtype != wanted:
            kind = got.dtype if isinstance(got, torch.Tensor) else type(got).__name__
            return (f"your mask should be a {wanted} tensor (True = may attend), but it is {kind}; "
                    "build it from comparisons, or convert with `.bool()`.")
        return super().difference(got, expected)


# ----------------------------------------------------------------------------------------
# masking_transformer_causal_mask: causal_mask(T) -> (T, T) bool, True on and below the diagonal

def _causal_variant(T, *, kind):
    ones = torch.ones(T, T, dtype=torch.bool)
    if kind == "upper_triangle":
        return ones.triu()
    if kind == "diagonal_excluded":
        return ones.tril(diagonal=-1)
    if kind == "blocked_convention":
        return ones.triu(diagonal=1)
    if kind == "one_ahead":
        return ones.tril(diagonal=1)
    if kind == "float_mask":
        return torch.ones(T, T).tril()
    raise ValueError(kind)


def _causal(kind):
    return functools.partial(_causal_variant, kind=kind)


CAUSAL = MaskExercise(
    grade_id="masking_transformer_causal_mask",
    function_name="causal_mask",
    reference=attention.causal_mask,
    # T = 20: a mask sliced out of a small precomputed table (8 x 8, say) must not pass; T = 100: nor
    # one sliced out of a table the size of the language model's window (32) or of the question's T (64).
    # T = 1100 (issue 39, item 3): nor one sliced out of GPT-2's fixed 1024 x 1024 buffer.
    make_cases=lambda seed: [((T,), {}) for T in (1, 4, 7, 20, 100, 1100)],
    output_names=("your causal mask",),
    atol=0.0, rtol=0.0,
    crash_hint="return torch.ones(T, T, dtype=torch.bool) with only the entries on and below the diagonal kept True",
    mistakes=(
        Mistake("upper_triangle",
                "your mask is True on and above the diagonal: row i (query i) would attend to keys "
                "i..T-1, the future. Keep the lower triangle (key j <= query i): .tril(), not .triu().",
                _causal("upper_triangle")),
        Mistake("diagonal_excluded",
                "your mask leaves out the diagonal (an off-by-one: j < i instead of j <= i): a token "
                "may attend to itself, and without the diagonal row 0 has no key at all.",
                _causal("diagonal_excluded")),
        Mistake("blocked_convention",
                "your mask is True strictly above the diagonal, PyTorch's 'True = blocked' convention "
                "of nn.MultiheadAttention's attn_mask; here True means 'may attend', so invert it.",
                _causal("blocked_convention")),
        Mistake("one_ahead",
                "your mask also allows the key just after each query (j <= i + 1): that is one step "
                "into the future; use .tril() with the default diagonal=0.",
                _causal("one_ahead")),
        Mistake("float_mask",
                "your mask is a float tensor of ones and zeros; masks are boolean: use "
                "dtype=torch.bool (or `.bool()`).",
                _causal("float_mask")),
    ),
)


# ----------------------------------------------------------------------------------------
# masking_transformer_padding_mask: padding_mask(lengths, T) -> (B, 1, T) bool

def _padding_variant(lengths, T, *, kind):
    lengths = torch.as_tensor(lengths)
    positions = torch.arange(T)
    real = positions[None, :] < lengths[:, None]  # (B, T)
    if kind == "query_axis":
        return real[:, :, None]
    if kind == "inverted":
        return ~real[:, None, :]
    if kind == "off_by_one":
        return (positions[None, :] <= lengths[:, None])[:, None, :]
    if kind == "no_query_axis":
        return real
    if kind == "square":
        return real[:, :, None] & real[:, None, :]
    raise ValueError(kind)


def _padding(kind):
    return functools.partial(_padding_variant, kind=kind)


PADDING = MaskExercise(
    grade_id="masking_transformer_padding_mask",
    function_name="padding_mask",
    reference=attention.padding_mask,
    make_cases=lambda seed: [((torch.tensor([3, 5, 1]), 5), {}), ((torch.tensor([2, 6]), 6), {}),
                             ((torch.tensor([4, 0, 2, 3]), 4), {}),
                             # T = 100: a mask built from a fixed, short torch.arange(n)[:T] must not pass
                             ((torch.tensor([100, 37, 64, 1]), 100), {})],
    output_names=("your padding mask",),
    atol=0.0, rtol=0.0,
    crash_hint="compare torch.arange(T)[None, :] with lengths[:, None] to get (B, T), then add the middle axis with [:, None, :]",
    mistakes=(
        Mistake("query_axis",
                "your mask has shape (B, T, 1): it hides padded *queries*, while the real tokens can "
                "still attend to the padding. Padding is hidden on the key axis: shape (B, 1, T).",
                _padding("query_axis")),
        Mistake("inverted",
                "your mask is True on the padding and False on the real tokens; True means 'may "
                "attend', so it must be True at positions j < length.",
                _padding("inverted")),
        Mistake("off_by_one",
                "your mask lets each sequence attend to one padding position too many (j <= length); "
                "the real tokens are positions 0 .. length - 1, so use j < length.",
                _padding("off_by_one")),
        Mistake("no_query_axis",
                "your mask has shape (B, T); against scores of shape (B, Tq, Tk) it would line up "
                "the batch with the queries. Add the query axis: shape (B, 1, T).",
                _padding("no_query_axis")),
        Mistake("square",
                "your mask has shape (B, T, T) and also blocks the padded queries, so their rows are "
                "fully masked; the exercise asks for the key mask of shape (B, 1, T), which "
                "broadcasts over every query.",
                _padding("square")),
    ),
)


# ----------------------------------------------------------------------------------------
# masking_transformer_masked_softmax: masked_softmax(scores, mask) -> weights

def _masked_softmax_variant(scores, mask, *, kind):
    scores, mask = torch.broadcast_tensors(scores, mask)
    if kind == "ignored":
        use = torch.ones_like(mask)
    elif kind == "inverted":
        use = ~mask
    else:
        use = mask
    if kind == "zero_fill":
        filled = scores.masked_fill(~use, 0.0)
    elif kind == "finite_negative":
        filled = scores.masked_fill(~use, -1e9)
    elif kind == "minus_1e4":
        filled = scores.masked_fill(~use, -1e4)
    elif kind == "minus_1e9_rows_zeroed":
        filled = scores.masked_fill(~use, -1e9)
    elif kind == "after_softmax":
        filled = scores
    else:
        filled = scores.masked_fill(~use, float("-inf"))
    if kind == "logsumexp":  # exp(x - logsumexp(x)): right in exact arithmetic, digits lost on large scores
        safe = torch.where(use.any(dim=-1, keepdim=True), filled, torch.zeros_like(filled))
        return torch.exp(safe - torch.logsumexp(safe, dim=-1, keepdim=True)) * use
    if kind == "unstable":
        e = torch.exp(filled)
    elif kind == "max_over_all_keys":  # the maximum of the raw scores, blocked ones included
        e = torch.exp(filled - scores.amax(dim=-1, keepdim=True))
    elif kind == "where_exp":  # right values; exp overflows in the branch torch.where drops
        row_max = filled.amax(dim=-1, keepdim=True)
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
        e = torch.where(use, torch.exp(scores - row_max), torch.zeros_like(scores))
    else:
        row_max = filled.amax(dim=-1, keepdim=True)
        if kind != "nan_rows":
            row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
        e = torch.exp(filled - row_max)
    total = e.sum(dim=-1, keepdim=True)
    if kind in ("zero_fill", "finite_negative", "nan_rows", "unstable"):
        weights = e / total
    else:
        weights = e / torch.where(total > 0, total, torch.ones_like(total))
    if kind in ("after_softmax", "minus_1e4", "minus_1e9_rows_zeroed"):
        weights = weights * use
    return weights


def _masked_softmax_with_torch(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.nan_to_num(weights, nan=0.0)


def _masked_softmax_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def mask_with_both(shape):
        mask = torch.rand(shape, generator=g) < 0.5
        mask[..., 0] = True
        mask[..., -1] = False
        return mask[..., torch.randperm(shape[-1], generator=g)]

    m1 = mask_with_both((3, 5))
    m1[1] = False  # a fully masked row
    m2 = mask_with_both((2, 1, 6))
    m2[1] = False  # a whole sequence of padding
    m3 = mask_with_both((4, 4))
    m3[2] = False
    return [
        ((2.0 * torch.randn(3, 5, generator=g), m1), {}),
        ((2.0 * torch.randn(2, 4, 6, generator=g), m2), {}),
        ((200.0 + 30.0 * torch.randn(2, 4, 4, generator=g), m3), {}),  # exp overflows without the max
        ((2.0 * torch.randn(2, 3, 4, 5, generator=g), mask_with_both((4, 5))), {}),
        _huge_blocked_case(g),
        # allowed scores far below -1e4 (whole numbers: exact in float32): a finite fill leaks
        ((-30000.0 + torch.randint(-3, 4, (3, 5), generator=g).float(), mask_with_both((3, 5))), {}),
        # allowed scores far below -1e9 (-2**34 plus multiples of 2048: exact in float32): a -1e9 fill
        # leaks there even when fully masked rows are zeroed afterwards
        ((-2.0 ** 34 + 2048.0 * torch.randint(-3, 4, (3, 5), generator=g).float(), mask_with_both((3, 5))), {}),
        # the smallest the prompt allows (issue 39, item 3): one query, one key, allowed or not
        ((torch.randn(1, 1, generator=g), torch.ones(1, 1, dtype=torch.bool)), {}),
        ((torch.randn(2, 1, 1, generator=g), torch.tensor([True, False])[:, None, None]), {}),
        _float16_case(g),
    ]


def _float16_case(g):
    """float16 scores, which the prompt does not rule out (issue 39, item 2), with a fully masked
    row: exp overflows past 11 in float16 (scores up to about 30 here) without the maximum; a
    denominator clamped at 1e-30 is 0 in float16 (0 / 0 on the masked row); -1e30 is no float16."""
    scores = (10.0 + 8.0 * torch.randn(2, 3, 5, generator=g)).half()
    mask = torch.rand(2, 3, 5, generator=g) < 0.6
    mask[..., 0] = True
    mask[1, 2] = False
    return (scores, mask), {}


def _huge_blocked_case(g):
    """Scores with one blocked key per row 1e4 above the allowed ones (and a fully masked row):
    its maximum must not count, and exp of it must not overflow even in a branch left unused."""
    scores = 2.0 * torch.randn(4, 6, generator=g)
    mask = torch.ones(4, 6, dtype=torch.bool)
    blocked = torch.randperm(6, generator=g)[:4]
    mask[torch.arange(4), blocked] = False
    mask[2] = False
    scores[torch.arange(4), blocked] = 1e4
    return (scores, mask), {}


def _masked_softmax_gradient_cases(seed):
    g = torch.Generator().manual_seed(seed + 1)
    return [_huge_blocked_case(g), _huge_blocked_case(g)]


def _ms(kind):
    return functools.partial(_masked_softmax_variant, kind=kind)


MASKED_SOFTMAX = GradientExercise(
    grade_id="masking_transformer_masked_softmax",
    # The language model of this notebook trains through it: its gradients must be right too.
    make_gradient_cases=_masked_softmax_gradient_cases,
    function_name="masked_softmax",
    reference=reference.masked_softmax,
    make_cases=_masked_softmax_cases,
    output_names=("your weights",),
    forbidden=SOFTMAX_BUILTINS,
    crash_hint="scores (..., Tq, Tk) and mask (broadcastable, True = may attend): fill with "
               "scores.masked_fill(~mask, float('-inf')), take the maximum over dim=-1 with keepdim=True",
    mistakes=(
        Mistake("ignored",
                "your weights ignore the mask: blocked keys (mask False) must get weight exactly 0.",
                _ms("ignored")),
        Mistake("inverted",
                "your mask is inverted: True means the query may attend to that key, so the scores to "
                "fill with -inf are those where the mask is False (~mask).",
                _ms("inverted")),
        Mistake("after_softmax",
                "you applied the mask after the softmax (multiplying the weights by it), so the rows "
                "no longer sum to one: set the blocked scores to -inf before exponentiating.",
                _ms("after_softmax")),
        Mistake("zero_fill",
                "you set the blocked scores to 0 instead of -inf: exp(0) = 1, so blocked keys still "
                "get weight.",
                _ms("zero_fill")),
        Mistake("finite_negative",
                "you filled blocked scores with a large finite negative (like -1e9): normal rows come "
                "out right, but a fully masked row becomes uniform, spreading its weight over keys it "
                "must not see. Use -inf and give such rows zero weights.",
                _ms("finite_negative")),
        Mistake("nan_rows",
                "a fully masked row gives nan: its maximum is -inf and -inf - (-inf) is nan (and its "
                "sum is 0). Give such rows zero weights, e.g. replace a row maximum of -inf by 0 and "
                "divide by 1 where the sum is 0.",
                _ms("nan_rows")),
        Mistake("unstable",
                "your softmax overflows on large scores (exp(200) is inf in float32): subtract each "
                "row's maximum over its allowed keys before exp.",
                _ms("unstable")),
        Mistake("max_over_all_keys",
                "you subtracted the maximum over all keys, blocked ones included: one huge blocked "
                "score then pushes every allowed exp to 0; take the maximum of the filled scores "
                "(blocked at -inf), i.e. over the allowed keys only.",
                _ms("max_over_all_keys")),
        Mistake("minus_1e4",
                "you filled blocked scores with -1e4, a finite stand-in for -inf: once the allowed "
                "scores fall below -1e4 the blocked keys win the softmax; fill with float('-inf').",
                _ms("minus_1e4")),
        Mistake("minus_1e9_rows_zeroed",
                "you filled blocked scores with a large finite negative (such as -1e9) and zeroed the "
                "fully masked rows afterwards: once the allowed scores fall below the fill, the blocked "
                "keys win the softmax; fill with float('-inf').",
                _ms("minus_1e9_rows_zeroed")),
        Mistake("logsumexp",
                "you computed exp(x - logsumexp(x)): right in exact arithmetic, but on scores near -30000 "
                "float32 keeps too few digits of the logsumexp and the weights come out wrong; subtract "
                "each row's maximum over the allowed keys before exp instead (step 2).",
                _ms("logsumexp")),
        Mistake("where_exp",
                "your values are right but your gradient is nan: torch.where(mask, torch.exp(...), 0) "
                "still computes exp of the blocked scores, which overflows for a huge blocked score, "
                "and the gradient of the unused branch (0 * inf) is nan; fill the scores with -inf "
                "before exp instead.",
                _ms("where_exp")),
        Mistake("torch_softmax",
                "Your code uses torch.softmax",
                _masked_softmax_with_torch),
    ),
)


# ----------------------------------------------------------------------------------------
# masking_transformer_block: class TransformerBlock(d_model, num_heads, d_ff, norm_first=True)

ATTENTION_LINEARS = ("q_proj", "k_proj", "v_proj", "out_proj")


class _WrongBlock(nn.Module):
    """A transformer block with one catalogued mistake (`kind`); self-contained on purpose."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=None, *, kind):
        super().__init__()
        self.kind = kind
        if norm_first is None:  # left at its default: pre-norm, except in the mistake about the default
            norm_first = kind != "default_post_norm"
        self.norm_first = {"always_pre": True, "always_post": False,
                           "swapped": not norm_first}.get(kind, norm_first)
        self.attn = MaskedSelfAttention(d_model, num_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def _mlp(self, x):
        if self.kind == "no_nonlinearity":
            return self.mlp[2](self.mlp[0](x))
        return self.mlp(x)

    def forward(self, x, mask=None):
        kind = self.kind
        skip_attn = 0 if kind == "no_residual_attention" else 1
        skip_mlp = 0 if kind == "no_residual_mlp" else 1
        if kind == "mask_not_passed":
            mask = None
        if self.norm_first:
            if kind == "norm_on_stream":  # x = norm(x), then x + sublayer(x)
                x = self.norm1(x)
                x = x + self.attn(x, mask)
                x = self.norm2(x)
                return x + self._mlp(x)
            x = skip_attn * x + self.attn(self.norm1(x), mask)
            return skip_mlp * x + self._mlp(self.norm2(x))
        if kind == "norm_on_branch":  # x + norm(sublayer(x))
            x = x + self.norm1(self.attn(x, mask))
            return x + self.norm2(self._mlp(x))
        x = self.norm1(skip_attn * x + self.attn(x, mask))
        return self.norm2(skip_mlp * x + self._mlp(x))


def _wrong_block(kind):
    return functools.partial(_WrongBlock, kind=kind)


def _block_cases(seed):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for d_model, num_heads, d_ff, norm_first, B, T, mask_kind, x_scale in [
        (8, 2, 16, True, 2, 5, "causal", 2.0),
        (8, 2, 16, False, 2, 5, "causal", 2.0),
        (12, 3, 20, True, 3, 4, "padding", 2.0),
        (12, 3, 20, False, 3, 4, "padding", 2.0),
        (6, 1, 10, False, 1, 6, None, 2.0),
        (6, 2, 10, True, 2, 3, None, 2.0),
        (8, 2, 12, "default", 2, 4, "causal", 2.0),  # norm_first left out: the default is pre-norm
        # a stream of variance ~1e-4, near LayerNorm's eps = 1e-5: a LayerNorm with another eps, or
        # written by hand with eps outside the square root, shows here
        (8, 2, 16, True, 2, 5, "causal", 0.01),
        # the smallest the prompt allows (issue 39, item 3): one sentence of one token, one head
        (6, 1, 10, True, 1, 1, "causal", 2.0),
    ]:
        weights = {}
        for name in ATTENTION_LINEARS:
            weights[f"attn.{name}.weight"] = torch.randn(d_model, d_model, generator=g) / math.sqrt(d_model)
            weights[f"attn.{name}.bias"] = 0.3 * torch.randn(d_model, generator=g)
        for name in ("norm1", "norm2"):
            weights[f"{name}.weight"] = 1.0 + 0.5 * torch.randn(d_model, generator=g)
            weights[f"{name}.bias"] = 0.5 * torch.randn(d_model, generator=g)
        weights["mlp.0.weight"] = torch.randn(d_ff, d_model, generator=g) / math.sqrt(d_model)
        weights["mlp.0.bias"] = 0.3 * torch.randn(d_ff, generator=g)
        weights["mlp.2.weight"] = torch.randn(d_model, d_ff, generator=g) / math.sqrt(d_ff)
        weights["mlp.2.bias"] = 0.3 * torch.randn(d_model, generator=g)
        x = x_scale * torch.randn(B, T, d_model, generator=g) + x_scale / 2
        if mask_kind == "causal":
            mask = torch.ones(T, T, dtype=torch.bool).tril()
        elif mask_kind == "padding":
            lengths = torch.randint(1, T, (B,), generator=g)
            lengths[0] = T
            mask = (torch.arange(T)[None, :] < lengths[:, None])[:, None, :]
        else:
            mask = None
        case = {"d_model": d_model, "num_heads": num_heads, "d_ff": d_ff, "norm_first": norm_first,
                "weights": weights, "x": x, "mask": mask, "x_scale": x_scale}
        init_kwargs = {} if norm_first == "default" else {"norm_first": norm_first}
        case.update(init_args=[d_model, num_heads, d_ff], init_kwargs=init_kwargs,
                    forward_args=[x], forward_kwargs={"mask": mask}, describe=_describe(case))
        cases.append(case)
    return cases


def _describe(case):
    mask = "no mask" if case["mask"] is None else f"mask {tuple(case['mask'].shape)}"
    return (f"d_model={case['d_model']}, num_heads={case['num_heads']}, d_ff={case['d_ff']}, "
            + ("norm_first left at its default" if case["norm_first"] == "default"
               else f"norm_first={case['norm_first']}") + f", x {tuple(case['x'].shape)}"
            + ("" if case["x_scale"] == 2.0 else f" with entries of size about {case['x_scale']}") + f", {mask}")


@dataclasses.dataclass(frozen=True)
class BlockExercise(Exercise):
    """An exercise whose answer is a transformer block class `cls(d_model, num_heads, d_ff,
    norm_first=...)` with submodules `attn` (q_proj, k_proj, v_proj, out_proj), `norm1`, `norm2`
    and `mlp` (an nn.Sequential whose items 0 and 2 are the linear layers). A case gives the
    weights to copy in (by state_dict name) and the forward inputs `x`, `mask`, in the layout of
    probe.run_module."""

    runner: str = "module"
    module_hint: str = "attributes attn, norm1, norm2 and mlp = nn.Sequential(Linear, ReLU, Linear)"

    def describe_case(self, case):
        return f" ({case['describe']})"


BLOCK = BlockExercise(
    grade_id="masking_transformer_block",
    function_name="TransformerBlock",
    reference=reference.TransformerBlock,
    make_cases=_block_cases,
    output_names=("your block's output",),
    forbidden=TRANSFORMER_BUILTINS,
    crash_hint="x is (B, T, d_model); self.attn(h, mask) returns (B, T, d_model), and so does self.mlp(h)",
    mistakes=(
        Mistake("always_pre",
                "your block computes the pre-norm arrangement even when norm_first=False; post-norm "
                "adds first and normalises after: x = norm1(x + attn(x)), then x = norm2(x + mlp(x)).",
                _wrong_block("always_pre")),
        Mistake("always_post",
                "your block computes the post-norm arrangement even when norm_first=True; pre-norm "
                "normalises the sub-layer's input only: x = x + attn(norm1(x)), then x = x + mlp(norm2(x)).",
                _wrong_block("always_post")),
        Mistake("swapped",
                "your two arrangements are swapped: norm_first=True is pre-norm, x + attn(norm1(x)); "
                "norm_first=False is post-norm, norm1(x + attn(x)).",
                _wrong_block("swapped")),
        Mistake("norm_on_stream",
                "in your pre-norm block the LayerNorm replaces the residual stream (x = norm1(x), then "
                "x + attn(x)); only the sub-layer's input is normalised: x = x + attn(norm1(x)), so "
                "the skip path carries x itself.",
                _wrong_block("norm_on_stream")),
        Mistake("norm_on_branch",
                "in your post-norm block the LayerNorm is applied to the sub-layer's output before the "
                "sum (x + norm1(attn(x))); post-norm normalises the sum: norm1(x + attn(x)).",
                _wrong_block("norm_on_branch")),
        Mistake("no_residual_attention",
                "your block has no residual connection around the attention: add the sub-layer's "
                "input back, x + attn(...).",
                _wrong_block("no_residual_attention")),
        Mistake("no_residual_mlp",
                "your block has no residual connection around the MLP: add its input back, x + mlp(...).",
                _wrong_block("no_residual_mlp")),
        Mistake("no_nonlinearity",
                "your MLP has no nonlinearity: two linear layers in a row are one linear map; put the "
                "ReLU between them (self.mlp = nn.Sequential(Linear, ReLU, Linear)).",
                _wrong_block("no_nonlinearity")),
        Mistake("mask_not_passed",
                "your block does not pass the mask on to the attention, so tokens see the future "
                "(and the padding): call self.attn(h, mask).",
                _wrong_block("mask_not_passed")),
        Mistake("default_post_norm",
                "TransformerBlock(d_model, num_heads, d_ff), with norm_first left out, builds your "
                "post-norm block; the default is norm_first=True, the pre-norm arrangement.",
                _wrong_block("default_post_norm")),
    ),
)


EXERCISES = {exercise.grade_id: exercise for exercise in (CAUSAL, PADDING, MASKED_SOFTMAX, BLOCK)}


# --- masking_transformer_blocked_pairs: a think-first question. Its visible test only checks that
# `blocked_pairs` is a positive number (the number is the question): every wrong value is hidden only.
# The numbers vary by student (course_utils.grading.questions): T, the sequence's length.
BLOCKED_MISTAKES = (
    # T (T + 1) / 2 is the number of allowed pairs (the diagonal and below); it is also what
    # blocking the diagonal as well gives. Name the first, which a student counting is likelier to have
    # computed, and mention the second.
    Mistake('allowed_pairs', "that is the number of pairs the mask ALLOWS (each query with itself and the "
                             "keys before it), which is also what blocking the diagonal too gives: the "
                             "question asks for the BLOCKED pairs, the keys after each query; a query may "
                             "attend to its own position.",
                             lambda T: T * (T + 1) // 2),
    Mistake('blocked_half', "you took half of all pairs; the diagonal stays allowed, so fewer than half are "
                            "blocked.",
                            lambda T: T * T // 2),
    Mistake('blocked_both_triangles', "you blocked the keys on both sides of each query; a query may attend to the keys "
                                      "before it, only those after it are blocked.",
                                      lambda T: T * (T - 1)),
)
HIDDEN_ONLY = HIDDEN_ONLY | {mistake.name for mistake in BLOCKED_MISTAKES}
EXERCISES["masking_transformer_blocked_pairs"] = think_first(
    "masking_transformer_blocked_pairs", "blocked_pairs", lambda T: reference.causally_blocked_pairs(T),
    BLOCKED_MISTAKES, "your number of pairs")


def check(grade_id, fn):
    """Raise GradingError naming the mistake if `fn` is wrong; return None if right."""
    return _check(EXERCISES, grade_id, fn)


def diagnose(grade_id, fn):
    """Raise GradingError if `fn` crashes, breaks a rule or makes a catalogued mistake; silent on an
    uncatalogued wrong answer, which the test cell's last hidden line (`check`) then fails."""
    return _diagnose(EXERCISES, grade_id, fn)
