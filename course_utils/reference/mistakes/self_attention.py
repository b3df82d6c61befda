"""Mistake catalogue of notebook 05 (QKV self-attention).

Instructor side, as secret as the reference. `EXERCISES[grade_id]` holds, for each exercise,
the reference, the hidden test cases and the common wrong answers; the notebook's hidden
tests call `check(grade_id, student_function)`.

Why the cases look the way they do (every mistake must be told apart from the reference and
from every other mistake on them):

* softmax: all 2-D cases are square and the 3-D one a cube, so that a sum without
  `keepdims=True` broadcasts silently (the dangerous case) instead of raising. One case has rows
  at levels far apart (a row 800 below another, as a padded or masked row can be): subtracting
  the maximum of the whole array instead of each slice's underflows such a row to 0 / 0 = nan,
  the very failure section 4 of the notebook describes, so it is a mistake, not a variant.
* attention_numpy: Tq = Tk (a sequence attending to itself) so that the lecture notes' slip
  K Q^T runs instead of raising; T, d_k and d_v all differ, so sqrt(T), sqrt(d_k), d_k and
  sqrt(d_v) scalings differ.
* scaled_dot_product_attention: Tq != Tk != d_k != d_v, 3-D and 4-D inputs (a hard-coded
  dim=2 is right on 3-D, wrong on 4-D), masks of shapes (B, 1, Tk), (Tq, Tk) and
  (B, H, Tq, Tk); every mask row has an allowed and a blocked key, so the inverted mask is
  defined too. Fully masked rows are checked by the visible tests, not here, so that a
  student with a second, unrelated mistake still gets this diagnosis.
* self_attention: square projections (d_model = d_k = d_v) so that x @ W.T runs.
* scaled_dot_product_attention and self_attention are the layers later notebooks train: each is
  also backpropagated through on its first cases (`GradientExercise`; masked ones keep an
  allowed key in every row), so that an answer computed under torch.no_grad() or detached fails.

The `compute` of every mistake is a closure with everything inline, and this module imports
the references only as modules: the forbidden-API guard treats any function of
`course_utils.reference` reachable by a name in the code (even an attribute name such as the
`softmax` of `torch.softmax`) as a forbidden shortcut, and the mutation tests feed these
computes to the notebook's test cells as if a student wrote them.
"""
import math

import numpy as np
import torch

from course_utils.grading import ATTENTION_BUILTINS, SOFTMAX_BUILTINS
from course_utils.reference import mistakes as framework
from course_utils.reference.mistakes import diagnose as _diagnose
from course_utils.reference import attention as attention_reference
from course_utils.reference import self_attention as reference
from course_utils.reference.mistakes import Exercise, Mistake, ValueExercise, mask_scores
from course_utils.reference.mistakes.gradients import GradientExercise

__all__ = ["EXERCISES", "HIDDEN_ONLY", "check"]

# Mistakes only the hidden cases show. The visible tests of notebook 05 try large scores whose rows
# spread by 2 (so subtracting the minimum never overflows there) and no allowed score below -1e4,
# and a finite fill that also zeroes fully masked rows passes them.
HIDDEN_ONLY = {"subtracts_min",
               # the visible tests' large scores stay far below where np.longdouble overflows (11,356)
               "unstable_longdouble",
               # the visible tests' large scores are one row at a time, where the array's maximum is
               # the row's: only the hidden case with rows far apart shows the whole-array maximum
               "global_max",
               # the think-first question's visible test can only check that the answer is a
               # positive number: the number itself is the question
               "crossover_n_equals_d", "crossover_one_product", "crossover_three_projections",
               "crossover_one_projection"}

# A library log-sum-exp does the very thing the softmax exercise is about (subtracting the maximum
# so that nothing overflows): exp(x - logsumexp(x)) is a library softmax in two steps. The prompt
# says to build it from np.exp, np.max and np.sum; a hand-written log-sum-exp is fine.
LOGSUMEXP_SHORTCUTS = ("scipy.special:logsumexp", "torch:logsumexp", "aten::logsumexp")

