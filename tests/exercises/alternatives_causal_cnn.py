"""Second correct implementations of notebook 02's exercises, written differently from the
reference: the real test cells must pass them too."""
import numpy as np
import torch
from torch import nn


def causal_conv1d_chomp(x, weight, bias=None, dilation=1):
    """nn.Conv1d padding both ends, then keep the first T outputs (the TCN paper's "chomp")."""
    out_channels, in_channels, kernel_size = weight.shape
    pad = (kernel_size - 1) * dilation
    conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=pad, dilation=dilation,
                     bias=bias is not None).to(weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(weight)
        if bias is not None:
            conv.bias.copy_(bias)
        return conv(x)[..., : x.shape[-1]]


def causal_conv1d_taps(x, weight, bias=None, dilation=1):
    """Sum of shifted copies: tap j of the kernel reads the input (k - 1 - j) * dilation steps back."""
    kernel_size = weight.shape[-1]
    T = x.shape[-1]
    out = torch.zeros(x.shape[0], weight.shape[0], T, dtype=x.dtype)
    for j in range(kernel_size):
        shift = (kernel_size - 1 - j) * dilation
        if shift >= T:
            continue
        shifted = torch.zeros_like(x)
        shifted[..., shift:] = x[..., : T - shift]
        out += torch.einsum("oc,bct->bot", weight[..., j], shifted)
    if bias is not None:
        out += bias[:, None]
    return out


def receptive_field_top_down(kernel_sizes, dilations, strides=None):
    """Walk down from one output: r inputs of layer l need s_l * (r - 1) + (k_l - 1) * d_l + 1 below."""
    strides = list(strides) if strides is not None else [1] * len(kernel_sizes)
    r = 1
    for k, d, s in reversed(list(zip(kernel_sizes, dilations, strides))):
        r = s * (r - 1) + (k - 1) * d + 1
    return r


def conv_output_length_count(length, kernel_size, stride=1, dilation=1, padding=0):
    """Count the start positions where the whole dilated kernel fits in the padded input."""
    span = dilation * (kernel_size - 1) + 1
    return len(range(0, length + 2 * padding - span + 1, stride))


ALTERNATIVES = {
    "causal_cnn_layers_needed": [10, 10.0, 2 * 5, np.ceil(np.log2(1000)).astype(np.int64)],
    "causal_cnn_conv": [causal_conv1d_chomp, causal_conv1d_taps],
    "causal_cnn_receptive_field": [receptive_field_top_down],
    "causal_cnn_output_length": [conv_output_length_count],
}
