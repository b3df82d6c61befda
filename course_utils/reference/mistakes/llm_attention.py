"""Mistake catalogue of notebook 13 (attention as today's LLMs run it).

Instructor side, as secret as the reference. Every mistake is a self-contained function with
the exercise's signature (only torch and math: the forbidden-API guard treats any other
function of `course_utils.reference` as the answer).

Why the cases look the way they do (every mistake must differ from the reference and from
every other mistake on them; tests/reference/test_llm_attention_reference.py checks both):

* grouped_query_attention: groups of 2 and 3 query heads per kv head with h_kv > 1 (grouping
  with `repeat`, head i -> i % h_kv, differs from `repeat_interleave` only there), h_kv = h
  (plain multi-head) and h_kv = 1 (multi-query); T_q < T_k with causal=True, including one new
  query after a cache (a mask aligned to the start hides the cached keys), T_q = T_k, and a
  non-causal case with T_q != T_k; d differs from h * d (a scale by sqrt(h * d) shows).
* sliding_window_mask: T_q < T_k (start-aligned shows), T_q = 1 (a generation step), windows of
  1, 2, 3 and one larger than T_k (then it is the causal mask), T_q = T_k. Masks are compared as
  booleans (a float mask of ones and zeros is named as such).
* rolling_cache_append: an empty cache with a prompt longer than the window (keep the prompt's
  last `window`), a full cache and one new token (the generation step), a cache not yet full
  that stays under the window, windows of 1 and of exactly T_c + T_new, and d different from
  every window (so that trimming `[..., -window:]`, the feature axis, shows).
* attention_backward: float64, B and h above 1 in some cases, causal and not, T = 1, d of 2, 4
  and 8, `out` and `lse` computed from q, k, v exactly as a forward would save them; grad_out
  random (so that D = rowsum(dO * O) is far from 0). Then cases whose lse is shifted (one
  constant per row) and whose out is perturbed: the exercise is to use what the forward saved,
  and only there does an answer that recomputes the softmax from q and k, or D as
  rowsum(P * dP), give other gradients than the formulas.
* rms_norm: 2-, 3- and 4-D inputs, random weights (not ones), non-zero means (LayerNorm's
  centring shows), eps of 0.1 and 1 on small inputs (eps outside the square root shows; with
  eps = 1e-6 it would not).
* swiglu: d != f everywhere (so w_gate, w_up and w_down cannot be swapped silently), inputs of
  both signs (relu and silu differ on negative gates).
* the think-first cache size: a number, every catalogued slip a different one.
"""
import math

import torch

from course_utils.grading import ATTENTION_BUILTINS, AUTOGRAD_BUILTINS
from course_utils.reference import llm_attention as reference
from course_utils.reference.mistakes import Exercise, Mistake, think_first
from course_utils.reference.mistakes import check as _check
from course_utils.reference.mistakes import diagnose as _diagnose
from course_utils.reference.mistakes.masking_transformer import MaskExercise

__all__ = ["EXERCISES", "HIDDEN_ONLY", "check", "diagnose"]

# The think-first question's visible test can only check that the answer is a positive number:
# the number itself is the question. (The notebook's visible tests must fail every other mistake;
# extend this set, with a reason, for any they cannot see.)
HIDDEN_ONLY = {"guess_no_k_and_v", "guess_query_heads", "guess_float32", "guess_gb", "guess_mib",
               "guess_one_layer", "guess_one_byte", "guess_causal_half"}

DT = torch.float64

NORM_BUILTINS = (
    "torch.nn.functional:rms_norm",
    "torch:rms_norm",
    "torch.nn:RMSNorm",
    "torch.nn.functional:layer_norm",
    "torch:layer_norm",
    "torch.nn:LayerNorm",
)


def _randn(g, *shape):
    return torch.randn(*shape, generator=g, dtype=DT)


# --- llm_attention_gqa: grouped_query_attention(q, k, v, causal=True) ------------------------

def _gqa_variant(q, k, v, causal=True, *, grouping="interleave", align="end", scale="d", softmax_dim=-1,
                 mask=True, stable=True):
    h, h_kv, d = q.shape[1], k.shape[1], q.shape[-1]
    group = h // h_kv
    if grouping == "interleave":
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    else:  # head i reads kv head i % h_kv
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    divisor = {"d": math.sqrt(d), "none": 1.0, "h*d": math.sqrt(h * d)}[scale]
    scores = q @ k.transpose(-2, -1) / divisor
    T_q, T_k = q.shape[-2], k.shape[-2]
    if causal and mask:
        offset = T_k - T_q if align == "end" else 0
        allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=offset)
        scores = scores.masked_fill(~allowed, float("-inf"))
    if stable:
        return torch.softmax(scores, dim=softmax_dim) @ v
    e = torch.exp(scores)  # no maximum subtracted: exp(89) is past float32's largest number
    return e / e.sum(softmax_dim, keepdim=True) @ v