# The notebook's own FLOP counters would answer the FLOPs exercise: measured, not written.
FLOP_COUNTERS = ("course_utils.widgets.self_attention:counted_flops",
                 "course_utils.widgets.self_attention:formula_flops",
                 "course_utils.widgets.self_attention:attention_flops_by_part",
                 "torch.utils.flop_counter:FlopCounterMode")


# --------------------------------------------------------------------------- 1. softmax

def softmax_cases(seed):
    rng = np.random.default_rng(seed)
    return [
        ((3.0 * rng.standard_normal((4, 4)),), {}),
        ((800.0 + 20.0 * rng.standard_normal((6, 6)),), {}),      # exp overflows without the max
        ((-900.0 + 20.0 * rng.standard_normal((4, 4)),), {}),     # exp underflows to 0 / 0
        ((2.0 * rng.standard_normal((5, 5)),), {"axis": 0}),
        ((2.0 * rng.standard_normal(7),), {}),
        ((2.0 * rng.standard_normal((3, 3, 3)),), {"axis": 1}),
        ((_wide_rows(rng),), {}),
        ((_rows_far_apart(rng),), {}),
        # 3-D with the default axis and axis=-2: code written for matrices only (x.max(axis=1)[:, None]);
        # square, so that a sum without keepdims broadcasts (and is diagnosed) rather than crashes
        ((2.0 * rng.standard_normal((4, 4, 4)),), {}),
        ((2.0 * rng.standard_normal((4, 4, 4)),), {"axis": -2}),
        # Scores near 12,000, beyond where exp overflows even np.longdouble's 80 bits (about 11,356):
        # a softmax without the maximum computed in longdouble passes every case above. Whole
        # numbers, so that a float32 answer subtracts its maximum exactly too.
        ((12000.0 + rng.integers(-4, 5, (5, 5)).astype(float),), {}),
    ]


def _rows_far_apart(rng):
    """Rows of small spread whose levels lie up to 1600 apart (a 6 x 6 square, like the other
    cases): each row alone is harmless, but exp(row - max of the whole array) is 0 for the low rows."""
    levels = np.array([0.0, -800.0, 3.0, -1600.0, -5.0, -780.0])
    return levels[:, None] + 2.0 * rng.standard_normal((6, 6))


def _wide_rows(rng):
    """Rows spread over 2000 (exp of the spread overflows) with maxima within 3 of each other
    (so subtracting the maximum of the whole array, also correct, never underflows a row);
    whole numbers, exact in float32."""
    return np.array([rng.permutation(1000.0 - np.array([0, 3, 300, 800, 1500, 2000]) + rng.integers(-2, 3, 6))
                     for _ in range(6)])


def _softmax_variant(stable=True, axis_override=None, use_exp=True, keepdims=True, whole_array=False,
                     max_keepdims=True, shift=np.max):
    def compute(x, axis=-1):
        x = np.asarray(x, dtype=np.float64)
        ax = axis if axis_override is None else axis_override
        with np.errstate(all="ignore"):
            shifted = x - shift(x, axis=ax, keepdims=max_keepdims) if stable else x
            e = np.exp(shifted) if use_exp else x
            if whole_array:
                return e / np.sum(e)
            return e / np.sum(e, axis=ax, keepdims=keepdims)
    return compute


# exp overflows np.longdouble (x87's 80-bit extended precision on x86 Linux) above log(its max).
LONGDOUBLE_EXP_LIMIT = 11356.52


