"""The reference causal convolution and receptive-field arithmetic."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.reference.causal_cnn import CausalConv1d, conv_output_length, receptive_field

SETTINGS = settings(max_examples=30, deadline=None)
DT = torch.float64


@pytest.mark.parametrize("kernel_size,dilation", [(1, 1), (2, 1), (3, 2), (4, 3)])
def test_causal_conv_matches_left_padded_conv1d(kernel_size, dilation):
    torch.manual_seed(kernel_size * 10 + dilation)
    layer = CausalConv1d(3, 4, kernel_size, dilation=dilation).to(DT)
    assert isinstance(layer.conv, torch.nn.Conv1d) and layer.conv.padding == (0,)
    x = torch.randn(2, 3, 9, dtype=DT)
    out = layer(x)
    assert out.shape == (2, 4, 9)
    pad = (kernel_size - 1) * dilation
    padded = torch.cat([torch.zeros(2, 3, pad, dtype=DT), x], dim=-1)
    expected = F.conv1d(padded, layer.conv.weight, layer.conv.bias, dilation=dilation)
    torch.testing.assert_close(out, expected)


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 10), st.integers(0, 10_000))
def test_causal_conv_ignores_the_future(kernel_size, dilation, T, seed):
    torch.manual_seed(seed)
    layer = CausalConv1d(2, 3, kernel_size, dilation=dilation).to(DT)
    x = torch.randn(1, 2, T, dtype=DT)
    t = int(torch.randint(T, (1,)))
    changed = x.clone()
    changed[..., t + 1 :] += 5.0
    torch.testing.assert_close(layer(changed)[..., : t + 1], layer(x)[..., : t + 1])


def measured_span(stack, length):
    """Inputs with a nonzero gradient for the last output: first to last, inclusive."""
    x = torch.zeros(1, 1, length, dtype=DT, requires_grad=True)
    stack(x)[0, 0, -1].backward()
    touched = x.grad[0, 0].nonzero().flatten()
    return int(touched.max() - touched.min() + 1), int(touched.max())


def positive_weights(module):
    # Strictly positive weights: no cancellation can hide an input from the gradient.
    with torch.no_grad():
        for p in module.parameters():
            p.uniform_(0.1, 1.0)
    return module


layers = st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), min_size=1, max_size=4)


@SETTINGS
@given(layers)
def test_receptive_field_of_causal_stack_matches_gradient(spec):
    kernel_sizes, dilations = zip(*spec)
    rf = receptive_field(kernel_sizes, dilations)
    stack = torch.nn.Sequential(*[CausalConv1d(1, 1, k, dilation=d) for k, d in spec]).to(DT)
    span, last = measured_span(positive_weights(stack), rf + 3)
    assert span == rf
    assert last == rf + 2  # the last output sees up to the last input, not beyond


@SETTINGS
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.integers(1, 2), st.integers(1, 3)), min_size=1, max_size=3
    )
)
def test_receptive_field_with_strides_matches_gradient(spec):
    kernel_sizes, dilations, strides = zip(*spec)
    rf = receptive_field(kernel_sizes, dilations, strides)
    stack = torch.nn.Sequential(
        *[torch.nn.Conv1d(1, 1, k, stride=s, dilation=d) for k, d, s in spec]
    ).to(DT)
    # Choose an input length that the stack consumes exactly, so the last output's field
    # ends at the last input: work backwards from one output.
    length = 1
    for k, d, s in reversed(spec):
        length = (length - 1) * s + d * (k - 1) + 1
    span, last = measured_span(positive_weights(stack), length)
    assert span == rf == length
    assert last == length - 1


def test_receptive_field_hand_values_and_errors():
    assert receptive_field([], []) == 1
    assert receptive_field([2, 2, 2, 2], [1, 2, 4, 8]) == 16  # WaveNet-style doubling
    assert receptive_field([3, 3], [1, 1], [2, 1]) == 1 + 2 + 2 * 2
    with pytest.raises(ValueError):
        receptive_field([3, 3], [1])
    with pytest.raises(ValueError):
        receptive_field([3], [1], [1, 1])
    with pytest.raises(ValueError):
        receptive_field([0], [1])
    with pytest.raises(ValueError):
        receptive_field([3], [-1])


@SETTINGS
@given(
    st.integers(1, 30), st.integers(1, 5), st.integers(1, 4), st.integers(1, 3), st.integers(0, 3)
)
def test_conv_output_length_matches_conv1d(length, kernel_size, stride, dilation, padding):
    conv = torch.nn.Conv1d(1, 1, kernel_size, stride=stride, dilation=dilation, padding=padding)
    if length + 2 * padding < dilation * (kernel_size - 1) + 1:
        with pytest.raises(ValueError):
            conv_output_length(length, kernel_size, stride, dilation, padding)
        return
    actual = conv(torch.zeros(1, 1, length)).shape[-1]
    assert conv_output_length(length, kernel_size, stride, dilation, padding) == actual