def gqa_repeat_not_interleave(q, k, v, causal=True):
    return _gqa_variant(q, k, v, causal, grouping="repeat")


def gqa_mask_start_aligned(q, k, v, causal=True):
    return _gqa_variant(q, k, v, causal, align="start")


def gqa_no_scaling(q, k, v, causal=True):
    return _gqa_variant(q, k, v, causal, scale="none")


def gqa_scaled_by_model_width(q, k, v, causal=True):
    return _gqa_variant(q, k, v, causal, scale="h*d")


def gqa_softmax_over_queries(q, k, v, causal=True):
    return _gqa_variant(q, k, v, causal, softmax_dim=-2)


def gqa_causal_ignored(q, k, v, causal=True):
    return _gqa_variant(q, k, v, causal, mask=False)


def gqa_softmax_unstable(q, k, v, causal=True):
    return _gqa_variant(q, k, v, causal, stable=False)


def gqa_default_not_causal(q, k, v, causal=False):
    return _gqa_variant(q, k, v, causal)


def _gqa_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def qkv(B, h, h_kv, T_q, T_k, d):
        return _randn(g, B, h, T_q, d), _randn(g, B, h_kv, T_k, d), _randn(g, B, h_kv, T_k, d)

    return [
        (qkv(2, 4, 2, 5, 5, 4), {}),  # groups of 2, a square causal prompt (default causal=True)
        (qkv(1, 6, 2, 1, 7, 4), {"causal": True}),  # one new query after 6 cached keys, groups of 3
        (qkv(2, 6, 3, 3, 8, 2), {"causal": True}),  # three new queries after 5 cached keys
        (qkv(1, 3, 3, 4, 6, 4), {"causal": True}),  # h_kv = h: plain multi-head attention
        (qkv(2, 4, 1, 4, 6, 3), {"causal": False}),  # h_kv = 1: multi-query, no mask, T_q != T_k
        (qkv(1, 8, 2, 2, 9, 4), {"causal": False}),  # groups of 4, no mask
        (qkv(1, 4, 2, 3, 3, 4), {"causal": False}),  # square and not causal
        (qkv(1, 2, 1, 1, 1, 2), {}),  # one query, one key
        # float32 scores around 100 (exp overflows past 88.7): a softmax without its maximum gives nan
        (tuple((7.0 + 0.5 * t).float() for t in qkv(1, 4, 2, 5, 5, 4)), {"causal": True}),
        (tuple((7.0 + 0.5 * t).float() for t in qkv(1, 2, 2, 2, 6, 4)), {}),
    ]


GQA = Exercise(
    grade_id="llm_attention_gqa",
    function_name="grouped_query_attention",
    reference=reference.grouped_query_attention,
    make_cases=_gqa_cases,
    output_names=("your output",),
    forbidden=ATTENTION_BUILTINS,
    atol=1e-6,
    rtol=1e-5,
    crash_hint="q is (B, h, T_q, d), k and v (B, h_kv, T_k, d) with h a multiple of h_kv; repeat each kv "
               "head h // h_kv times along dim 1 (repeat_interleave) and build the causal mask with "
               "T_q rows and T_k columns",
    mistakes=(
        Mistake("repeat_not_interleave",
                "query head i reads key/value head i % h_kv in your code (k.repeat(1, g, 1, 1) puts the "
                "kv heads in turn: 0, 1, 0, 1, ...). The heads are grouped: query heads 0 .. g-1 share kv "
                "head 0, the next g share kv head 1 (i // g), which is what "
                "k.repeat_interleave(g, dim=1) gives.",
                gqa_repeat_not_interleave),
        Mistake("mask_start_aligned",
                "your causal mask is aligned to the first key (tril() of a T_q x T_k matrix): with a "
                "cache, the T_q queries are the LAST T_q positions, so query t sits at position "
                "T_k - T_q + t and sees every key up to there; one new query sees all the keys. Use "
                "tril(diagonal=T_k - T_q).",
                gqa_mask_start_aligned),
        Mistake("no_scaling",
                "your scores are not divided by sqrt(d), the head dimension (q.shape[-1]).",
                gqa_no_scaling),
        Mistake("scaled_by_model_width",
                "you divided the scores by sqrt(h * d), the width of all heads together; each head's "
                "scores are divided by sqrt(d) of that head (q.shape[-1]).",
                gqa_scaled_by_model_width),
        Mistake("softmax_over_queries",
                "your softmax runs over the queries (dim=-2): each query's weights over the keys must sum "
                "to one, so take it over the last axis (dim=-1).",
                gqa_softmax_over_queries),
        Mistake("causal_ignored",
                "with causal=True a query must not see keys after its own position: your output ignores "
                "the causal mask.",
                gqa_causal_ignored),
        Mistake("softmax_unstable",
                "your softmax overflows: with float32 scores around 100, exp(score) is past float32's "
                "largest number (about 3.4e38, exp(88.7)) and inf / inf gives nan. Subtract each row's "
                "maximum before exp (torch.softmax does it for you).",
                gqa_softmax_unstable),
        Mistake("default_not_causal",
                "called without `causal`, your function does not mask: the signature's default is "
                "causal=True (grouped_query_attention(q, k, v) is causal).",
                gqa_default_not_causal),
    ),
)


