"""Mistake catalogue of notebook 06 (why divide by sqrt(d_k)).

Each `Mistake.compute` is a `functools.partial` of one self-contained function per exercise:
the forbidden-API guard counts every function of `course_utils.reference` as the answer, so a
mistake must not call helpers of this package through their module names (a partial keeps
the function object itself, which the guard neither inspects nor patches).
"""
import functools
import math

import numpy as np
import torch

from course_utils.grading import AUTOGRAD_BUILTINS
from course_utils.reference import scaling_dk as reference
from course_utils.reference.mistakes import Exercise, Mistake, think_first
from course_utils.reference.mistakes import diagnose as _diagnose
from course_utils.reference.mistakes import check as _check

__all__ = ["EXERCISES", "HIDDEN_ONLY", "check"]

# Mistakes that the visible tests cannot catch without the reference (none in this notebook:
# every mistake below fails a visible worked example or property).
HIDDEN_ONLY = set()

# Every route to a derivative by automatic differentiation (the guard knows their other names).
JACOBIAN_BUILTINS = AUTOGRAD_BUILTINS


# ----------------------------------------------------------------------------------------
# scaling_dk_variance: score_variance(q, k, scaled=False) -> float

def _variance_variant(q, k, scaled=False, *, kind):
    d_k = q.shape[-1]
    scores = (q * k).sum(dim=-1)
    if kind == "always_scaled":
        return float((scores / math.sqrt(d_k)).var())
    if kind == "never_scaled":
        return float(scores.var())
    if kind == "divide_by_d_k":
        return float((scores / d_k).var()) if scaled else float(scores.var())
    if kind == "scaled_the_variance":
        return float(scores.var() / math.sqrt(d_k)) if scaled else float(scores.var())
    if kind == "std":
        return float((scores / math.sqrt(d_k) if scaled else scores).std())
    if kind == "no_sum":
        products = q * k / math.sqrt(d_k) if scaled else q * k
        return float(products.var())
    if kind == "all_pairs":
        matrix = q @ k.T
        return float((matrix / math.sqrt(d_k) if scaled else matrix).var())
    if kind == "theory":
        return 1.0 if scaled else float(d_k)
    if kind == "theory_from_samples":
        estimate = d_k * float(q.var()) * float(k.var())
        return estimate / d_k if scaled else estimate
    raise ValueError(kind)


def _variance_cases(seed):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for d_k, std_q, std_k, scaled in [(16, 1.0, 1.0, False), (64, 2.0, 1.0, True),
                                      (256, 1.0, 1.5, False), (32, 1.0, 1.0, True)]:
        q = std_q * torch.randn(500, d_k, generator=g)
        k = std_k * torch.randn(500, d_k, generator=g)
        cases.append(((q, k), {"scaled": scaled}))
    # Features of unequal spread (q's first half wide where k's is narrow, and the other way round):
    # the scores' variance is sum_f var(q_f) var(k_f) = d_k, but d_k var(q) var(k) over all entries is
    # about 4.5 d_k, which tells "theory_from_samples" apart from the measured value and from "all_pairs".
    spread = torch.cat([torch.full((16,), 2.0), torch.full((16,), 0.5)])
    q = spread * torch.randn(500, 32, generator=g)
    k = spread.flip(0) * torch.randn(500, 32, generator=g)
    cases.append(((q, k), {"scaled": False}))
    return cases


def _variance(kind):
    return functools.partial(_variance_variant, kind=kind)


