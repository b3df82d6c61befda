"""Functional reference answers for notebook 02 that `causal_cnn.py` does not already give.

`causal_conv1d` is the functional form of `CausalConv1d`: the student writes it with `F.pad`
and `F.conv1d`, so that each catalogued mistake is one line away from it.
"""
from torch import nn

from .causal_cnn import CausalConv1d, conv_output_length, receptive_field

__all__ = ["causal_conv1d", "receptive_field", "conv_output_length"]


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