def _softmax_longdouble_unstable(x, axis=-1):
    """exp(x) / sum(exp(x)) in np.longdouble, without the maximum, written out in float64 so that it
    means the same where np.longdouble is only float64: right while every score stays below about
    11,356; a slice with a larger score gives nan at those scores and 0 elsewhere (inf / inf, x / inf)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        right = e / np.sum(e, axis=axis, keepdims=True)
    over = x > LONGDOUBLE_EXP_LIMIT
    slice_over = np.any(over, axis=axis, keepdims=True)
    return np.where(slice_over, np.where(over, np.nan, 0.0), right)


def _softmax_with_torch(x, axis=-1):
    return torch.softmax(torch.as_tensor(np.asarray(x, dtype=np.float64)), dim=axis).numpy()


SOFTMAX_MISTAKES = (
    Mistake(
        "unstable",
        "your softmax overflows on large scores (exp(800) is inf, and inf / inf is nan): "
        "subtract the maximum of each slice before exp.",
        _softmax_variant(stable=False),
    ),
    Mistake(
        "unstable_longdouble",
        "your softmax does not subtract the maximum, and a wider float only moves the overflow: "
        "exp(x) is inf in np.longdouble too once a score passes about 11,356 (exp(12000) / its sum "
        "is inf / inf = nan). Subtract the maximum of each slice before exp; then every exponent is <= 0.",
        _softmax_longdouble_unstable,
    ),
    Mistake(
        "subtracts_min",
        "you subtracted the minimum of each slice instead of its maximum: exp(x - min) overflows "
        "once a slice spreads over more than about 709; only x - max keeps every exponent <= 0.",
        _softmax_variant(shift=np.min),
    ),
    Mistake(
        "global_max",
        "you subtracted the maximum of the whole array, not of each slice along `axis`: a slice whose "
        "values all lie far (more than about 745) below the array's maximum underflows to 0 / 0 = nan. "
        "Take the maximum with np.max(x, axis=axis, keepdims=True).",
        _softmax_variant(shift=lambda x, axis, keepdims: np.max(x)),
    ),
    Mistake(
        "ignores_axis",
        "your softmax ignores the `axis` argument and always normalises over the last axis.",
        _softmax_variant(axis_override=-1),
    ),
    Mistake(
        "axis_0",
        "your softmax normalises over axis 0 (down the columns) instead of over the axis it is given.",
        _softmax_variant(axis_override=0),
    ),
    Mistake(
        "no_exp",
        "you divided x by its sum without taking exp first: softmax is exp(x) / sum(exp(x)).",
        _softmax_variant(stable=False, use_exp=False),
    ),
    Mistake(
        "no_keepdims",
        "you summed without keepdims=True, so NumPy broadcast the sums along the wrong axis: "
        "pass keepdims=True to np.sum (and np.max).",
        _softmax_variant(keepdims=False),
    ),
    Mistake(
        "no_keepdims_anywhere",
        "you took the maximum and the sum without keepdims=True, so NumPy broadcast them along the "
        "wrong axis: pass keepdims=True to np.max and np.sum.",
        _softmax_variant(keepdims=False, max_keepdims=False),
    ),
    Mistake(
        "whole_array_sum",
        "you divided by the sum of the whole array instead of the sum along `axis`, "
        "so each slice does not sum to one.",
        _softmax_variant(whole_array=True),
    ),
    Mistake(
        "torch_softmax",
        "Your code uses torch.softmax",
        _softmax_with_torch,
    ),
)


# --------------------------------------------------------------------------- 2. attention_numpy

def attention_numpy_cases(seed):
    rng = np.random.default_rng(seed)

    def qkv(T, d_k, d_v, size=1.0):
        return (size * rng.standard_normal((T, d_k)), size * rng.standard_normal((T, d_k)),
                rng.standard_normal((T, d_v)))

    return [
        (qkv(5, 3, 7), {}),
        (qkv(4, 6, 2), {}),
        (qkv(6, 9, 4), {}),
        (qkv(5, 3, 4, size=40.0), {}),  # scores in the hundreds: exp overflows without the max
    ]


def _attention_numpy_variant(scale="sqrt_dk", scores_kq=False, axis=-1, stable=True, swap_outputs=False,
                             shift=np.max):
    def compute(Q, K, V):
        Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
        divisor = {
            "sqrt_dk": math.sqrt(Q.shape[-1]),
            "none": 1.0,
            "dk": float(Q.shape[-1]),
            "sqrt_dv": math.sqrt(V.shape[-1]),
            "sqrt_T": math.sqrt(K.shape[0]),
        }[scale]
        scores = (K @ Q.T if scores_kq else Q @ K.T) / divisor
        with np.errstate(all="ignore"):
            shifted = scores - shift(scores, axis=axis, keepdims=True) if stable else scores
            e = np.exp(shifted)
            weights = e / np.sum(e, axis=axis, keepdims=True)
        output = weights @ V
        return (weights, output) if swap_outputs else (output, weights)
    return compute


ATTENTION_NUMPY_MISTAKES = (
    Mistake(
        "no_scaling",
        "your output equals attention with unscaled scores: did you divide Q K^T by sqrt(d_k)?",
        _attention_numpy_variant(scale="none"),
    ),
    Mistake(
        "scaled_by_dk",
        "you divided the scores by d_k instead of sqrt(d_k).",
        _attention_numpy_variant(scale="dk"),
    ),
    Mistake(
        "scaled_by_sqrt_dv",
        "you divided the scores by sqrt(d_v), the size of the values: the scale is sqrt(d_k), "
        "the size of the queries and keys (Q.shape[-1]).",
        _attention_numpy_variant(scale="sqrt_dv"),
    ),
    Mistake(
        "scaled_by_sqrt_T",
        "you divided the scores by the square root of the number of tokens (K.shape[0]) "
        "instead of sqrt(d_k) = sqrt(Q.shape[-1]).",
        _attention_numpy_variant(scale="sqrt_T"),
    ),
    Mistake(
        "scores_kq",
        "you computed K Q^T instead of Q K^T: your score matrix is transposed, with a row per "
        "key instead of a row per query.",
        _attention_numpy_variant(scores_kq=True),
    ),
    Mistake(
        "softmax_over_queries",
        "your weights are a softmax over the query axis: each column sums to one instead of each row "
        "(use axis=-1, over the keys).",
        _attention_numpy_variant(axis=0),
    ),
    Mistake(
        "unstable_softmax",
        "your attention overflows on large scores (exp of a large score is inf, and inf / inf is nan): "
        "use your stable softmax, or subtract each row's maximum before exp.",
        _attention_numpy_variant(stable=False),
    ),
    Mistake(
        "subtracts_min",
        "your softmax subtracts each row's minimum instead of its maximum: exp(score - min) "
        "overflows once a row's scores spread over more than about 709; subtract the maximum.",
        _attention_numpy_variant(shift=np.min),
    ),
    Mistake(
        "outputs_swapped",
        "you returned (weights, output): return the output first, then the weights.",
        _attention_numpy_variant(swap_outputs=True),
    ),
)


# --------------------------------------------------------------------------- 3. scaled_dot_product_attention

def _mask_with_both(shape, generator):
    """A random boolean mask whose every row (last axis) has an allowed and a blocked key."""
    mask = torch.rand(shape, generator=generator) < 0.5
    last = shape[-1]
    mask[..., 0] = True
    mask[..., last - 1] = False
    # shuffle the columns so the guaranteed entries are not always first and last
    perm = torch.randperm(last, generator=generator)
    return mask[..., perm]


def sdpa_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def qkv(lead, Tq, Tk, d_k, d_v):
        return (torch.randn(*lead, Tq, d_k, generator=g, dtype=torch.float64),
                torch.randn(*lead, Tk, d_k, generator=g, dtype=torch.float64),
                torch.randn(*lead, Tk, d_v, generator=g, dtype=torch.float64))

    return [
        (qkv((2,), 3, 5, 4, 6), {}),
        (qkv((2, 3), 4, 6, 5, 7), {}),
        (qkv((2,), 3, 5, 4, 6), {"mask": _mask_with_both((2, 1, 5), g)}),
        (qkv((2, 3), 4, 6, 5, 7), {"mask": _mask_with_both((4, 6), g)}),
        (qkv((2, 3), 4, 6, 5, 7), {"mask": _mask_with_both((2, 3, 4, 6), g)}),
        (_far_below_minus_1e4(g), {"mask": _mask_with_both((2, 1, 5), g)}),
        (_zero_query(qkv((2,), 3, 5, 4, 6)), {"mask": _mask_with_both((2, 3, 5), g)}),
        # Scores in the thousands, whole numbers (exact in float32): exp overflows without the
        # maximum subtracted (issue 39, item 1).
        (_huge_scores(g), {}),
        # float16, which the prompt does not rule out (issue 39, item 2), with a fully masked query:
        # -1e9 is no float16 number, and exp overflows past 11 there without the maximum
        _float16_case(qkv((2,), 3, 5, 4, 6), _mask_with_both((2, 3, 5), g)),
    ]


def _float16_case(qkv, mask):
    q, k, v = qkv
    mask[1, 2] = False  # a query with no key to attend to
    return (tuple(t.half() for t in (4.0 * q, 2.0 * k, v)), {"mask": mask})


def _huge_scores(g):
    q = 20.0 * torch.randint(-5, 6, (2, 3, 4), generator=g).to(torch.float64)
    k = 20.0 * torch.randint(-5, 6, (2, 5, 4), generator=g).to(torch.float64)
    return q, k, torch.randn(2, 5, 3, generator=g, dtype=torch.float64)


def _zero_query(qkv):
    """Query 1 is all zeros, so its allowed scores are exactly 0: code that masks by multiplying the
    scores by the mask and then fills the zeros with -inf blocks every key of that query."""
    q, k, v = qkv
    q[..., 1, :] = 0.0
    return q, k, v


def _far_below_minus_1e4(g):
    """q, k, v whose scores all lie far below -1e4 (whole-number q and k, d_k = 4: the scores
    are exact in float32), where a finite fill such as -1e4 beats every allowed key."""
    q = 100.0 + torch.randint(-5, 6, (2, 3, 4), generator=g).double()
    k = -100.0 + torch.randint(-5, 6, (2, 5, 4), generator=g).double()
    return q, k, torch.randn(2, 5, 6, generator=g, dtype=torch.float64)


def _sdpa_variant(scale="sqrt_dk", dim=-1, mask_mode="-inf"):
    def compute(q, k, v, mask=None):
        divisor = {"sqrt_dk": math.sqrt(q.shape[-1]), "none": 1.0, "dk": float(q.shape[-1])}[scale]
        scores = q @ k.transpose(-2, -1) / divisor
        if mask_mode == "-1e4":  # a finite stand-in for -inf
            scores, after = (scores if mask is None else scores.masked_fill(~mask, -1e4)), None
        else:
            scores, after = mask_scores(scores, mask, mask_mode)
        weights = torch.softmax(scores, dim=dim)
        if after is not None:
            weights = weights * after
        return weights @ v, weights
    return compute


def _sdpa_with_builtin(q, k, v, mask=None):
    output = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return output, torch.softmax(scores, dim=-1)


SDPA_MISTAKES = (
    Mistake(
        "no_scaling",
        "your output equals attention with unscaled scores: did you divide q k^T by sqrt(d_k)?",
        _sdpa_variant(scale="none"),
    ),
    Mistake(
        "scaled_by_dk",
        "you divided the scores by d_k instead of sqrt(d_k).",
        _sdpa_variant(scale="dk"),
    ),
    Mistake(
        "softmax_over_queries",
        "your weights are a softmax over the query axis (dim=-2): each column sums to one instead "
        "of each row; use dim=-1, the key axis.",
        _sdpa_variant(dim=-2),
    ),
    Mistake(
        "softmax_dim_2",
        "your softmax uses dim=2, which is the key axis only for 3-D scores (B, Tq, Tk): on "
        "(B, heads, Tq, Tk) it is the query axis; use dim=-1.",
        _sdpa_variant(dim=2),
    ),
    Mistake(
        "mask_ignored",
        "your output ignores the mask: set the scores of blocked keys (mask False) to -inf before the softmax.",
        _sdpa_variant(mask_mode="ignored"),
    ),
    Mistake(
        "mask_inverted",
        "your mask is inverted: True means the query may attend to that key (as in "
        "F.scaled_dot_product_attention), so fill the scores where the mask is False.",
        _sdpa_variant(mask_mode="inverted"),
    ),
    Mistake(
        "mask_after_softmax",
        "you zeroed the blocked weights after the softmax, so the rows no longer sum to one: "
        "mask the scores with -inf before the softmax instead.",
        _sdpa_variant(mask_mode="after"),
    ),
    Mistake(
        "masked_with_zero",
        "you set blocked scores to 0 instead of -inf: exp(0) = 1, so blocked keys still get weight.",
        _sdpa_variant(mask_mode="zero"),
    ),
    Mistake(
        "masked_with_minus_1e4",
        "you filled blocked scores with -1e4, a finite stand-in for -inf: once the allowed scores "
        "fall below -1e4 the blocked keys win the softmax; fill with float('-inf').",
        _sdpa_variant(mask_mode="-1e4"),
    ),
    Mistake(
        "builtin_sdpa",
        "Your code uses torch.nn.functional.scaled_dot_product_attention",
        _sdpa_with_builtin,
    ),
)


# --------------------------------------------------------------------------- 4. self_attention

def self_attention_cases(seed):
    g = torch.Generator().manual_seed(seed)
    d = 6

    def weights():
        return tuple(torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d) for _ in range(3))

    def x(*shape):
        return torch.randn(*shape, d, generator=g, dtype=torch.float64)

    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    return [
        ((x(2, 5),) + weights(), {}),
        ((x(2, 5),) + weights(), {"mask": causal}),
        ((x(3, 4),) + weights(), {"mask": _mask_with_both((3, 1, 4), g)}),
        ((x(2, 3, 4),) + weights(), {}),
        ((x(2, 5),) + weights(), {"mask": _causal_with_blocked_query(5)}),
    ]


def _causal_with_blocked_query(T):
    """A causal mask whose query 2 may attend to no key: its weights and output are zeros, as the
    scaled_dot_product_attention the exercise calls gives them (not nan)."""
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    mask[2] = False
    return mask


def _self_attention_variant(projection="x@W", roles=("q", "k", "v"), pass_mask=True):
    def attend(q, k, v, mask):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights

    def compute(x, W_q, W_k, W_v, mask=None):
        W = {"q": W_q, "k": W_k, "v": W_v, "x": None}

        def project(role):
            if role == "x":
                return x
            return x @ (W[role].T if projection == "x@W.T" else W[role])

        q, k, v = (project(role) for role in roles)
        return attend(q, k, v, mask if pass_mask else None)
    return compute


SELF_ATTENTION_MISTAKES = (
    Mistake(
        "q_k_swapped",
        "your queries and keys are swapped (queries from W_k, keys from W_q), so your weights are "
        "the transpose of the right ones: q = x @ W_q, k = x @ W_k.",
        _self_attention_variant(roles=("k", "q", "v")),
    ),
    Mistake(
        "transposed_projections",
        "you projected with the transposed matrices (x @ W.T, the nn.Linear layout): here "
        "W_q, W_k, W_v have shape (d_model, d_k) and the projections are x @ W.",
        _self_attention_variant(projection="x@W.T"),
    ),
    Mistake(
        "no_value_projection",
        "you forgot the value projection: the values are x @ W_v, not x itself.",
        _self_attention_variant(roles=("q", "k", "x")),
    ),
    Mistake(
        "values_from_W_k",
        "your values come from W_k: the values are x @ W_v.",
        _self_attention_variant(roles=("q", "k", "k")),
    ),
    Mistake(
        "mask_not_passed",
        "you did not pass the mask on to scaled_dot_product_attention, so masked keys still get weight.",
        _self_attention_variant(pass_mask=False),
    ),
)


# What to suggest when a student's function raises on a hidden case instead of returning.
# --------------------------------------------------------------------------- 5. attention_flops

def flops_cases(seed):
    """n != d everywhere (so swapping them shows), with and without the projections, and the
    lectures' n = d = 1000 (where a swap cannot show, but every other mistake does)."""
    rng = np.random.default_rng(seed)
    n, d = (int(v) for v in rng.integers(3, 40, size=2))
    d = d + 1 if d == n else d
    return [((7, 5), {}), ((12, 3), {"projections": False}), ((4, 9), {"projections": True}),
            ((n, d), {}), ((1000, 1000), {}), ((2, 11), {"projections": False}),
            # a count beyond 2^53: exact in Python ints, rounded by a formula computed in floats
            # (math.pow, ** 2.0, n * n * 1.0) and cast back with int()
            ((10**8 + 1, 7), {}),
            # beyond 2^63 (4 n^2 d = 4e22): a NumPy int64 product wraps around to a wrong number
            # (issue 39, item 3); Python ints do not
            ((10**10 + 3, 64), {})]


