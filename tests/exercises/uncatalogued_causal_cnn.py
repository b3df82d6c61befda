"""Wrong answers to notebook 02's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


# ---------------------------------------------------------------- causal_conv1d
def conv_same_padding(x, weight, bias=None, dilation=1):
    """Pads half the span on each side (padding="same"): reads the future."""
    return F.conv1d(x, weight, bias, dilation=dilation, padding="same")


def conv_pad_ignores_dilation(x, weight, bias=None, dilation=1):
    """Pads k - 1 zeros whatever the dilation."""
    k = weight.shape[-1]
    return F.conv1d(F.pad(x, (k - 1, 0)), weight, bias, dilation=dilation)


def conv_no_dilation_in_conv(x, weight, bias=None, dilation=1):
    """Pads (k - 1) d zeros but convolves without dilation, then cuts to T."""
    k = weight.shape[-1]
    return F.conv1d(F.pad(x, ((k - 1) * dilation, 0)), weight, bias)[..., -x.shape[-1]:]


def conv_ignores_dilation(x, weight, bias=None, dilation=1):
    """Ignores the dilation argument altogether."""
    k = weight.shape[-1]
    return F.conv1d(F.pad(x, (k - 1, 0)), weight, bias)


def conv_flipped_kernel(x, weight, bias=None, dilation=1):
    """Flips the kernel (a true convolution instead of PyTorch's cross-correlation)."""
    k = weight.shape[-1]
    return F.conv1d(F.pad(x, ((k - 1) * dilation, 0)), weight.flip(-1), bias, dilation=dilation)


def conv_no_bias(x, weight, bias=None, dilation=1):
    """Forgets the bias."""
    k = weight.shape[-1]
    return F.conv1d(F.pad(x, ((k - 1) * dilation, 0)), weight, None, dilation=dilation)


def conv_right_padding(x, weight, bias=None, dilation=1):
    """Pads on the right: every output reads the future."""
    k = weight.shape[-1]
    return F.conv1d(F.pad(x, (0, (k - 1) * dilation)), weight, bias, dilation=dilation)


def conv_chomp_wrong_end(x, weight, bias=None, dilation=1):
    """Pads both ends, then keeps the last T outputs instead of the first T."""
    p = (weight.shape[-1] - 1) * dilation
    return F.conv1d(x, weight, bias, dilation=dilation, padding=p)[..., -x.shape[-1]:]


def conv_shifted_one_step(x, weight, bias=None, dilation=1):
    """Pads one zero too many and drops the last output: output t reads up to t - 1 only."""
    p = (weight.shape[-1] - 1) * dilation + 1
    return F.conv1d(F.pad(x, (p, 0)), weight, bias, dilation=dilation)[..., :-1]


def conv_replicate_padding(x, weight, bias=None, dilation=1):
    """Pads on the left by repeating the first input instead of zeros."""
    p = (weight.shape[-1] - 1) * dilation
    return F.conv1d(F.pad(x, (p, 0), mode="replicate"), weight, bias, dilation=dilation)


def conv_reflect_padding(x, weight, bias=None, dilation=1):
    """Pads on the left with a mirror image of the start (x_p .. x_1): the first outputs read the future."""
    p = (weight.shape[-1] - 1) * dilation
    return F.conv1d(F.pad(x, (p, 0), mode="reflect") if p else x, weight, bias, dilation=dilation)


def conv_circular_padding(x, weight, bias=None, dilation=1):
    """Pads on the left with the end of the sequence (circular)."""
    p = (weight.shape[-1] - 1) * dilation
    return F.conv1d(F.pad(x, (p, 0), mode="circular") if p else x, weight, bias, dilation=dilation)


def conv_first_sequence_only(x, weight, bias=None, dilation=1):
    """Convolves the first sequence of the batch and repeats it (right for batch 1)."""
    p = (weight.shape[-1] - 1) * dilation
    y = F.conv1d(F.pad(x[:1], (p, 0)), weight, bias, dilation=dilation)
    return y.expand(x.shape[0], -1, -1).clone()


def conv_float32(x, weight, bias=None, dilation=1):
    """Casts everything to float32 whatever the inputs' dtype."""
    p = (weight.shape[-1] - 1) * dilation
    return F.conv1d(F.pad(x.float(), (p, 0)), weight.float(), None if bias is None else bias.float(),
                    dilation=dilation)


def conv_kernel_size_from_channels(x, weight, bias=None, dilation=1):
    """Reads the kernel size from weight.shape[1] (C_in) instead of weight.shape[-1]."""
    k = weight.shape[1]
    return F.conv1d(F.pad(x, ((k - 1) * dilation, 0)), weight, bias, dilation=dilation)[..., -x.shape[-1]:]


def conv_sums_input_channels(x, weight, bias=None, dilation=1):
    """Adds the input channels first, as if C_in were 1."""
    p = (weight.shape[-1] - 1) * dilation
    return F.conv1d(F.pad(x.sum(1, keepdim=True), (p, 0)), weight.sum(1, keepdim=True), bias, dilation=dilation)


def conv_even_kernel_slip(x, weight, bias=None, dilation=1):
    """Pads 2 * (k // 2) * d zeros on the left and keeps the last T outputs (not wrong after all: see NOT_WRONG)."""
    p = 2 * (weight.shape[-1] // 2) * dilation
    return F.conv1d(F.pad(x, (p, 0)), weight, bias, dilation=dilation)[..., -x.shape[-1]:]


def conv_pads_input_in_place(x, weight, bias=None, dilation=1):
    """Right values, but nudges the caller's x in place on the way."""
    p = (weight.shape[-1] - 1) * dilation
    out = F.conv1d(F.pad(x, (p, 0)), weight, None, dilation=dilation)
    if bias is not None:
        out += bias[:, None]
    x.mul_(1.0)
    x[..., :1] += 0.0 * x[..., :1] + 1e-3
    return out


def conv_bias_as_scalar_first_channel(x, weight, bias=None, dilation=1):
    """Adds only bias[0] to every output channel (right when C_out is 1)."""
    p = (weight.shape[-1] - 1) * dilation
    out = F.conv1d(F.pad(x, (p, 0)), weight, None, dilation=dilation)
    return out if bias is None else out + bias[0]


def conv_nn_conv1d_module(x, weight, bias=None, dilation=1):
    """Uses nn.Conv1d with half the span padded on each side and keeps the first T outputs."""
    k = weight.shape[-1]
    layer = nn.Conv1d(weight.shape[1], weight.shape[0], k, dilation=dilation, padding=(k - 1) * dilation // 2,
                      bias=bias is not None).to(x.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer(x)[..., : x.shape[-1]]


def conv_negative_index_wraps(x, weight, bias=None, dilation=1):
    """A loop over the taps that indexes x[..., t - back] without padding: negative indices wrap to the end."""
    B, C_in, T = x.shape
    C_out, _, k = weight.shape
    out = torch.zeros(B, C_out, T, dtype=x.dtype)
    for t in range(T):
        for j in range(k):
            back = (k - 1 - j) * dilation
            out[:, :, t] += x[:, :, t - back] @ weight[:, :, j].T
    return out if bias is None else out + bias[:, None]


# ---------------------------------------------------------------- receptive_field
def _strides(kernel_sizes, strides):
    return [1] * len(kernel_sizes) if strides is None else strides


def field_own_stride(kernel_sizes, dilations, strides=None):
    """Multiplies each layer's reach by its own stride instead of the strides below it."""
    s = _strides(kernel_sizes, strides)
    return 1 + sum((k - 1) * d * st for k, d, st in zip(kernel_sizes, dilations, s))


def field_strides_including_own(kernel_sizes, dilations, strides=None):
    """Multiplies by the product of the strides up to and including the layer's own."""
    s, jump, r = _strides(kernel_sizes, strides), 1, 1
    for k, d, st in zip(kernel_sizes, dilations, s):
        jump *= st
        r += (k - 1) * d * jump
    return r


def field_ignores_strides(kernel_sizes, dilations, strides=None):
    """Ignores the strides."""
    return 1 + sum((k - 1) * d for k, d in zip(kernel_sizes, dilations))


def field_k_times_d(kernel_sizes, dilations, strides=None):
    """Adds k * d per layer instead of (k - 1) * d."""
    s, jump, r = _strides(kernel_sizes, strides), 1, 1
    for k, d, st in zip(kernel_sizes, dilations, s):
        r += k * d * jump
        jump *= st
    return r


def field_no_plus_one(kernel_sizes, dilations, strides=None):
    """Forgets the output's own step (the + 1)."""
    s, jump, r = _strides(kernel_sizes, strides), 1, 0
    for k, d, st in zip(kernel_sizes, dilations, s):
        r += (k - 1) * d * jump
        jump *= st
    return r


def field_product_of_kernels(kernel_sizes, dilations, strides=None):
    """R = product of the kernel sizes (right for kernel 2 with doubling dilations only)."""
    return math.prod(kernel_sizes)


def field_none_strides_zip(kernel_sizes, dilations, strides=None):
    """Zips with `strides or []`, so a stack without strides counts no layer."""
    jump, r = 1, 1
    for k, d, st in zip(kernel_sizes, dilations, strides or []):
        r += (k - 1) * d * jump
        jump *= st
    return r


def field_float(kernel_sizes, dilations, strides=None):
    """Right value as a float (np.prod of an empty list is 1.0)."""
    s = _strides(kernel_sizes, strides)
    return 1 + sum((k - 1) * d * np.prod(s[:i]) for i, (k, d) in enumerate(zip(kernel_sizes, dilations))) * 1.0


def field_numpy_int(kernel_sizes, dilations, strides=None):
    """Right value as a NumPy integer, not an int (accepted: see NOT_WRONG)."""
    s = np.array(_strides(kernel_sizes, strides), dtype=np.int64)
    jumps = np.concatenate([[1], np.cumprod(s)[:-1]]).astype(np.int64) if len(s) else np.array([], dtype=np.int64)
    return np.int64(1) + np.sum((np.array(kernel_sizes) - 1) * np.array(dilations) * jumps, dtype=np.int64)


def field_inserts_into_strides(kernel_sizes, dilations, strides=None):
    """Shifts the caller's strides list in place (insert(0, 1)) to get the strides below each layer."""
    if strides is None:
        strides = [1] * len(kernel_sizes)
    strides.insert(0, 1)
    jump, r = 1, 1
    for k, d, st in zip(kernel_sizes, dilations, strides):
        jump *= st
        r += (k - 1) * d * jump
    return r


def field_next_layers_stride(kernel_sizes, dilations, strides=None):
    """Multiplies by the stride of the layer above."""
    s = _strides(kernel_sizes, strides) + [1]
    return 1 + sum((k - 1) * d * s[i + 1] for i, (k, d) in enumerate(zip(kernel_sizes, dilations)))


def field_previous_stride_only(kernel_sizes, dilations, strides=None):
    """Multiplies by the stride of the layer just below, not the product of all the strides below."""
    s = _strides(kernel_sizes, strides)
    return 1 + sum((k - 1) * d * (s[i - 1] if i else 1) for i, (k, d) in enumerate(zip(kernel_sizes, dilations)))


def field_strides_added(kernel_sizes, dilations, strides=None):
    """Adds the strides below (1 + sum of (s - 1)) instead of multiplying them."""
    s, jump, r = _strides(kernel_sizes, strides), 1, 1
    for k, d, st in zip(kernel_sizes, dilations, s):
        r += (k - 1) * d * jump
        jump += st - 1
    return r


def field_measured_by_the_widget(kernel_sizes, dilations, strides=None):
    """Measures the field with the notebook's own gradient demo (its answer key) instead of the formula."""
    from course_utils.widgets import causal_cnn as demo

    net = demo.valid_conv_stack(list(kernel_sizes), list(dilations), strides and list(strides), seed=0)
    return demo.footprint_span(demo.gradient_footprint(net, length=4096))


class AlwaysEqualInt(int):
    """An int that says it equals anything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


def field_always_equal(kernel_sizes, dilations, strides=None):
    """Returns an int subclass whose == is always True."""
    return AlwaysEqualInt(0)


# ---------------------------------------------------------------- conv_output_length
def length_no_dilation(length, kernel_size, stride=1, dilation=1, padding=0):
    """Forgets the dilation."""
    return (length + 2 * padding - kernel_size) // stride + 1


def length_padding_once(length, kernel_size, stride=1, dilation=1, padding=0):
    """Adds the padding once instead of at both ends."""
    return (length + padding - dilation * (kernel_size - 1) - 1) // stride + 1


def length_ceil(length, kernel_size, stride=1, dilation=1, padding=0):
    """Rounds the division up."""
    return math.ceil((length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1


def length_true_division(length, kernel_size, stride=1, dilation=1, padding=0):
    """Uses / instead of //, so the result is a float (and not a whole number with strides)."""
    return (length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1


def length_dilation_times_k(length, kernel_size, stride=1, dilation=1, padding=0):
    """Takes the span as d * k instead of d (k - 1) + 1."""
    return (length + 2 * padding - dilation * kernel_size) // stride + 1


def length_forgets_minus_one_plus_one(length, kernel_size, stride=1, dilation=1, padding=0):
    """Drops the - 1 and the + 1 together: right without a stride only."""
    return (length + 2 * padding - dilation * (kernel_size - 1)) // stride


def length_round(length, kernel_size, stride=1, dilation=1, padding=0):
    """Rounds the division to nearest."""
    return round((length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1


def length_numpy_floor(length, kernel_size, stride=1, dilation=1, padding=0):
    """Right value as a float (np.floor returns one)."""
    return np.floor((length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1


def length_swapped_parameters(length, kernel_size, padding=0, stride=1, dilation=1):
    """Declares the parameters in the order (padding, stride, dilation): wrong when passed by position."""
    return (length + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1


def length_causal_padding(length, kernel_size, stride=1, dilation=1, padding=0):
    """Pads one side only (the causal layer's padding)."""
    return (length + padding - dilation * (kernel_size - 1) - 1) // stride + 1


def length_lookup_of_visible_cases(length, kernel_size, stride=1, dilation=1, padding=0):
    """Looks up the visible tests' answers and otherwise returns length - kernel_size + 1."""
    known = {(10, 3, 1, 1, 0): 8, (10, 3, 2, 1, 0): 4, (10, 3, 1, 2, 0): 6, (10, 3, 1, 1, 1): 10,
             (11, 2, 3, 1, 2): 5, (23, 4, 3, 2, 1): 7}
    return known.get((length, kernel_size, stride, dilation, padding), length - kernel_size + 1)


def length_always_equal(length, kernel_size, stride=1, dilation=1, padding=0):
    """Returns an int subclass whose == is always True."""
    return AlwaysEqualInt(0)


# ---------------------------------------------------------------- layers_needed (10)
layers_needed_nine = 9              # 2^9 = 512 is not 1,000
layers_needed_eleven = 11
layers_needed_no_dilation = 999
layers_needed_log2 = math.log2(1000)
layers_needed_string = "10"
layers_needed_always_equal = AlwaysEqualInt(1)


WRONG_ANSWERS = {
    "causal_cnn_conv": [
        conv_same_padding, conv_pad_ignores_dilation, conv_no_dilation_in_conv, conv_ignores_dilation,
        conv_flipped_kernel, conv_no_bias, conv_right_padding, conv_chomp_wrong_end, conv_shifted_one_step,
        conv_replicate_padding, conv_reflect_padding, conv_circular_padding, conv_first_sequence_only,
        conv_kernel_size_from_channels, conv_sums_input_channels,
        conv_pads_input_in_place, conv_bias_as_scalar_first_channel, conv_nn_conv1d_module, conv_negative_index_wraps,
    ],
    "causal_cnn_receptive_field": [
        field_own_stride, field_strides_including_own, field_ignores_strides, field_k_times_d,
        field_no_plus_one, field_product_of_kernels, field_none_strides_zip, field_float,
        field_inserts_into_strides, field_next_layers_stride, field_always_equal,
        field_previous_stride_only, field_strides_added, field_measured_by_the_widget,
    ],
    "causal_cnn_output_length": [
        length_no_dilation, length_padding_once, length_ceil, length_true_division, length_dilation_times_k,
        length_forgets_minus_one_plus_one, length_round, length_numpy_floor,
        length_causal_padding, length_always_equal, length_lookup_of_visible_cases,
        length_swapped_parameters,
    ],
    "causal_cnn_layers_needed": [
        layers_needed_nine, layers_needed_eleven, layers_needed_no_dilation, layers_needed_log2,
        layers_needed_string, layers_needed_always_equal,
    ],
}

# Wrong answers that PASS the test cell today; each moves into WRONG_ANSWERS once the hidden tests
# catch it. (Phase 1's holes are all closed.)
HOLES = {}

# Tried as wrong answers in phase 1, passed, and on reading the reference turned out right:
# * conv_even_kernel_slip pads more zeros than (k - 1) d on the left, but keeping the last T
#   outputs drops exactly the extra ones: output t still reads x[t - (k - 1) d .. t], for any k.
# * field_numpy_int returns a NumPy integer, which the graders count as an int (as
#   `mistakes.kind` says) and which behaves as one everywhere the notebook uses it.
# * conv_float32: a float32 result for float64 inputs. The course accepts float32 answers
#   everywhere (tests/exercises/test_categories.py: "an answer computed in float32 must pass"),
#   comparing them at float32's tolerances; a cast is indistinguishable from that.
NOT_WRONG = {
    "causal_cnn_conv": [conv_even_kernel_slip, conv_float32],
    "causal_cnn_receptive_field": [field_numpy_int],
}


# Found blind in phase 2: every case passed the dilation explicitly, and the visible call that
# relies on the default has a kernel of size 1, where the dilation changes nothing; the hidden
# cases now hold a kernel of 3 with the default dilation.
def conv_default_dilation_two(x, weight, bias=None, dilation=2):
    """Right for every dilation it is given, wrong (dilation 2) when it is left at its default."""
    k = weight.shape[-1]
    return F.conv1d(F.pad(x, ((k - 1) * dilation, 0)), weight, bias, dilation=dilation)


WRONG_ANSWERS["causal_cnn_conv"].append(conv_default_dilation_two)