# --- llm_attention_sliding_window_mask: sliding_window_mask(T_q, T_k, window) ----------------

def _window_variant(T_q, T_k, window, *, lower="strict", causal=True, align="end", inverted=False,
                    as_float=False):
    offset = T_k - T_q if align == "end" else 0
    pos = torch.arange(T_q)[:, None] + offset
    p = torch.arange(T_k)[None, :]
    if lower == "strict":
        allowed = p > pos - window
    elif lower == "inclusive":  # window + 1 keys
        allowed = p >= pos - window
    else:  # window - 1 keys
        allowed = p > pos - window + 1
    if causal:
        allowed = allowed & (p <= pos)
    if inverted:
        allowed = ~allowed
    return allowed.double() if as_float else allowed


def window_one_too_many(T_q, T_k, window):
    return _window_variant(T_q, T_k, window, lower="inclusive")


def window_one_too_few(T_q, T_k, window):
    return _window_variant(T_q, T_k, window, lower="minus_one")


def window_not_causal(T_q, T_k, window):
    return _window_variant(T_q, T_k, window, causal=False)


def window_start_aligned(T_q, T_k, window):
    return _window_variant(T_q, T_k, window, align="start")


def window_inverted(T_q, T_k, window):
    return _window_variant(T_q, T_k, window, inverted=True)


def window_float_mask(T_q, T_k, window):
    return _window_variant(T_q, T_k, window, as_float=True)


def window_long_shortcut_start_aligned(T_q, T_k, window):
    if window >= T_k:  # "then it is the causal mask", but built for a square prompt
        return torch.ones(T_q, T_k, dtype=torch.bool).tril()
    return _window_variant(T_q, T_k, window)


def _window_cases(seed):
    # (T_q, T_k, window), every shape the prompt allows (1 <= T_q <= T_k, window >= 1) and its
    # corners: a prompt, generation steps with a cache, windows of 1, of T_k - 1, exactly T_k and
    # wider than T_k, each with T_q = T_k and with T_q < T_k (a window at least T_k is the causal
    # mask aligned to the END), one query and one key
    return [((6, 6, 3), {}), ((1, 9, 4), {}), ((3, 8, 2), {}), ((4, 4, 10), {}), ((5, 7, 1), {}),
            ((2, 12, 5), {}), ((3, 7, 7), {}), ((2, 5, 9), {}), ((1, 6, 6), {}), ((4, 8, 7), {}),
            ((5, 5, 5), {}), ((1, 1, 1), {}), ((1, 1, 3), {})]


WINDOW_MASK = MaskExercise(
    grade_id="llm_attention_sliding_window_mask",
    function_name="sliding_window_mask",
    reference=reference.sliding_window_mask,
    make_cases=_window_cases,
    output_names=("your sliding-window mask",),
    atol=0.0,
    rtol=0.0,
    crash_hint="return a (T_q, T_k) bool tensor; query t sits at position T_k - T_q + t",
    mistakes=(
        Mistake("one_too_many",
                "each query sees window + 1 keys in your mask (pos - window <= p): it sees itself and the "
                "window - 1 keys before it, pos - window < p <= pos.",
                window_one_too_many),
        Mistake("one_too_few",
                "each query sees only window - 1 keys in your mask: it sees itself and the window - 1 keys "
                "before it (window keys in all), pos - window < p <= pos.",
                window_one_too_few),
        Mistake("not_causal",
                "your mask lets a query see keys after its own position (the future): a sliding window is "
                "causal too, p <= pos.",
                window_not_causal),
        Mistake("start_aligned",
                "your mask places query t at position t: the T_q queries are the LAST T_q of the T_k "
                "positions, so query t sits at position T_k - T_q + t (one new query after a cache sees "
                "the last `window` keys).",
                window_start_aligned),
        Mistake("inverted",
                "your mask is inverted: True means the query MAY attend to that key.",
                window_inverted),
        Mistake("float_mask",
                "your mask is a float tensor of ones and zeros; masks are boolean: build it from "
                "comparisons (or convert with `.bool()`).",
                window_float_mask),
        Mistake("long_window_start_aligned",
                "when the window is at least T_k your mask falls back to a causal mask aligned to the first "
                "key (tril() of a T_q x T_k matrix): the queries are still the LAST T_q positions, so it is "
                "the causal mask aligned to the end, tril(diagonal=T_k - T_q).",
                window_long_shortcut_start_aligned),
    ),
)