def _flops_variant(factor=2, products=2, projection_count=4, swap=False, count_projections="as asked"):
    def attention_flops(n, d, projections=True):
        if swap:
            n, d = d, n
        counted = {"as asked": projections, "never": False, "always": True}[count_projections]
        return factor * (products * n * n * d + (projection_count * n * d * d if counted else 0))
    return attention_flops


FLOPS_MISTAKES = (
    Mistake("multiply_adds", "that is the number of multiply-adds: each one is 2 FLOPs (a multiply and an add).",
            _flops_variant(factor=1)),
    Mistake("one_product", "you counted the scores Q K^T but not the weighted sum of the values A V, "
                           "which costs as much (n x n x d multiply-adds).",
            _flops_variant(products=1)),
    Mistake("three_projections", "you counted W_Q, W_K and W_V but not the output projection W_O: "
                                 "four d x d projections in all.",
            _flops_variant(projection_count=3)),
    Mistake("no_projections", "you left out the projections: with projections=True the four n x d x d "
                              "products count too (a count of 4 * 10^9 at n = d = 1000 makes the same slip).",
            _flops_variant(count_projections="never")),
    Mistake("projections_always", "you counted the projections even with projections=False.",
            _flops_variant(count_projections="always")),
    Mistake("swapped", "you swapped n and d: the scores are n x n dot products of length d (n^2 d), "
                       "a projection is n rows times a d x d matrix (n d^2).",
            _flops_variant(swap=True)),
)

