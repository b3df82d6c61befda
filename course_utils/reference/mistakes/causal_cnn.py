"""Mistake catalogue of notebook 02 (causal CNNs, receptive fields).

Each mistake is computed by a self-contained function with the exercise's signature (only
torch and math: the forbidden-API guard treats any other function of course_utils.reference
as the answer). Cases are chosen so that every mistake differs from the reference and from
every other mistake on at least one of them.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from course_utils.reference.causal_cnn import conv_output_length as _ref_conv_output_length
from course_utils.reference.causal_cnn import receptive_field as _ref_receptive_field
from course_utils.reference.causal_cnn import causal_conv1d as _ref_causal_conv1d
from course_utils.reference.causal_cnn import layers_to_reach as _ref_layers_to_reach
from course_utils.reference.mistakes import Exercise, Mistake, think_first
from course_utils.reference.mistakes import diagnose as _diagnose
from course_utils.reference.mistakes import check as _check

# Every catalogued mistake fails a visible test too, except:
HIDDEN_ONLY = {
    # The visible tests pass every optional argument of conv_output_length by keyword.
    "pytorch_argument_order",
}


# --- causal_cnn_conv: causal_conv1d(x, weight, bias=None, dilation=1) ----------------------

def conv_symmetric_padding(x, weight, bias=None, dilation=1):
    pad = (weight.shape[-1] - 1) * dilation  # what padding="same" does: half before, half after
    return F.conv1d(F.pad(x, (pad // 2, pad - pad // 2)), weight, bias, dilation=dilation)


def conv_padding_ignores_dilation(x, weight, bias=None, dilation=1):
    k = weight.shape[-1]
    return F.conv1d(F.pad(x, (k - 1, 0)), weight, bias, dilation=dilation)


def conv_pads_the_future(x, weight, bias=None, dilation=1):
    pad = (weight.shape[-1] - 1) * dilation
    return F.conv1d(F.pad(x, (0, pad)), weight, bias, dilation=dilation)


def conv_padding_untrimmed(x, weight, bias=None, dilation=1):
    pad = (weight.shape[-1] - 1) * dilation
    return F.conv1d(x, weight, bias, padding=pad, dilation=dilation)


def conv_chomp_zero(x, weight, bias=None, dilation=1):
    pad = (weight.shape[-1] - 1) * dilation
    return F.conv1d(x, weight, bias, padding=pad, dilation=dilation)[..., :-pad]


def conv_ignores_bias(x, weight, bias=None, dilation=1):
    pad = (weight.shape[-1] - 1) * dilation
    return F.conv1d(F.pad(x, (pad, 0)), weight, None, dilation=dilation)


def conv_flipped_kernel(x, weight, bias=None, dilation=1):
    pad = (weight.shape[-1] - 1) * dilation  # a textbook convolution: the kernel reversed
    return F.conv1d(F.pad(x, (pad, 0)), weight.flip(-1), bias, dilation=dilation)


def _conv_cases(seed):
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    cases = []
    for kernel_size, dilation, with_bias in [(3, 2, True), (2, 3, False), (1, 1, True), (4, 1, True), (3, 3, True)]:
        x = randn(2, 3, 13)
        weight = randn(4, 3, kernel_size)
        bias = randn(4) if with_bias else None
        cases.append(((x, weight), {"bias": bias, "dilation": dilation}))
    # The default dilation (1) with a kernel wider than 1, so that a wrong default shows.
    cases.append(((randn(2, 3, 13), randn(4, 3, 3)), {"bias": randn(4)}))
    return cases


CONV = Exercise(
    grade_id="causal_cnn_conv",
    function_name="causal_conv1d",
    reference=_ref_causal_conv1d,
    make_cases=_conv_cases,
    mistakes=(
        Mistake(
            "symmetric_padding",
            "your output at step t reads inputs after t: padding both ends equally (like "
            "padding=\"same\") centres the kernel on t and leaks the future. Pad only on the left.",
            conv_symmetric_padding,
        ),
        Mistake(
            "padding_ignores_dilation",
            "your output is (kernel_size - 1) * (dilation - 1) steps too short: you padded by "
            "kernel_size - 1, but a dilated kernel reaches (kernel_size - 1) * dilation steps back.",
            conv_padding_ignores_dilation,
        ),
        Mistake(
            "pads_the_future",
            "your output at step t reads steps t .. t + (kernel_size - 1) * dilation, the future "
            "instead of the past: did you pad on the right (F.pad's pair is (left, right)), or pad "
            "both ends and keep the last T outputs instead of the first T?",
            conv_pads_the_future,
        ),
        Mistake(
            "padding_untrimmed",
            "your output has (kernel_size - 1) * dilation extra steps at the end: F.conv1d's "
            "padding= pads both ends. Pad only the left with F.pad (or drop the extra outputs).",
            conv_padding_untrimmed,
        ),
        Mistake(
            "chomp_zero",
            "with kernel_size 1 your output is empty: slicing [..., :-p] with p = 0 keeps "
            "nothing. Slice [..., :T] instead, or pad only the left with F.pad.",
            conv_chomp_zero,
        ),
        Mistake(
            "ignores_bias",
            "your output misses the bias: pass `bias` on to F.conv1d (it may be None).",
            conv_ignores_bias,
        ),
        Mistake(
            "flipped_kernel",
            "you reversed the kernel (the textbook convolution): F.conv1d, like nn.Conv1d, does not flip "
            "it, and its last tap weight[..., k - 1] reads the present step x_t. Pass the weights as they are.",
            conv_flipped_kernel,
        ),
    ),
    forbidden=(),  # nn.Conv1d and F.conv1d are the tools here; what is tested is the padding.
    output_names=("your output",),
    atol=1e-8,
    rtol=1e-6,
)


# --- causal_cnn_receptive_field: receptive_field(kernel_sizes, dilations, strides=None) ----

def rf_missing_plus_one(kernel_sizes, dilations, strides=None):
    strides = strides or [1] * len(kernel_sizes)
    field, jump = 0, 1
    for k, d, s in zip(kernel_sizes, dilations, strides):
        field += (k - 1) * d * jump
        jump *= s
    return field


def rf_ignores_dilation(kernel_sizes, dilations, strides=None):
    strides = strides or [1] * len(kernel_sizes)
    field, jump = 1, 1
    for k, s in zip(kernel_sizes, strides):
        field += (k - 1) * jump
        jump *= s
    return field


def rf_ignores_strides(kernel_sizes, dilations, strides=None):
    return 1 + sum((k - 1) * d for k, d in zip(kernel_sizes, dilations))


def rf_own_stride(kernel_sizes, dilations, strides=None):
    strides = strides or [1] * len(kernel_sizes)
    field, jump = 1, 1
    for k, d, s in zip(kernel_sizes, dilations, strides):
        jump *= s
        field += (k - 1) * d * jump
    return field


def rf_span_per_layer(kernel_sizes, dilations, strides=None):
    strides = strides or [1] * len(kernel_sizes)
    field, jump = 0, 1
    for k, d, s in zip(kernel_sizes, dilations, strides):
        field += (k - 1) * d * jump + 1
        jump *= s
    return max(field, 1)


def _rf_cases(seed):
    rng = np.random.default_rng(seed)
    cases = [
        (([2, 2, 2, 2], [1, 2, 4, 8]), {}),
        (([3, 3, 2], [1, 2, 1]), {"strides": [2, 2, 1]}),
        (([5], [3]), {"strides": None}),
    ]
    for _ in range(5):
        depth = int(rng.integers(2, 5))
        kernels = [int(k) for k in rng.integers(2, 6, size=depth)]
        dilations = [int(d) for d in rng.integers(1, 5, size=depth)]
        strides = [int(s) for s in rng.integers(1, 4, size=depth)]
        strides[0] = 2  # at least one stride before the last layer
        cases.append(((kernels, dilations), {"strides": strides}))
    return cases


RECEPTIVE_FIELD = Exercise(
    grade_id="causal_cnn_receptive_field",
    function_name="receptive_field",
    reference=_ref_receptive_field,
    make_cases=_rf_cases,
    mistakes=(
        Mistake(
            "missing_plus_one",
            "your receptive field is one step short: an output also reads its own time step, "
            "so the count starts at 1 before the layers add (k - 1) * d each.",
            rf_missing_plus_one,
        ),
        Mistake(
            "ignores_dilation",
            "you left out the dilations: a layer with dilation d spaces its k taps d steps "
            "apart, so it widens the field by (k - 1) * d, not k - 1.",
            rf_ignores_dilation,
        ),
        Mistake(
            "ignores_strides",
            "you left out the strides: after layers with strides s_1 .. s_{l-1}, neighbouring "
            "steps of layer l are s_1 * ... * s_{l-1} input steps apart, so multiply its reach by that product.",
            rf_ignores_strides,
        ),
        Mistake(
            "own_stride",
            "you multiplied each layer's reach by its own stride as well: only the strides of the "
            "layers before it spread its taps apart (a layer's stride affects the layers after it).",
            rf_own_stride,
        ),
        Mistake(
            "span_per_layer",
            "you added each layer's whole span (k - 1) * d + 1: the layers share the step they "
            "stand on, so count the 1 once and add (k - 1) * d per layer.",
            rf_span_per_layer,
        ),
    ),
    # The notebook's widget measures the field with gradients (the check printed after the
    # exercise) and counts it for stride-1 stacks: the answer key, not a tool for writing it.
    forbidden=(
        "course_utils.widgets.causal_cnn:valid_conv_stack",
        "course_utils.widgets.causal_cnn:gradient_footprint",
        "course_utils.widgets.causal_cnn:footprint_span",
        "course_utils.widgets.causal_cnn:stack_summary",
        "course_utils.widgets.causal_cnn:path_counts",
    ),
    output_names=("your receptive field",),
)


# --- causal_cnn_output_length: conv_output_length(length, kernel_size, stride=1, dilation=1, padding=0)

def len_float_division(length, kernel_size, stride=1, dilation=1, padding=0):
    return (length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1


def len_ignores_dilation(length, kernel_size, stride=1, dilation=1, padding=0):
    return (length + 2 * padding - kernel_size) // stride + 1


def len_one_sided_padding(length, kernel_size, stride=1, dilation=1, padding=0):
    return (length + padding - dilation * (kernel_size - 1) - 1) // stride + 1


def len_missing_plus_one(length, kernel_size, stride=1, dilation=1, padding=0):
    return (length + 2 * padding - dilation * (kernel_size - 1) - 1) // stride


def len_rounds_up(length, kernel_size, stride=1, dilation=1, padding=0):
    return math.ceil((length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1


def len_pytorch_argument_order(length, kernel_size, stride=1, padding=0, dilation=1):
    return (length + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1


def _length_cases(seed):
    rng = np.random.default_rng(seed)
    cases = [((10, 3), {"stride": 2, "dilation": 2, "padding": 1}), ((17, 4), {"stride": 3, "dilation": 1, "padding": 2}),
             # every argument by position, in the order of the prompt's signature (nn.Conv1d's own
             # order, stride, padding, dilation, is another one)
             ((20, 3, 3, 2, 1), {})]
    while len(cases) < 10:
        kernel_size, stride, dilation, padding = (int(v) for v in (rng.integers(1, 6), rng.integers(1, 4),
                                                                   rng.integers(1, 4), rng.integers(0, 3)))
        span = dilation * (kernel_size - 1) + 1
        length = int(rng.integers(max(span - 2 * padding, 1), span + 20))
        cases.append(((length, kernel_size), {"stride": stride, "dilation": dilation, "padding": padding}))
    return cases


OUTPUT_LENGTH = Exercise(
    grade_id="causal_cnn_output_length",
    function_name="conv_output_length",
    reference=_ref_conv_output_length,
    make_cases=_length_cases,
    mistakes=(
        Mistake(
            "float_division",
            "your length is not a whole number: the kernel fits only at whole strides, so round "
            "down with floor division //.",
            len_float_division,
        ),
        Mistake(
            "ignores_dilation",
            "you used kernel_size as the kernel's width: a dilated kernel spans "
            "dilation * (kernel_size - 1) + 1 input steps.",
            len_ignores_dilation,
        ),
        Mistake(
            "one_sided_padding",
            "you added `padding` once: nn.Conv1d's padding adds that many zeros at both ends, "
            "so the padded length is length + 2 * padding.",
            len_one_sided_padding,
        ),
        Mistake(
            "missing_plus_one",
            "your length is one short: the kernel's first position (start 0) is an output too, "
            "so add 1 after dividing by the stride.",
            len_missing_plus_one,
        ),
        Mistake(
            "rounds_up",
            "you rounded up: a last window that runs past the padded input is not computed, "
            "so round down (floor), not up.",
            len_rounds_up,
        ),
        Mistake(
            "pytorch_argument_order",
            "your parameters are in nn.Conv1d's order (stride, padding, dilation), not the prompt's: "
            "conv_output_length(length, kernel_size, stride=1, dilation=1, padding=0). Called by position, "
            "conv_output_length(20, 3, 3, 2, 1) means stride 3, dilation 2 and padding 1.",
            len_pytorch_argument_order,
        ),
    ),
    output_names=("your output length",),
)

EXERCISES = {exercise.grade_id: exercise for exercise in (CONV, RECEPTIVE_FIELD, OUTPUT_LENGTH)}


# --- causal_cnn_layers_needed: a think-first question. Its visible test only checks that
# `layers_needed` is a positive number (the number is the question): every wrong value is hidden only.
# The numbers vary by student (course_utils.grading.questions): `steps`, the field to reach.
LAYERS_MISTAKES = (
    Mistake('layers_no_dilation', "you grew the field by one step a layer, as with dilation 1; here the "
                                  "dilations double from layer to layer.",
                                  lambda steps: steps - 1),
    Mistake('layers_rounded_down', "you rounded the logarithm down: work out the field of that many layers and "
                                   "compare it with {steps:,} steps.",
                                   lambda steps: _ref_layers_to_reach(steps) - 1),
    Mistake('layers_one_per_step', "you gave every input step a layer of its own; the field of kernel 2 with "
                                   "doubling dilations grows much faster than the depth.",
                                   lambda steps: steps),
)
HIDDEN_ONLY = HIDDEN_ONLY | {mistake.name for mistake in LAYERS_MISTAKES}
EXERCISES["causal_cnn_layers_needed"] = think_first(
    "causal_cnn_layers_needed", "layers_needed", lambda steps: _ref_layers_to_reach(steps),
    LAYERS_MISTAKES, "your number of layers")


def check(grade_id, fn):
    """Raise GradingError naming the mistake if fn is wrong for the exercise `grade_id`."""
    return _check(EXERCISES, grade_id, fn)


def diagnose(grade_id, fn):
    """Raise GradingError if `fn` crashes, breaks a rule or makes a catalogued mistake; silent on an
    uncatalogued wrong answer, which the test cell's last hidden line (`check`) then fails."""
    return _diagnose(EXERCISES, grade_id, fn)