VARIANCE = Exercise(
    grade_id="scaling_dk_variance",
    crash_hint="q and k have shape (n, d_k): one score per row i, from q[i] and k[i], n scores in all",
    function_name="score_variance",
    reference=reference.score_variance,
    make_cases=_variance_cases,
    output_names=("the variance",),
    # Dividing by n or by n - 1 are both fine: with n = 500 they differ by 0.2 %.
    rtol=1e-2,
    mistakes=(
        Mistake("always_scaled",
                "with scaled=False you returned the variance of the scaled scores q.k / sqrt(d_k); "
                "the raw scores q.k are asked for then (divide only when scaled=True).",
                _variance("always_scaled")),
        Mistake("never_scaled",
                "with scaled=True you returned the variance of the raw scores: divide each score "
                "by sqrt(d_k) before taking the variance.",
                _variance("never_scaled")),
        Mistake("divide_by_d_k",
                "with scaled=True your variance is about 1/d_k: you divided the scores by d_k "
                "instead of sqrt(d_k).",
                _variance("divide_by_d_k")),
        Mistake("scaled_the_variance",
                "with scaled=True you divided the variance by sqrt(d_k); scale the scores "
                "instead (var(a X) = a^2 var(X), so the variance drops by a factor d_k).",
                _variance("scaled_the_variance")),
        Mistake("std",
                "you returned the standard deviation of the scores, not their variance "
                "(the variance is its square).",
                _variance("std")),
        Mistake("no_sum",
                "you took the variance of the elementwise products q[i, j] * k[i, j]; a score is "
                "their sum over the d_k features, q[i] . k[i].",
                _variance("no_sum")),
        Mistake("all_pairs",
                "you took the variance of every entry of q @ k.T (all pairs q[i] . k[j]); this "
                "exercise pairs row i of q with row i of k only: one score per row, n scores in all.",
                _variance("all_pairs")),
        Mistake("theory",
                "you returned the theoretical value (d_k, or 1 when scaled) instead of measuring "
                "the variance of the given samples, whose entries need not have variance 1.",
                _variance("theory")),
        Mistake("theory_from_samples",
                "you estimated the theoretical value from the variance of all the entries of q and k; "
                "measure the variance of the n scores themselves, which the theory predicts only "
                "when every feature has the same spread.",
                _variance("theory_from_samples")),
    ),
)


# ----------------------------------------------------------------------------------------
# scaling_dk_fit: fit_power_law(x, y) -> (exponent, coefficient)

def _fit_variant(x, y, *, kind):
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if kind == "log_coefficient":
        slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
        return float(slope), float(intercept)
    if kind == "no_logs":
        slope, intercept = np.polyfit(x, y, 1)
        return float(slope), float(intercept)
    if kind == "swapped":
        slope, intercept = np.polyfit(np.log(y), np.log(x), 1)
        return float(slope), float(np.exp(intercept))
    if kind == "semilog":
        slope, intercept = np.polyfit(x, np.log(y), 1)
        return float(slope), float(np.exp(intercept))
    if kind == "log10_then_exp":
        slope, intercept = np.polyfit(np.log10(x), np.log10(y), 1)
        return float(slope), float(np.exp(intercept))
    if kind == "endpoints":
        slope = np.log(y[-1] / y[0]) / np.log(x[-1] / x[0])
        return float(slope), float(y[0] / x[0] ** slope)
    raise ValueError(kind)


def _fit_cases(seed):
    rng = np.random.default_rng(seed)
    x = 2.0 ** np.arange(2, 11)  # 4 ... 1024, like the d_k of the notebook
    cases = []
    for exponent, coefficient in [(1.0, 1.0), (0.5, 3.0), (2.0, 0.2)]:
        y = coefficient * x ** exponent * np.exp(0.15 * rng.normal(size=x.shape))
        cases.append(((x.copy(), y), {}))
    return cases


def _fit(kind):
    return functools.partial(_fit_variant, kind=kind)


# The course's widgets already fit the exponent (notebooks 05 and 11 draw log-log slopes): an answer
# that calls them writes only the coefficient, so they are off limits here.
FIT_HELPERS = ("course_utils.widgets.self_attention:loglog_slope",
               "course_utils.widgets.fast_generation:loglog_slope")