CROSSOVER_MISTAKES = (
    # Diagnoses may be shown before the deadline (Gradescope's --visibility visible): each names the
    # mistake, never the balance of the two terms nor the length it gives (that is the question).
    Mistake("crossover_n_equals_d", "you set n = d, as if the layer had one n^2 d term and one n d^2 term: "
                                    "count how many n x n products and how many d x d projections it has.",
            1000),
    Mistake("crossover_one_product", "you counted one n x n product, the scores Q K^T; the weighted sum "
                                     "A V is an n x n product too.",
            4000),
    Mistake("crossover_three_projections", "you counted the three projections of exercise 4's layer; the layer "
                                           "counted here also has the output projection W_O.",
            1500),
    Mistake("crossover_one_projection", "you set the n x n products against a single projection; the layer "
                                        "projects with W_Q, W_K, W_V and W_O.",
            500),
)


_CRASH_HINTS = {
    "self_attention_softmax": "it should accept an array of any shape and an `axis` (e.g. axis=0 "
                              "on a 2-D array, or axis=1 on a 3-D one)",
    "self_attention_attention_numpy": "Q is (Tq, d_k), K is (Tk, d_k), V is (Tk, d_v); the scores "
                                      "are Q @ K.T of shape (Tq, Tk)",
    "self_attention_sdpa_torch": "it must work for any number of leading batch/head dimensions "
                                 "and Tq != Tk: transpose only the last two dimensions of k "
                                 "(k.transpose(-2, -1), not k.T or k.transpose(1, 2)) and take the "
                                 "softmax over dim=-1",
    "self_attention_self_attention": "x is (..., T, d_model) and W_q, W_k, W_v are (d_model, d_k): "
                                     "project with x @ W, then call your scaled_dot_product_attention",
}