# --- llm_attention_rolling_cache: rolling_cache_append(cache_k, cache_v, k_new, v_new, window)

def _rolling_variant(cache_k, cache_v, k_new, v_new, window, *, keep="last", extra=0, order="old_first",
                     trim_axis=2):
    def one(cache, new):
        both = torch.cat([cache, new] if order == "old_first" else [new, cache], dim=2)
        n = max(window + extra, 0)
        if trim_axis == -1:
            return both[..., -n:]
        if keep == "first":
            return both[:, :, :n]
        return both[:, :, max(both.shape[2] - n, 0):]
    return one(cache_k, k_new), one(cache_v, v_new)


def rolling_keeps_one_more(cache_k, cache_v, k_new, v_new, window):
    return _rolling_variant(cache_k, cache_v, k_new, v_new, window, extra=1)


def rolling_keeps_one_less(cache_k, cache_v, k_new, v_new, window):
    return _rolling_variant(cache_k, cache_v, k_new, v_new, window, extra=-1)


def rolling_keeps_oldest(cache_k, cache_v, k_new, v_new, window):
    return _rolling_variant(cache_k, cache_v, k_new, v_new, window, keep="first")


def rolling_new_first(cache_k, cache_v, k_new, v_new, window):
    return _rolling_variant(cache_k, cache_v, k_new, v_new, window, order="new_first")


def rolling_trims_feature_axis(cache_k, cache_v, k_new, v_new, window):
    return _rolling_variant(cache_k, cache_v, k_new, v_new, window, trim_axis=-1)


def rolling_trims_only_the_cache(cache_k, cache_v, k_new, v_new, window):
    def one(cache, new):  # room is made for the new tokens in the old cache; the new are all kept
        keep = max(window - new.shape[2], 0)
        return torch.cat([cache[:, :, cache.shape[2] - min(keep, cache.shape[2]):], new], dim=2)
    return one(cache_k, k_new), one(cache_v, v_new)


def _rolling_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def case(B, h_kv, T_c, T_new, d, window):
        return ((_randn(g, B, h_kv, T_c, d), _randn(g, B, h_kv, T_c, d), _randn(g, B, h_kv, T_new, d),
                 _randn(g, B, h_kv, T_new, d), window), {})

    return [
        case(2, 2, 0, 7, 3, 4),  # an empty cache and a prompt longer than the window
        case(1, 2, 4, 1, 3, 4),  # a full cache and one new token: the generation step
        case(2, 1, 2, 1, 5, 6),  # a cache not yet full: nothing is dropped
        case(1, 3, 3, 2, 2, 4),  # fills the window and drops one
        case(2, 2, 1, 1, 3, 1),  # a window of one token
        case(1, 1, 3, 2, 3, 5),  # exactly fills the window
        case(1, 2, 3, 6, 3, 4),  # a cache, then more new tokens than the window: only new ones stay
        case(2, 1, 4, 5, 2, 4),  # a full cache, then more new tokens than the window
        case(1, 1, 2, 4, 3, 4),  # a cache, then exactly `window` new tokens
        case(1, 2, 0, 3, 2, 3),  # an empty cache and a prompt of exactly `window`
        case(1, 1, 0, 1, 2, 1),  # an empty cache, one token, a window of one
    ]


ROLLING = Exercise(
    grade_id="llm_attention_rolling_cache",
    function_name="rolling_cache_append",
    reference=reference.rolling_cache_append,
    make_cases=_rolling_cases,
    output_names=("your keys", "your values"),
    atol=0.0,
    rtol=0.0,
    crash_hint="the caches are (B, h_kv, T_c, d) and the new keys and values (B, h_kv, T_new, d): "
               "concatenate along dim=2 (time), then keep the last `window` positions of that axis",
    mistakes=(
        Mistake("keeps_one_more",
                "your cache keeps window + 1 positions: keep exactly the last `window`.",
                rolling_keeps_one_more),
        Mistake("keeps_one_less",
                "your cache keeps window - 1 positions: keep exactly the last `window` (the new token "
                "and the window - 1 before it).",
                rolling_keeps_one_less),
        Mistake("keeps_oldest",
                "your cache keeps the OLDEST `window` positions ([:, :, :window]): a rolling cache drops "
                "the oldest and keeps the newest, [:, :, -window:] along the time axis.",
                rolling_keeps_oldest),
        Mistake("new_first",
                "you put the new keys and values before the cached ones: the cache stays in time order, "
                "oldest first, so concatenate [cache, new].",
                rolling_new_first),
        Mistake("trims_feature_axis",
                "you trimmed the last axis (x[..., -window:] cuts the head dimension d): time is dim 2 of "
                "(B, h_kv, T, d), so keep x[:, :, -window:].",
                rolling_trims_feature_axis),
        Mistake("trims_only_the_cache",
                "you trimmed only the old cache and kept every new token: with more new tokens than the "
                "window (a long prompt after a cache) that keeps more than `window` entries. Append first, "
                "then keep the last `window` positions of the whole.",
                rolling_trims_only_the_cache),
    ),
)