FIT = Exercise(
    grade_id="scaling_dk_fit",
    forbidden=FIT_HELPERS,
    crash_hint="x and y may be lists, NumPy arrays or tensors: convert them with np.asarray(..., dtype=float) first",
    function_name="fit_power_law",
    reference=reference.fit_power_law,
    make_cases=_fit_cases,
    output_names=("the exponent", "the coefficient"),
    mistakes=(
        Mistake("log_coefficient",
                "your coefficient is the intercept log(c) of the log-log line; the coefficient "
                "is exp(intercept).",
                _fit("log_coefficient")),
        Mistake("no_logs",
                "you fitted a straight line to y against x; a power law y = c x^p is a straight "
                "line only on log-log axes: fit log y against log x.",
                _fit("no_logs")),
        Mistake("swapped",
                "you fitted log x against log y (x and y swapped): regress log y on log x, "
                "np.polyfit(log_x, log_y, 1).",
                _fit("swapped")),
        Mistake("semilog",
                "you took the log of y but not of x: a power law is straight on log-log axes, "
                "so fit log y against log x.",
                _fit("semilog")),
        Mistake("log10_then_exp",
                "you fitted with log10 but turned the intercept back with exp; undo log10 with "
                "10 ** intercept (or use the natural log throughout).",
                _fit("log10_then_exp")),
        Mistake("endpoints",
                "you used only the first and last points; fit all points by least squares "
                "(e.g. np.polyfit on the logs), which averages out the noise.",
                _fit("endpoints")),
    ),
)


# ----------------------------------------------------------------------------------------
# scaling_dk_jacobian: softmax_jacobian(z) -> (..., n, n)

def _jacobian_variant(z, *, kind):
    if kind == "autograd":  # what the exercise forbids: one autograd pass per output
        leaf = z.detach().clone().requires_grad_(True)
        s = torch.exp(leaf - leaf.amax(dim=-1, keepdim=True))
        s = s / s.sum(dim=-1, keepdim=True)
        rows = [torch.autograd.grad(s[..., i].sum(), leaf, retain_graph=True)[0] for i in range(z.shape[-1])]
        return torch.stack(rows, dim=-2)
    if kind == "unstable":  # softmax written as exp(z) / sum(exp(z)), without the maximum
        e = torch.exp(z)
        s = e / e.sum(dim=-1, keepdim=True)
        return torch.diag_embed(s) - s.unsqueeze(-1) * s.unsqueeze(-2)
    if kind == "logits_not_probs":
        s = z
    elif kind == "wrong_axis":
        s = torch.softmax(z, dim=0)
    else:
        s = torch.softmax(z, dim=-1)
    outer = s.unsqueeze(-1) * s.unsqueeze(-2)
    diag = torch.diag_embed(s)
    if kind in ("logits_not_probs", "wrong_axis"):
        return diag - outer
    if kind == "sign_flipped":
        return outer - diag
    if kind == "plus":
        return diag + outer
    if kind == "diagonal_only":
        return torch.diag_embed(s * (1 - s))
    if kind == "missing_diag":
        return -outer
    if kind == "inner_product":
        inner = (s * s).sum(dim=-1)[..., None, None]
        return diag - inner
    raise ValueError(kind)


def _jacobian_cases(seed):
    g = torch.Generator().manual_seed(seed)
    return [
        ((3.0 * torch.randn(5, generator=g, dtype=torch.float64),), {}),
        ((2.0 * torch.randn(3, 6, generator=g, dtype=torch.float64),), {}),
        ((torch.randn(2, 4, 5, generator=g, dtype=torch.float64),), {}),
        # saturated logits, as in the notebook's demo: exp(800) overflows without the maximum
        ((800.0 + 30.0 * torch.randn(2, 6, generator=g, dtype=torch.float64),), {}),
        # large logits close together: exp overflows, yet the softmax is far from one-hot, so an answer
        # that turns the overflow's nan into 0 (torch.nan_to_num) gives J = 0 instead of the true J
        ((800.0 + torch.randn(2, 5, generator=g, dtype=torch.float64),), {}),
    ]


def _jacobian(kind):
    return functools.partial(_jacobian_variant, kind=kind)


