"""Mistake catalogue of notebook 07 (multi-head attention).

Each `Mistake.compute` is a `functools.partial` of one self-contained function (or class) per
exercise: the forbidden-API guard counts every function of `course_utils.reference` as the
answer, so a mistake must not call helpers of this package through their module names (a
partial keeps the object itself, which the guard neither inspects nor patches).

The module exercise `multi_head_attention` grades a *class*: its mistakes are factories
`(d_model, num_heads, bias=True) -> nn.Module` computing a wrong module, and
`ModuleExercise.check` builds the student's module, copies one set of weights into its
`q_proj`, `k_proj`, `v_proj` and `out_proj`, and compares `forward(query, key, value)`.
"""
import dataclasses
import functools
import math

import torch
from torch import nn

from course_utils.grading import ATTENTION_BUILTINS, GradingError, call_without
from course_utils.reference import attention, multi_head as reference
from course_utils.reference.mistakes import Exercise, Mistake, think_first
from course_utils.reference.mistakes import diagnose as _diagnose
from course_utils.reference.mistakes import check as _check
from course_utils.reference.mistakes.gradients import GradientExercise

__all__ = ["EXERCISES", "HIDDEN_ONLY", "ModuleExercise", "check"]

# Mistakes that the visible tests cannot catch without the reference (the others fail a visible
# worked example or the comparison with torch.nn.MultiheadAttention).
HIDDEN_ONLY = {
    # The visible tests pass the same tensor as key and value (self-attention, then cross-attention
    # with one memory): only the hidden cross-attention cases, with key != value, tell them apart.
    "values_from_key",
}

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


# ----------------------------------------------------------------------------------------
# multi_head_split_heads: split_heads(x, num_heads) -> (B, h, T, d_k)

def _split_variant(x, num_heads, *, kind):
    batch_size, T, d_model = x.shape
    d_k = d_model // num_heads
    if kind == "no_transpose_reshape":
        return x.reshape(batch_size, num_heads, T, d_k)
    if kind == "interleaved":
        return x.reshape(batch_size, T, d_k, num_heads).permute(0, 3, 1, 2)
    if kind == "heads_not_moved":
        return x.reshape(batch_size, T, num_heads, d_k)
    if kind == "d_k_heads":
        return x.reshape(batch_size, T, num_heads, d_k).permute(0, 2, 3, 1)
    raise ValueError(kind)


def _split_cases(seed):
    g = torch.Generator().manual_seed(seed)
    return [
        ((torch.randn(2, 5, 12, generator=g), 3), {}),
        ((torch.randn(1, 7, 8, generator=g), 2), {}),
        ((torch.randn(3, 4, 24, generator=g), 4), {}),
        # the smallest the prompt allows (issue 39, item 3): one sentence of one token, one head
        ((torch.randn(1, 1, 6, generator=g), 1), {}),
        # float16, which the prompt does not rule out (issue 39, item 2)
        ((torch.randn(2, 3, 8, generator=g).half(), 2), {}),
    ]


def _split(kind):
    return functools.partial(_split_variant, kind=kind)


SPLIT = GradientExercise(  # every later layer trains through it: a detached split must fail
    grade_id="multi_head_split_heads",
    make_gradient_cases=lambda seed: _split_cases(seed)[:2],
    crash_hint="x has shape (B, T, d_model): reshape it to (B, T, num_heads, d_model // num_heads), then transpose(1, 2)",
    function_name="split_heads",
    reference=attention.split_heads,
    make_cases=_split_cases,
    output_names=("your split",),
    forbidden=ATTENTION_BUILTINS + ("course_utils.grading.parts:split_heads",),
    mistakes=(
        Mistake("no_transpose_reshape",
                "you reshaped (B, T, d_model) straight to (B, h, T, d_k): that cuts the memory in "
                "order and mixes tokens across heads. Reshape to (B, T, h, d_k) first, then "
                "swap the T and h axes (.transpose(1, 2)).",
                _split("no_transpose_reshape")),
        Mistake("interleaved",
                "your heads get every h-th feature (features h, h + num_heads, ...); head i owns "
                "the contiguous block of features i*d_k to (i+1)*d_k - 1: reshape to (B, T, h, d_k), "
                "not (B, T, d_k, h).",
                _split("interleaved")),
        Mistake("heads_not_moved",
                "your result has shape (B, T, h, d_k): the reshape is right, but the head axis "
                "must come before the tokens, (B, h, T, d_k): add .transpose(1, 2).",
                _split("heads_not_moved")),
        Mistake("d_k_heads",
                "your result has shape (B, h, d_k, T): the features ended up before the tokens; "
                "swap only axes 1 and 2 of the (B, T, h, d_k) tensor.",
                _split("d_k_heads")),
    ),
)