# --- llm_attention_backward: attention_backward(q, k, v, out, lse, grad_out, causal=False) --

def _backward_variant(q, k, v, out, lse, grad_out, causal=False, *, with_D=True, grad_scale=True,
                      p_scaled=True, dv_transposed=True, mask=True, p_from="lse", D_from="out"):
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    scores = q @ k.transpose(-2, -1) * (scale if p_scaled else 1.0)
    if causal and mask:
        T_q, T_k = q.shape[-2], k.shape[-2]
        allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q)
        scores = scores.masked_fill(~allowed, float("-inf"))
    if p_from == "lse":
        p = torch.exp(scores - lse[..., None])
    else:  # a fresh softmax of the scores: lse never read
        p = torch.exp(scores - scores.amax(-1, keepdim=True))
        p = p / p.sum(-1, keepdim=True)
    dv = (p.transpose(-2, -1) if dv_transposed else p) @ grad_out
    dp = grad_out @ v.transpose(-2, -1)
    if not with_D:
        D = 0.0
    elif D_from == "out":
        D = (grad_out * out).sum(-1, keepdim=True)
    else:  # rowsum(P * dP): equal to rowsum(dO * O) when out is the true output, but needs the T x T P
        D = (p * dp).sum(-1, keepdim=True)
    ds = p * (dp - D)
    factor = scale if grad_scale else 1.0
    return ds @ k * factor, ds.transpose(-2, -1) @ q * factor, dv


def backward_no_D(q, k, v, out, lse, grad_out, causal=False):
    return _backward_variant(q, k, v, out, lse, grad_out, causal, with_D=False)


def backward_grads_unscaled(q, k, v, out, lse, grad_out, causal=False):
    return _backward_variant(q, k, v, out, lse, grad_out, causal, grad_scale=False)


def backward_p_unscaled(q, k, v, out, lse, grad_out, causal=False):
    return _backward_variant(q, k, v, out, lse, grad_out, causal, p_scaled=False)


def backward_dv_not_transposed(q, k, v, out, lse, grad_out, causal=False):
    return _backward_variant(q, k, v, out, lse, grad_out, causal, dv_transposed=False)


def backward_mask_forgotten(q, k, v, out, lse, grad_out, causal=False):
    return _backward_variant(q, k, v, out, lse, grad_out, causal, mask=False)


def backward_softmax_recomputed(q, k, v, out, lse, grad_out, causal=False):
    return _backward_variant(q, k, v, out, lse, grad_out, causal, p_from="softmax")


def backward_D_without_out(q, k, v, out, lse, grad_out, causal=False):
    return _backward_variant(q, k, v, out, lse, grad_out, causal, D_from="p_dp")


def backward_default_causal(q, k, v, out, lse, grad_out, causal=True):
    return _backward_variant(q, k, v, out, lse, grad_out, causal)


def _backward_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def case(B, h, T, d, causal):
        q, k, v = _randn(g, B, h, T, d), _randn(g, B, h, T, d), _randn(g, B, h, T, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)
        if causal:
            scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)
        out = torch.exp(scores - lse[..., None]) @ v
        return (q, k, v, out, lse, _randn(g, B, h, T, d)), {"causal": causal}

    def shifted_lse(B, h, T, d, causal):
        # lse + c (one c per row): P = exp(S - lse - c) is e^-c times the weights, and the right
        # gradients follow the formulas (dV, dS scale by e^-c; D still comes from out)
        (q, k, v, out, lse, grad_out), kwargs = case(B, h, T, d, causal)
        return (q, k, v, out, lse + 0.2 + 0.6 * torch.rand(lse.shape, generator=g, dtype=DT), grad_out), kwargs

    def perturbed_out(B, h, T, d, causal):
        # out + noise: D = rowsum(dO * out) changes, and with it dS, dq and dk (dv does not)
        (q, k, v, out, lse, grad_out), kwargs = case(B, h, T, d, causal)
        return (q, k, v, out + 0.5 * _randn(g, B, h, T, d), lse, grad_out), kwargs

    return [case(1, 2, 5, 4, False), case(2, 1, 6, 3, True), case(1, 1, 1, 2, False),
            case(2, 2, 7, 8, True), case(1, 3, 4, 4, False),
            shifted_lse(1, 2, 6, 4, True), shifted_lse(2, 1, 5, 3, False),
            perturbed_out(1, 2, 6, 4, True), perturbed_out(2, 1, 5, 3, False),
            (case(1, 2, 5, 3, False)[0], {})]  # causal left at its default, False