JACOBIAN = Exercise(
    grade_id="scaling_dk_jacobian",
    crash_hint="z has shape (..., n): the softmax runs over dim=-1 and the Jacobian has shape (..., n, n)",
    function_name="softmax_jacobian",
    reference=reference.softmax_jacobian,
    make_cases=_jacobian_cases,
    output_names=("your Jacobian",),
    forbidden=JACOBIAN_BUILTINS,
    atol=1e-7,
    mistakes=(
        Mistake("sign_flipped",
                "your Jacobian has the opposite sign: it is diag(s) - s s^T, so the diagonal "
                "s_i (1 - s_i) is positive.",
                _jacobian("sign_flipped")),
        Mistake("plus",
                "you added s s^T; it is subtracted: J = diag(s) - s s^T (raising z_j lowers "
                "every other s_i).",
                _jacobian("plus")),
        Mistake("diagonal_only",
                "you kept only the diagonal s_i (1 - s_i); the off-diagonal entries -s_i s_j are "
                "not zero: every output of a softmax depends on every logit.",
                _jacobian("diagonal_only")),
        Mistake("missing_diag",
                "your Jacobian is -s s^T: the diag(s) term (from the derivative of exp(z_i) in the "
                "numerator) is missing.",
                _jacobian("missing_diag")),
        Mistake("logits_not_probs",
                "you used the logits z in diag(s) - s s^T; s is softmax(z).",
                _jacobian("logits_not_probs")),
        Mistake("inner_product",
                "you subtracted the number s . s (an inner product) from every entry; s s^T is "
                "the outer product, an n x n matrix: s[..., :, None] * s[..., None, :].",
                _jacobian("inner_product")),
        Mistake("autograd",
                "Your code uses torch.autograd.grad",
                _jacobian("autograd")),
        Mistake("unstable",
                "your softmax overflows on large logits (exp(800) is inf, and inf / inf is nan): use "
                "torch.softmax, or subtract each row's maximum before exp.",
                _jacobian("unstable")),
        Mistake("wrong_axis",
                "for a batch of logits your softmax runs over the first axis (the batch); it must "
                "run over the last axis (dim=-1).",
                _jacobian("wrong_axis")),
    ),
)


EXERCISES = {exercise.grade_id: exercise for exercise in (VARIANCE, FIT, JACOBIAN)}


# --- scaling_dk_raw_variance: a think-first question. Its visible test only checks that
# `raw_score_variance` is a positive number (the number is the question): every wrong value is hidden only.
# The numbers vary by student (course_utils.grading.questions): d_k, and `variance`, that of every
# entry of q and of k (never 1, so that the unit-entries mistake stays a mistake).
RAW_VARIANCE_MISTAKES = (
    Mistake('raw_variance_one_factor', "you multiplied d_k by one variance; a product q_i k_i has two independent "
                                       "factors, and both of their variances count.",
                                       lambda d_k, variance: d_k * variance),
    Mistake('raw_variance_unit_entries', "you used entries of variance 1; here each entry has variance {variance:g}.",
                                         lambda d_k, variance: d_k),
    Mistake('raw_variance_sqrt_dk', "you multiplied by sqrt(d_k); the score is a sum of d_k independent products:"
                                    " how do the variances of independent terms combine?",
                                    lambda d_k, variance: math.sqrt(d_k) * variance * variance),
    Mistake('raw_variance_scaled', "that is the variance after dividing by sqrt(d_k); the question asks for the"
                                   " raw score.",
                                   lambda d_k, variance: variance * variance),
    Mistake('raw_variance_std', "you gave the standard deviation of the score; the question asks for its variance.",
                                lambda d_k, variance: math.sqrt(d_k) * variance),
)
HIDDEN_ONLY = HIDDEN_ONLY | {mistake.name for mistake in RAW_VARIANCE_MISTAKES}
EXERCISES["scaling_dk_raw_variance"] = think_first(
    "scaling_dk_raw_variance", "raw_score_variance",
    lambda d_k, variance: reference.dot_product_variance(d_k, variance, variance),
    RAW_VARIANCE_MISTAKES, "your variance")


def check(grade_id, fn):
    """Raise GradingError naming the mistake if `fn` is wrong; return None if right."""
    return _check(EXERCISES, grade_id, fn)


def diagnose(grade_id, fn):
    """Raise GradingError if `fn` crashes, breaks a rule or makes a catalogued mistake; silent on an
    uncatalogued wrong answer, which the test cell's last hidden line (`check`) then fails."""
    return _diagnose(EXERCISES, grade_id, fn)