# ----------------------------------------------------------------------------------------
# multi_head_merge_heads: merge_heads(x) -> (B, T, h * d_k)

def _merge_variant(x, *, kind):
    batch_size, num_heads, T, d_k = x.shape
    if kind == "no_transpose_reshape":
        return x.reshape(batch_size, T, num_heads * d_k)
    if kind == "interleaved":
        return x.permute(0, 2, 3, 1).reshape(batch_size, T, d_k * num_heads)
    if kind == "mean_of_heads":
        return x.mean(dim=1)
    if kind == "concat_tokens":
        return x.reshape(batch_size, num_heads * T, d_k)
    raise ValueError(kind)


def _merge_cases(seed):
    g = torch.Generator().manual_seed(seed)
    return [
        ((torch.randn(2, 3, 5, 4, generator=g),), {}),
        ((torch.randn(1, 2, 7, 3, generator=g),), {}),
        ((torch.randn(3, 4, 6, 2, generator=g),), {}),
        ((torch.randn(1, 1, 1, 5, generator=g),), {}),  # the smallest: one sentence, head and token
        ((torch.randn(2, 2, 3, 4, generator=g).half(),), {}),  # float16 (issue 39, item 2)
    ]


def _merge(kind):
    return functools.partial(_merge_variant, kind=kind)


MERGE = GradientExercise(  # every later layer trains through it: a detached merge must fail
    grade_id="multi_head_merge_heads",
    make_gradient_cases=lambda seed: _merge_cases(seed)[:2],
    crash_hint="x has shape (B, h, T, d_k): transpose(1, 2) to (B, T, h, d_k), then reshape to (B, T, h * d_k)",
    function_name="merge_heads",
    reference=attention.merge_heads,
    make_cases=_merge_cases,
    output_names=("your merge",),
    forbidden=ATTENTION_BUILTINS + ("course_utils.grading.parts:merge_heads",),
    mistakes=(
        Mistake("no_transpose_reshape",
                "you reshaped (B, h, T, d_k) straight to (B, T, h*d_k), which mixes tokens across "
                "heads: first bring the tokens forward, .transpose(1, 2) to (B, T, h, d_k), then reshape.",
                _merge("no_transpose_reshape")),
        Mistake("interleaved",
                "you merged in the wrong order, interleaving the heads feature by feature; "
                "concatenate them head after head: (B, T, h, d_k) -> (B, T, h*d_k).",
                _merge("interleaved")),
        Mistake("mean_of_heads",
                "you averaged the heads, giving (B, T, d_k); merging concatenates them, giving "
                "(B, T, h*d_k): W_O then decides how to mix them.",
                _merge("mean_of_heads")),
        Mistake("concat_tokens",
                "you concatenated the heads along the token axis, giving (B, h*T, d_k); they are "
                "concatenated along the features: (B, T, h*d_k).",
                _merge("concat_tokens")),
    ),
)


# ----------------------------------------------------------------------------------------
# multi_head_attention: class MultiHeadAttention(d_model, num_heads, bias=True)

class _WrongMultiHeadAttention(nn.Module):
    """Multi-head attention with one catalogued mistake (`kind`); self-contained on purpose."""

    def __init__(self, d_model, num_heads, bias=True, *, kind):
        super().__init__()
        self.d_model, self.num_heads, self.kind = d_model, num_heads, kind
        self.d_k = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _heads_apart(self, x):
        batch_size, T, _ = x.shape
        if self.kind == "split_without_transpose":
            return x.reshape(batch_size, self.num_heads, T, self.d_k)
        if self.kind == "shared_projection":
            # every head uses the first head's slice of the projection
            first = x[..., : self.d_k].unsqueeze(1)
            return first.expand(batch_size, self.num_heads, T, self.d_k)
        return x.reshape(batch_size, T, self.num_heads, self.d_k).transpose(1, 2)

    def _heads_together(self, x):
        batch_size, _, T, _ = x.shape
        if self.kind == "merge_without_transpose":
            return x.reshape(batch_size, T, self.d_model)
        return x.transpose(1, 2).reshape(batch_size, T, self.d_model)

    def forward(self, query, key, value):
        q = self._heads_apart(self.q_proj(query))
        k = self._heads_apart(self.k_proj(key))
        v = self._heads_apart(self.v_proj(key if self.kind == "values_from_key" else value))
        if self.kind == "sqrt_d_model":
            divisor = math.sqrt(self.d_model)
        elif self.kind == "no_scaling":
            divisor = 1.0
        else:
            divisor = math.sqrt(self.d_k)
        scores = q @ k.transpose(-2, -1) / divisor
        weights = torch.softmax(scores, dim=-2 if self.kind == "softmax_over_queries" else -1)
        merged = self._heads_together(weights @ v)
        if self.kind == "no_out_proj":
            return merged, weights
        return self.out_proj(merged), weights