EXERCISES = {
    exercise.grade_id: exercise
    for exercise in (
        Exercise(
            grade_id="self_attention_softmax",
            function_name="softmax",
            reference=reference.softmax,
            make_cases=softmax_cases,
            mistakes=SOFTMAX_MISTAKES,
            forbidden=SOFTMAX_BUILTINS + LOGSUMEXP_SHORTCUTS + ("course_utils.grading.parts:softmax",),
            output_names=("your softmax",),
            atol=1e-8,
            rtol=1e-6,
            crash_hint=_CRASH_HINTS["self_attention_softmax"],
        ),
        Exercise(
            grade_id="self_attention_attention_numpy",
            function_name="attention_numpy",
            reference=reference.attention_numpy,
            make_cases=attention_numpy_cases,
            mistakes=ATTENTION_NUMPY_MISTAKES,
            forbidden=SOFTMAX_BUILTINS + LOGSUMEXP_SHORTCUTS + ATTENTION_BUILTINS,
            output_names=("your output", "your weights"),
            earlier=("softmax",),  # its prompt: "use your softmax from exercise 1"
            atol=1e-8,
            rtol=1e-6,
            crash_hint=_CRASH_HINTS["self_attention_attention_numpy"],
        ),
        GradientExercise(
            grade_id="self_attention_sdpa_torch",
            function_name="scaled_dot_product_attention",
            make_gradient_cases=lambda seed: sdpa_cases(seed)[:3],
            reference=attention_reference.scaled_dot_product_attention,
            make_cases=sdpa_cases,
            mistakes=SDPA_MISTAKES,
            forbidden=ATTENTION_BUILTINS,
            output_names=("your output", "your weights"),
            atol=1e-6,
            rtol=1e-5,
            crash_hint=_CRASH_HINTS["self_attention_sdpa_torch"],
        ),
        GradientExercise(
            grade_id="self_attention_self_attention",
            function_name="self_attention",
            make_gradient_cases=lambda seed: self_attention_cases(seed)[:2],
            reference=reference.self_attention,
            make_cases=self_attention_cases,
            mistakes=SELF_ATTENTION_MISTAKES,
            forbidden=ATTENTION_BUILTINS,
            output_names=("your output", "your weights"),
            atol=1e-6,
            rtol=1e-5,
            crash_hint=_CRASH_HINTS["self_attention_self_attention"],
        ),
        Exercise(
            grade_id="self_attention_flops",
            function_name="attention_flops",
            reference=reference.attention_flops,
            make_cases=flops_cases,
            mistakes=FLOPS_MISTAKES,
            forbidden=FLOP_COUNTERS,
            output_names=("your FLOP count",),
            atol=0.0,
            rtol=0.0,
            crash_hint="n and d are ints and projections a bool; return an int, 2 FLOPs per multiply-add",
        ),
        ValueExercise(
            grade_id="self_attention_crossover",
            function_name="crossover_n",
            reference=reference.crossover_length(),
            make_cases=lambda seed: [((), {})],
            mistakes=CROSSOVER_MISTAKES,
            output_names=("your length n",),
            atol=0.0,
            rtol=0.0,
        ),
    )
}

def check(grade_id, student_fn):
    """The hidden test of one exercise: GradingError naming the mistake, or None when right."""
    return framework.check(EXERCISES, grade_id, student_fn)


def diagnose(grade_id, fn):
    """Raise GradingError if `fn` crashes, breaks a rule or makes a catalogued mistake; silent on an
    uncatalogued wrong answer, which the test cell's last hidden line (`check`) then fails."""
    return _diagnose(EXERCISES, grade_id, fn)