BACKWARD = Exercise(
    grade_id="llm_attention_backward",
    function_name="attention_backward",
    reference=reference.attention_backward,
    make_cases=_backward_cases,
    output_names=("your dq", "your dk", "your dv"),
    forbidden=AUTOGRAD_BUILTINS + ATTENTION_BUILTINS,
    atol=1e-8,
    rtol=1e-6,
    crash_hint="q, k, v, out and grad_out are (B, h, T, d), lse is (B, h, T): use lse[..., None] to "
               "subtract it from each row of scores; return (dq, dk, dv), each q's shape",
    mistakes=(
        Mistake("no_D",
                "your dS is P * dP: the softmax's gradient also subtracts, in every row, "
                "D = rowsum(dO * O) (which equals rowsum(P * dP)): dS = P * (dP - D).",
                backward_no_D),
        Mistake("grads_unscaled",
                "your dq and dk miss the factor 1 / sqrt(d): the scores are S = q k^T / sqrt(d), so "
                "dQ = dS K / sqrt(d) and dK = dS^T Q / sqrt(d).",
                backward_grads_unscaled),
        Mistake("p_unscaled",
                "you recomputed P = exp(q k^T - lse) without the scale: lse is the log-sum-exp of the "
                "SCALED scores, so P = exp(q k^T / sqrt(d) - lse) (each row then sums to one).",
                backward_p_unscaled),
        Mistake("dv_not_transposed",
                "your dV is P dO: out = P V, so dV = P^T dO (key j collects from every query that "
                "looked at it).",
                backward_dv_not_transposed),
        Mistake("mask_forgotten",
                "with causal=True you recomputed P without the causal mask: the future keys' scores must "
                "be -inf before exp(S - lse), exactly as in the forward, so that their weights are 0.",
                backward_mask_forgotten),
        Mistake("softmax_recomputed",
                "your backward recomputes the softmax from q and k instead of using lse: the weights are "
                "P = exp(S - lse) with the lse you are given (with lse + c every gradient must shrink by "
                "e^-c, and yours does not change).",
                backward_softmax_recomputed),
        Mistake("D_without_out",
                "your backward computes D without out (e.g. as rowsum(P * dP)): D = rowsum(dO * out) "
                "comes from the output you are given, so that the backward needs no T x T product for it.",
                backward_D_without_out),
        Mistake("default_causal",
                "called without `causal`, your attention_backward masks: the signature's default is "
                "causal=False (every query sees every key).",
                backward_default_causal),
    ),
)


# --- llm_attention_rms_norm: rms_norm(x, weight, eps=1e-6) -----------------------------------

def _rms_variant(x, weight, eps=1e-6, *, centre=False, eps_inside=True, dim=-1, use_weight=True, mean=True):
    if centre:
        x = x - x.mean(dim=dim, keepdim=True)
    squares = (x * x).mean(dim=dim, keepdim=True) if mean else (x * x).sum(dim=dim, keepdim=True)
    denominator = torch.sqrt(squares + eps) if eps_inside else torch.sqrt(squares) + eps
    return x / denominator * (weight if use_weight else 1.0)


def rms_layer_norm(x, weight, eps=1e-6):
    return _rms_variant(x, weight, eps, centre=True)


def rms_eps_outside_sqrt(x, weight, eps=1e-6):
    return _rms_variant(x, weight, eps, eps_inside=False)


def rms_wrong_axis(x, weight, eps=1e-6):
    return _rms_variant(x, weight, eps, dim=-2)


def rms_no_weight(x, weight, eps=1e-6):
    return _rms_variant(x, weight, eps, use_weight=False)


def rms_sum_not_mean(x, weight, eps=1e-6):
    return _rms_variant(x, weight, eps, mean=False)


def rms_default_eps_changed(x, weight, eps=1e-5):
    return _rms_variant(x, weight, eps)


def _rms_cases(seed):
    g = torch.Generator().manual_seed(seed)
    return [  # the eps = 0.1 case first: an answer wrong about eps is told so there, not by a hair at 1e-6
        ((0.3 * _randn(g, 4, 5) - 0.2, _randn(g, 5)), {"eps": 0.1}),
        ((_randn(g, 2, 3, 6) + 0.5, _randn(g, 6)), {}),
        ((0.2 * _randn(g, 2, 2, 3, 8), _randn(g, 8)), {"eps": 1.0}),
        ((3.0 * _randn(g, 1, 5, 4) + 1.0, _randn(g, 4)), {"eps": 1e-5}),
        ((1e-3 * _randn(g, 3, 4), _randn(g, 4)), {}),  # mean square near 1e-6: the default eps shows
    ]