def _wrong_module(kind):
    return functools.partial(_WrongMultiHeadAttention, kind=kind)


@dataclasses.dataclass(frozen=True)
class ModuleExercise(Exercise):
    """An exercise whose answer is an nn.Module class (or factory) `cls(d_model, num_heads,
    bias=...)` with nn.Linear attributes `q_proj`, `k_proj`, `v_proj`, `out_proj`.

    A case is a dict: d_model, num_heads, bias, the weights to copy in ({name: (weight, bias)})
    and the forward inputs (query, key, value); probe.run_projections_module builds and runs it.
    Mistakes are wrong factories."""

    runner: str = "projections_module"

    def describe_case(self, case):
        return f" (d_model={case['d_model']}, num_heads={case['num_heads']})"


def _attention_cases(seed):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for d_model, num_heads, bias, batch_size, Tq, Tk, cross, qk_scale in [
        (12, 3, True, 2, 5, 5, False, 1.0),
        (16, 4, False, 1, 3, 6, True, 1.0),
        (8, 2, True, 2, 4, 7, True, 1.0),
        # the smallest the prompt allows (issue 39, item 3): one head, one sentence, one token
        (6, 1, True, 1, 1, 1, False, 1.0),
        # scores in the hundreds (float32, the layer's dtype): exp overflows (e^89 is inf in float32)
        # unless the maximum is subtracted, as torch.softmax does (issue 39, item 1)
        (12, 3, True, 2, 4, 5, True, 5.0),
    ]:
        weights = {}
        for name in PROJECTIONS:
            w = torch.randn(d_model, d_model, generator=g) * (1.5 / math.sqrt(d_model))
            if name in ("q_proj", "k_proj"):
                w = w * qk_scale
            b = torch.randn(d_model, generator=g) * 0.5 if bias else None
            weights[name] = (w, b)
        query = torch.randn(batch_size, Tq, d_model, generator=g)
        if cross:
            key = torch.randn(batch_size, Tk, d_model, generator=g)
            value = torch.randn(batch_size, Tk, d_model, generator=g)
        else:
            key = value = query
        cases.append({"d_model": d_model, "num_heads": num_heads, "bias": bias, "weights": weights,
                      "query": query, "key": key, "value": value})
    return cases


ATTENTION = ModuleExercise(
    grade_id="multi_head_attention",
    crash_hint="print the shapes of q, k and v after split_heads: each should be (B, num_heads, T, d_k), with Tq for q and Tk for k and v",
    function_name="MultiHeadAttention",
    reference=attention.MultiHeadAttention,
    make_cases=_attention_cases,
    output_names=("your output", "your attention weights"),
    forbidden=ATTENTION_BUILTINS,
    earlier=("split_heads", "merge_heads"),  # its prompt: "with your split_heads ... your merge_heads"
    mistakes=(
        Mistake("split_without_transpose",
                "your heads mix tokens: splitting reshapes (B, T, d_model) to (B, T, h, d_k) and "
                "then transposes to (B, h, T, d_k); a direct reshape to (B, h, T, d_k) is wrong.",
                _wrong_module("split_without_transpose")),
        Mistake("merge_without_transpose",
                "your merge mixes tokens: transpose (B, h, T, d_k) back to (B, T, h, d_k) before "
                "reshaping to (B, T, d_model).",
                _wrong_module("merge_without_transpose")),
        Mistake("sqrt_d_model",
                "you divided the scores by sqrt(d_model); each head's scores are dot products of "
                "d_k = d_model / num_heads features, so divide by sqrt(d_k).",
                _wrong_module("sqrt_d_model")),
        Mistake("no_scaling",
                "your scores are not scaled: divide q k^T by sqrt(d_k) (notebook 06).",
                _wrong_module("no_scaling")),
        Mistake("no_out_proj",
                "your output is the concatenated heads: the output projection W_O (out_proj) must "
                "still be applied to them.",
                _wrong_module("no_out_proj")),
        Mistake("shared_projection",
                "all your heads use the same slice of the projections (the first d_k features), so "
                "they all compute the same attention; head i must use features i*d_k to (i+1)*d_k - 1 "
                "of q_proj, k_proj and v_proj.",
                _wrong_module("shared_projection")),
        Mistake("softmax_over_queries",
                "your softmax runs over the queries (dim=-2); each query's weights over the keys "
                "must sum to one: softmax over the last axis.",
                _wrong_module("softmax_over_queries")),
        Mistake("values_from_key",
                "your values come from `key` (v_proj(key)); they are v_proj(value). In self-attention "
                "key and value are the same tensor, so this only shows when they differ, as in "
                "cross-attention.",
                _wrong_module("values_from_key")),
    ),
)


