"""Causal 1-D convolution and receptive-field arithmetic.

Ground truth for notebook 02 (causal CNNs, receptive fields).

A convolution is causal when output t depends on inputs 0..t only. PyTorch's ``nn.Conv1d``
with symmetric padding looks both ways; padding only on the left (the past) by
(kernel_size - 1) * dilation zeros makes each output see its own time step and the
(kernel_size - 1) * dilation steps before it, and keeps the length T unchanged.
"""

import math

import torch.nn.functional as F
from torch import nn

__all__ = ["layers_to_reach", "CausalConv1d", "causal_conv1d", "receptive_field", "conv_output_length"]


class CausalConv1d(nn.Module):
    """A 1-D convolution whose output at time t sees inputs at times <= t only.

    Attribute ``conv`` is the underlying ``nn.Conv1d`` (padding=0); the causal padding is
    added in ``forward`` with ``F.pad``, on the left only.
    """

    def __init__(self, in_channels, out_channels, kernel_size, dilation=1, bias=True):
        super().__init__()
        if kernel_size < 1 or dilation < 1:
            raise ValueError(
                f"kernel_size and dilation must be positive, got {kernel_size} and {dilation}"
            )
        # How far into the past the kernel reaches beyond the current step.
        self.left_padding = (kernel_size - 1) * dilation
        self.conv = nn.Conv1d(
            in_channels, out_channels, kernel_size, dilation=dilation, padding=0, bias=bias
        )

    def forward(self, x):
        """Shape of x: (batch_size, in_channels, T) -> output (batch_size, out_channels, T)."""
        # F.pad's (left, right) pads the last axis: zeros before time 0, none after T - 1.
        return self.conv(F.pad(x, (self.left_padding, 0)))


def _check_positive_ints(name, values):
    values = list(values)
    for value in values:
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be positive integers, got {values}")
    return [int(value) for value in values]


def receptive_field(kernel_sizes, dilations, strides=None):
    """How many consecutive input steps one output of a stack of convolutions depends on.

    kernel_sizes, dilations, strides: one entry per layer, first layer first
    (strides=None means stride 1 everywhere).

        RF = 1 + sum_l (k_l - 1) * d_l * prod_{j < l} s_j

    Layer l widens the field by (k_l - 1) * d_l of its own input steps, and each of those steps
    is prod_{j<l} s_j input steps apart because the earlier layers subsampled by their strides.
    An empty stack has a receptive field of 1 (the output is the input).

    Raises ValueError if the lists differ in length or hold a non-positive value.
    """
    kernel_sizes = _check_positive_ints("kernel_sizes", kernel_sizes)
    dilations = _check_positive_ints("dilations", dilations)
    if strides is None:
        strides = [1] * len(kernel_sizes)
    strides = _check_positive_ints("strides", strides)
    if not len(kernel_sizes) == len(dilations) == len(strides):
        raise ValueError(
            "need one kernel size, dilation and stride per layer, got "
            f"{len(kernel_sizes)}, {len(dilations)} and {len(strides)}"
        )
    field = 1
    jump = 1  # Distance, in input steps, between neighbouring inputs of the current layer.
    for k, d, s in zip(kernel_sizes, dilations, strides):
        field += (k - 1) * d * jump
        jump *= s
    return field


def conv_output_length(length, kernel_size, stride=1, dilation=1, padding=0):
    """Output length of ``nn.Conv1d`` on an input of the given length (PyTorch's formula).

        L_out = floor((L_in + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1)

    The kernel spans dilation * (kernel_size - 1) + 1 steps; it fits at every stride-th start
    position of the padded input. Raises ValueError if the result would be below 1 (the input
    is shorter than the kernel's span), as PyTorch does.
    """
    if length < 0 or kernel_size < 1 or stride < 1 or dilation < 1 or padding < 0:
        raise ValueError(
            "need length >= 0, kernel_size, stride, dilation >= 1 and padding >= 0; got "
            f"{length}, {kernel_size}, {stride}, {dilation}, {padding}"
        )
    out = math.floor((length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1)
    if out < 1:
        span = dilation * (kernel_size - 1) + 1
        raise ValueError(
            f"input of length {length} (padded: {length + 2 * padding}) is shorter than the "
            f"kernel's span of {span} steps"
        )
    return out


def causal_conv1d(x, weight, bias=None, dilation=1):
    """A causal 1-D convolution: (B, C_in, T) -> (B, C_out, T); output t reads inputs <= t.

    weight: (C_out, C_in, kernel_size), bias: (C_out,) or None. Computed as ``nn.Conv1d`` on
    the input padded on the left by (kernel_size - 1) * dilation zeros (CausalConv1d).
    """
    out_channels, in_channels, kernel_size = weight.shape
    layer = CausalConv1d(in_channels, out_channels, kernel_size, dilation=dilation, bias=bias is not None)
    layer = layer.to(dtype=weight.dtype)
    layer.conv.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
    if bias is not None:
        layer.conv.bias = nn.Parameter(bias.detach().clone(), requires_grad=False)
    return layer(x).detach()


def layers_to_reach(field, kernel_size=2):
    """The fewest layers of a causal stack of `kernel_size` with dilations 1, 2, 4, ... whose
    receptive field is at least `field` (notebook 02's think-first question: 1000 -> 10)."""
    layers = 0
    while receptive_field([kernel_size] * layers, [2 ** i for i in range(layers)]) < field:
        layers += 1
    return layers