RMS_NORM = Exercise(
    grade_id="llm_attention_rms_norm",
    function_name="rms_norm",
    reference=reference.rms_norm,
    make_cases=_rms_cases,
    output_names=("your normalised x",),
    forbidden=NORM_BUILTINS,
    atol=1e-8,
    rtol=1e-6,
    crash_hint="x is (..., d) and weight (d,): take the mean of x * x over dim=-1 with keepdim=True",
    mistakes=(
        Mistake("layer_norm",
                "you subtracted the mean (that is LayerNorm): RMSNorm only divides by the root mean square, "
                "x / sqrt(mean(x^2) + eps) * weight, with no centring.",
                rms_layer_norm),
        Mistake("eps_outside_sqrt",
                "you added eps after the square root: it goes inside, sqrt(mean(x^2) + eps).",
                rms_eps_outside_sqrt),
        Mistake("wrong_axis",
                "your mean runs over the wrong axis: each token is normalised over its own features, the "
                "last axis (dim=-1, keepdim=True).",
                rms_wrong_axis),
        Mistake("no_weight",
                "your output is not multiplied by `weight` (the learned gain, one per feature).",
                rms_no_weight),
        Mistake("sum_not_mean",
                "you divided by sqrt(sum(x^2)), the length of the vector: RMSNorm divides by the ROOT MEAN "
                "square, sqrt(mean(x^2) + eps), which is sqrt(d) times smaller.",
                rms_sum_not_mean),
        Mistake("default_eps_changed",
                "called without eps, your rms_norm uses another eps: the signature's default is eps=1e-6.",
                rms_default_eps_changed),
    ),
)


# --- llm_attention_swiglu: swiglu(x, w_gate, w_up, w_down) -----------------------------------

def _swiglu_variant(x, w_gate, w_up, w_down, *, act="silu", swap=False, down=True, after=False):
    a, b = x @ w_gate, x @ w_up
    if swap:
        a, b = b, a
    functions = {"silu": lambda z: z * torch.sigmoid(z), "sigmoid": torch.sigmoid, "relu": torch.relu,
                 "gelu": lambda z: 0.5 * z * (1 + torch.erf(z / math.sqrt(2))),
                 "silu_exp": lambda z: z * torch.exp(z) / (1 + torch.exp(z))}
    hidden = functions[act](a * b) if after else functions[act](a) * b
    return hidden @ w_down if down else hidden


def swiglu_sigmoid(x, w_gate, w_up, w_down):
    return _swiglu_variant(x, w_gate, w_up, w_down, act="sigmoid")


def swiglu_gate_up_swapped(x, w_gate, w_up, w_down):
    return _swiglu_variant(x, w_gate, w_up, w_down, swap=True)


def swiglu_relu(x, w_gate, w_up, w_down):
    return _swiglu_variant(x, w_gate, w_up, w_down, act="relu")


def swiglu_gelu(x, w_gate, w_up, w_down):
    return _swiglu_variant(x, w_gate, w_up, w_down, act="gelu")


def swiglu_no_down(x, w_gate, w_up, w_down):
    return _swiglu_variant(x, w_gate, w_up, w_down, down=False)


def swiglu_silu_of_product(x, w_gate, w_up, w_down):
    return _swiglu_variant(x, w_gate, w_up, w_down, after=True)


def swiglu_silu_overflows(x, w_gate, w_up, w_down):
    return _swiglu_variant(x, w_gate, w_up, w_down, act="silu_exp")


def _swiglu_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def case(lead, d, f):
        return (_randn(g, *lead, d), _randn(g, d, f) / math.sqrt(d), _randn(g, d, f) / math.sqrt(d),
                _randn(g, f, d) / math.sqrt(f)), {}

    # gates of about +-800: e^z is inf in float64 past 709.8, so z e^z / (1 + e^z) gives inf / inf = nan
    large = (torch.tensor([[400.0, 1.0], [-400.0, 2.0], [3.0, -1.0]], dtype=DT),
             torch.tensor([[2.0, -2.0, 0.5], [0.0, 1.0, 1.0]], dtype=DT),
             torch.tensor([[0.5, 0.1, -0.2], [1.0, -1.0, 0.3]], dtype=DT),
             torch.tensor([[1.0, 0.5], [-0.5, 2.0], [0.25, -1.0]], dtype=DT))
    return [case((2, 3), 4, 6), case((5,), 3, 7), case((2, 2, 2), 4, 5), case((1, 4), 6, 16), (large, {})]