# ----------------------------------------------------------------------------------------
# multi_head_param_count: attention_parameter_count(d_model, num_heads, bias=True) -> int

def _count_variant(d_model, num_heads, bias=True, *, kind):
    d_k = d_model // num_heads
    b = 1 if bias else 0
    if kind == "full_projection_per_head":
        return num_heads * 3 * (d_model * d_model + b * d_model) + d_model * d_model + b * d_model
    if kind == "no_out_proj":
        return 3 * (d_model * d_model + b * d_model)
    if kind == "no_bias":
        return 4 * d_model * d_model
    if kind == "one_head_only":
        return 3 * (d_model * d_k + b * d_k) + d_model * d_model + b * d_model
    raise ValueError(kind)


def _count_cases(seed):
    return [((12, 3), {"bias": True}), ((16, 4), {"bias": False}), ((64, 8), {"bias": True}),
            ((10, 1), {"bias": True}),
            ((24, 4), {})]  # bias left out: the default is True


def _count(kind):
    return functools.partial(_count_variant, kind=kind)


COUNT = Exercise(
    grade_id="multi_head_param_count",
    function_name="attention_parameter_count",
    reference=reference.attention_parameter_count,
    make_cases=_count_cases,
    output_names=("your count",),
    forbidden=ATTENTION_BUILTINS,
    atol=0.0,
    rtol=0.0,
    mistakes=(
        Mistake("full_projection_per_head",
                "you gave every head its own d_model x d_model projections; each head's W_Q^i is "
                "d_model x d_k, so the h heads together need d_model x d_model, as one head would.",
                _count("full_projection_per_head")),
        Mistake("no_out_proj",
                "you left out W_O, the d_model x d_model output projection (and its bias).",
                _count("no_out_proj")),
        Mistake("no_bias",
                "with bias=True each of the four projections also has d_model biases.",
                _count("no_bias")),
        Mistake("one_head_only",
                "you counted the query, key and value projections of one head only (d_model x d_k "
                "each); there are num_heads of them.",
                _count("one_head_only")),
    ),
)


EXERCISES = {exercise.grade_id: exercise for exercise in (SPLIT, MERGE, ATTENTION, COUNT)}


# --- multi_head_weights_count: a think-first question. Its visible test only checks that
# `head_weights_count` is a positive number (the number is the question): every wrong value is hidden only.
# The numbers vary by student (course_utils.grading.questions): batch (sentences, at least 2), tokens
# (per sentence), heads (at least 2) and d_model (which the answer does not depend on).
WEIGHT_COUNT_MISTAKES = (
    Mistake('weights_one_head', "you counted one head; every head computes its own weights.",
                                lambda batch, tokens, heads, d_model: batch * tokens * tokens),
    Mistake('weights_one_sentence', "you counted one sentence; every sentence of the batch gets its own weights.",
                                    lambda batch, tokens, heads, d_model: heads * tokens * tokens),
    Mistake('weights_times_head_width', "you multiplied by the head width; a weight is one number per head and "
                                        "(query, key) pair, however wide the head.",
                                        lambda batch, tokens, heads, d_model:
                                        reference.attention_weight_count(batch, tokens, heads) * (d_model // heads)),
    Mistake('weights_times_d_model', "you multiplied by d_model; a weight is one number per head and (query, "
                                     "key) pair.",
                                     lambda batch, tokens, heads, d_model:
                                     reference.attention_weight_count(batch, tokens, heads) * d_model),
    Mistake('weights_one_per_token', "you gave each query one weight; it has one for every key.",
                                     lambda batch, tokens, heads, d_model: batch * heads * tokens),
)
HIDDEN_ONLY = HIDDEN_ONLY | {mistake.name for mistake in WEIGHT_COUNT_MISTAKES}
EXERCISES["multi_head_weights_count"] = think_first(
    "multi_head_weights_count", "head_weights_count",
    lambda batch, tokens, heads, d_model: reference.attention_weight_count(batch, tokens, heads),
    WEIGHT_COUNT_MISTAKES, "your number of weights")


def check(grade_id, fn):
    """Raise GradingError naming the mistake if `fn` is wrong; return None if right."""
    return _check(EXERCISES, grade_id, fn)


def diagnose(grade_id, fn):
    """Raise GradingError if `fn` crashes, breaks a rule or makes a catalogued mistake; silent on an
    uncatalogued wrong answer, which the test cell's last hidden line (`check`) then fails."""
    return _diagnose(EXERCISES, grade_id, fn)
