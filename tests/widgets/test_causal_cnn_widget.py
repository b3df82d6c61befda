"""The pure functions behind notebook 02's demos and widget."""
import math

import matplotlib
import numpy as np
import pytest
import torch
from torch import nn

from course_utils.reference import receptive_field
from course_utils.widgets import causal_cnn as demo

matplotlib.use("Agg")


def test_schedules():
    assert demo.dilation_schedule("doubling: 1, 2, 4, 8, ...", 4) == [1, 2, 4, 8]
    assert demo.dilation_schedule("constant: 1, 1, 1, ...", 3) == [1, 1, 1]
    assert demo.dilation_schedule("times 4: 1, 4, 16, ...", 3) == [1, 4, 16]
    with pytest.raises(ValueError):
        demo.dilation_schedule("halving", 3)


def test_doubling_kernel_two_reads_every_step_once():
    counts = demo.path_counts(2, [1, 2, 4, 8], 20)
    assert counts[-16:].tolist() == [1] * 16 and counts[:-16].tolist() == [0] * 4


def test_plain_stack_counts_are_binomial():
    counts = demo.path_counts(2, [1] * 5, 6)
    assert counts[::-1].tolist() == [math.comb(5, j) for j in range(6)]


def test_counts_equal_the_gradient_of_an_all_ones_linear_stack():
    kernel_size, dilations, length = 3, [1, 2, 3], 20
    x = torch.zeros(1, 1, length, dtype=torch.float64, requires_grad=True)
    h = x
    for d in dilations:
        h = nn.functional.conv1d(nn.functional.pad(h, ((kernel_size - 1) * d, 0)),
                                 torch.ones(1, 1, kernel_size, dtype=torch.float64), dilation=d)
    h[..., -1].sum().backward()
    assert x.grad[0, 0].numpy().astype(int).tolist() == demo.path_counts(kernel_size, dilations, length).tolist()


def test_reached_nodes_match_counts():
    levels = demo.reached_nodes(2, [1, 4, 16], 30)
    assert len(levels) == 4 and levels[-1].sum() == 1 and levels[-1][-1]
    assert (levels[0] == (demo.path_counts(2, [1, 4, 16], 30) > 0)).all()


def test_stack_summary_finds_holes():
    assert demo.stack_summary(2, [1, 4, 16]) == {"span": 22, "read": 8, "holes": 14, "min_paths": 1, "max_paths": 1}
    assert demo.stack_summary(4, [1, 4, 16])["holes"] == 0


@pytest.mark.parametrize("seed", range(8))
def test_gradient_footprint_measures_the_receptive_field(seed):
    rng = np.random.default_rng(seed)
    depth = int(rng.integers(1, 5))
    kernels = [int(v) for v in rng.integers(1, 5, size=depth)]
    dilations = [int(v) for v in rng.integers(1, 4, size=depth)]
    strides = [int(v) for v in rng.integers(1, 3, size=depth)]
    net = demo.valid_conv_stack(kernels, dilations, strides, seed=seed)
    span = demo.footprint_span(demo.gradient_footprint(net, length=200))
    assert span == receptive_field(kernels, dilations, strides)


def test_future_leak_separates_causal_from_same_padding():
    torch.manual_seed(0)
    x = torch.randn(1, 2, 20, dtype=torch.float64)
    same = nn.Conv1d(2, 3, 5, padding="same").double()
    both = nn.Conv1d(2, 3, 3, dilation=2, padding=4).double()
    causal = demo.future_leak(lambda z: both(z)[..., :20], x, 9)
    leaky = demo.future_leak(same, x, 9)
    assert causal.shape == (20,) and causal[:10].max() == 0 and causal[10:].max() > 0
    assert leaky[8:10].min() > 0 and leaky[:8].max() == 0


def test_drawing_runs():
    import matplotlib.pyplot as plt

    ax = demo.draw_stack(3, [1, 2, 4])
    demo.draw_footprint(demo.path_counts(3, [1, 2, 4], 15))
    assert "kernel 3" in ax.get_title()
    plt.close("all")