SWIGLU = Exercise(
    grade_id="llm_attention_swiglu",
    function_name="swiglu",
    reference=reference.swiglu,
    make_cases=_swiglu_cases,
    output_names=("your output",),
    atol=1e-8,
    rtol=1e-6,
    crash_hint="x is (..., d), w_gate and w_up (d, f), w_down (f, d): (silu(x @ w_gate) * (x @ w_up)) @ w_down",
    mistakes=(
        Mistake("sigmoid",
                "you used sigmoid(x @ w_gate) as the gate: SwiGLU uses silu(z) = z * sigmoid(z) "
                "(torch.nn.functional.silu).",
                swiglu_sigmoid),
        Mistake("gate_up_swapped",
                "you applied silu to x @ w_up and multiplied by x @ w_gate: silu goes on the GATE, "
                "silu(x @ w_gate) * (x @ w_up).",
                swiglu_gate_up_swapped),
        Mistake("relu",
                "you used relu for the gate: SwiGLU uses silu(z) = z * sigmoid(z), which lets a little "
                "of the negative values through.",
                swiglu_relu),
        Mistake("gelu",
                "you used gelu for the gate (that is GeGLU): SwiGLU uses silu(z) = z * sigmoid(z).",
                swiglu_gelu),
        Mistake("no_down",
                "your output has the hidden width f: project it back to d with @ w_down, "
                "(silu(x @ w_gate) * (x @ w_up)) @ w_down.",
                swiglu_no_down),
        Mistake("silu_of_product",
                "you applied silu to the product (x @ w_gate) * (x @ w_up): silu goes on the gate alone, "
                "silu(x @ w_gate) * (x @ w_up).",
                swiglu_silu_of_product),
        Mistake("silu_overflows",
                "your silu overflows: written as z e^z / (1 + e^z), a gate of 800 gives e^800 = inf and "
                "inf / inf = nan. Write it as z * sigmoid(z) (torch.sigmoid, or "
                "torch.nn.functional.silu), which stays finite.",
                swiglu_silu_overflows),
    ),
)


# --- think first: the KV cache of a Mistral-7B-like model -------------------------------------

# 32 layers, 8 key/value heads of dimension 128, float16, 32,768 tokens, one sequence:
# 2 * 32 * 8 * 128 * 2 bytes * 32768 = 4 GiB.
def _cache_gib(kv=2, layers=32, heads=8, head_dim=128, nbytes=2, T=32768, unit=2**30):
    return kv * layers * heads * head_dim * nbytes * T / unit


# The numbers vary by student (course_utils.grading.questions): layers, query and key/value heads,
# T; always head dimension 128, float16, one sequence. The example is Mistral 7B's.
def _guess(numbers, **change):
    """The cache in GiB for a student's numbers, with one thing changed (a mistake's)."""
    sizes = dict(layers=numbers["layers"], heads=numbers["kv_heads"], T=numbers["T"])
    return _cache_gib(**{**sizes, **change})


CACHE_GUESS = think_first(
    "llm_attention_cache_guess", "kv_cache_gib", lambda **n: _guess(n),
    mistakes=(
        Mistake("guess_no_k_and_v", "that counts the keys only: the cache holds a key AND a value per token, "
                "layer and key/value head.", lambda **n: _guess(n, kv=1)),
        Mistake("guess_query_heads", "that counts the query heads: only the key/value heads are cached "
                "(grouped-query attention shares each among several query heads).",
                lambda **n: _guess(n, heads=n["q_heads"])),
        Mistake("guess_float32", "that counts a number at float32's size; the cache is in float16.", lambda **n: _guess(n, nbytes=4)),
        Mistake("guess_gb", "that is in GB (powers of ten): the question asks for GiB, powers of two.",
                lambda **n: _guess(n, unit=1e9)),
        Mistake("guess_mib", "that is in MiB: the question asks for GiB.",
                lambda **n: _guess(n, unit=2**20)),
        Mistake("guess_one_byte", "that counts one byte a number; a float16 number takes more.",
                lambda **n: _guess(n, nbytes=1)),
        Mistake("guess_causal_half", "that halves the cache for the causal mask: the mask hides scores, "
                "not cache entries; every token's key and value are kept.", lambda **n: _guess(n) / 2),
        Mistake("guess_one_layer", "that is one layer's cache: every layer keeps its own keys "
                "and values.", lambda **n: _guess(n, layers=1)),
    ),
    answer_name="your guess (GiB)", rtol=2e-3)


EXERCISES = {exercise.grade_id: exercise for exercise in
             (GQA, WINDOW_MASK, ROLLING, CACHE_GUESS, BACKWARD, RMS_NORM, SWIGLU)}


def check(grade_id, fn):
    """Raise GradingError naming the mistake if `fn` is wrong; return None if right."""
    return _check(EXERCISES, grade_id, fn)


def diagnose(grade_id, fn):
    """The first hidden block of a test cell: raise only what can be named (a catalogued
    mistake, a crash, a forbidden call), so that the visible checks speak next."""
    return _diagnose(EXERCISES, grade_id, fn)
