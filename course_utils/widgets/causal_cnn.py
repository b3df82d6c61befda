"""Pure compute and drawing behind the demos of notebook 02 (causal CNNs, receptive fields).

Nothing here knows an exercise's answer: the stacks measured by gradients are plain
``nn.Conv1d`` layers without padding (padding changes which outputs exist, not how far back one
output reaches), and the connectivity counts are integer bookkeeping over time steps.

Conventions: time is the last axis, ``(batch, channels, T)`` as in ``nn.Conv1d``; a stack is
described first layer first; "the last output" is the output at the final time step.
"""
import numpy as np
import torch
from torch import nn

__all__ = [
    "SCHEDULES", "dilation_schedule", "path_counts", "reached_nodes", "valid_conv_stack",
    "gradient_footprint", "footprint_span", "future_leak", "stack_summary", "draw_stack",
    "draw_footprint",
]

# Name shown in the widget -> dilation of layer l (l = 0 for the first layer).
SCHEDULES = {
    "doubling: 1, 2, 4, 8, ...": lambda layer: 2 ** layer,
    "constant: 1, 1, 1, ...": lambda layer: 1,
    "constant: 2, 2, 2, ...": lambda layer: 2,
    "times 3: 1, 3, 9, ...": lambda layer: 3 ** layer,
    "times 4: 1, 4, 16, ...": lambda layer: 4 ** layer,
}


def dilation_schedule(name, depth):
    """The dilations of a stack of `depth` layers under a named schedule of SCHEDULES."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; choose one of {list(SCHEDULES)}")
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    return [SCHEDULES[name](layer) for layer in range(depth)]


def _check_stack(kernel_size, dilations):
    if kernel_size < 1 or any(d < 1 for d in dilations):
        raise ValueError(f"kernel_size and dilations must be >= 1, got {kernel_size} and {list(dilations)}")


def path_counts(kernel_size, dilations, length):
    """How many distinct paths lead from each input step to the last output of a causal stack.

    Stride 1; layer l's output at step t reads its input at steps t - j * dilations[l],
    j = 0 .. kernel_size - 1 (steps before 0 are padding and lead nowhere). Returns an int64
    array of shape (length,); entry t counts the paths from input t to output length - 1.
    A zero inside the receptive field is a step the stack never reads: a hole.
    """
    _check_stack(kernel_size, dilations)
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    counts = np.zeros(length, dtype=np.int64)
    counts[-1] = 1
    for d in reversed(list(dilations)):  # walk down from the output to the input
        below = np.zeros_like(counts)
        for j in range(kernel_size):
            shift = j * d
            if shift < length:
                below[: length - shift] += counts[shift:]
        counts = below
    return counts


def reached_nodes(kernel_size, dilations, length):
    """Which nodes lie on a path to the last output: a list of boolean arrays of shape
    (length,), one per level, level 0 = the input and level L = the output of layer L."""
    _check_stack(kernel_size, dilations)
    levels = [np.zeros(length, dtype=bool)]
    levels[0][-1] = True
    for d in reversed(list(dilations)):
        below = np.zeros(length, dtype=bool)
        for t in np.flatnonzero(levels[0]):
            for j in range(kernel_size):
                if t - j * d >= 0:
                    below[t - j * d] = True
        levels.insert(0, below)
    return levels


def valid_conv_stack(kernel_sizes, dilations, strides=None, channels=2, seed=0):
    """A random stack of ``nn.Conv1d`` layers without padding, with tanh between layers.

    float64, weights drawn from a seeded generator. Its last output depends on exactly the
    receptive field of the stack (tanh never has a zero derivative, so no path is cut).
    """
    strides = strides or [1] * len(kernel_sizes)
    torch.manual_seed(seed)
    layers = []
    for i, (k, d, s) in enumerate(zip(kernel_sizes, dilations, strides)):
        if i:
            layers.append(nn.Tanh())
        layers.append(nn.Conv1d(channels, channels, k, stride=s, dilation=d))
    return nn.Sequential(*layers).double()


def gradient_footprint(fn, length, channels=2):
    """|d (last output) / d input| per input step, summed over channels and output channels.

    fn maps a (1, channels, length) float64 tensor to (1, C_out, L_out). The input is seeded
    random; the result is a float64 NumPy array of shape (length,): non-zero exactly where the
    last output depends on the input.
    """
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(1, channels, length, dtype=torch.float64, generator=generator, requires_grad=True)
    out = fn(x)
    out[..., -1].sum().backward()
    return x.grad.abs().sum(dim=(0, 1)).numpy()


def footprint_span(footprint, tol=1e-12):
    """Distance from the first to the last non-zero entry, inclusive: the measured receptive field."""
    nonzero = np.flatnonzero(np.abs(footprint) > tol)
    return int(nonzero[-1] - nonzero[0] + 1) if nonzero.size else 0


def future_leak(fn, x, t, scale=5.0):
    """Perturb every input step after t and report how much each output step moved.

    fn maps (B, C, T) -> (B, C', T). Returns a NumPy array of shape (T,): the largest absolute
    change of the output at each step. A causal fn leaves steps 0 .. t at exactly zero.
    """
    generator = torch.Generator().manual_seed(1)
    changed = x.clone()
    changed[..., t + 1:] += scale * torch.randn(changed[..., t + 1:].shape, generator=generator, dtype=x.dtype)
    with torch.no_grad():
        delta = (fn(changed) - fn(x)).abs()
    return delta.amax(dim=tuple(range(delta.dim() - 1))).numpy()


def stack_summary(kernel_size, dilations):
    """What the last output of a causal stack (stride 1) reads, over its whole receptive field.

    Returns a dict: ``span`` (the receptive field, 1 + (k - 1) * sum of dilations), ``read``
    (input steps with at least one path to the last output), ``holes`` (steps inside the span
    with none), ``min_paths`` and ``max_paths`` over the steps that are read.
    """
    dilations = list(dilations)
    span = 1 + (kernel_size - 1) * sum(dilations)
    counts = path_counts(kernel_size, dilations, span)
    read = counts > 0
    return {
        "span": span, "read": int(read.sum()), "holes": int(span - read.sum()),
        "min_paths": int(counts[read].min()), "max_paths": int(counts[read].max()),
    }


def draw_stack(kernel_size, dilations, length=None, ax=None):
    """The WaveNet-style picture: every node of a causal stack over the last `length` steps,
    the connections that reach the last output in colour, and the inputs it reads in orange.
    length defaults to the receptive field, capped at 64 steps. Returns the axes."""
    import matplotlib.pyplot as plt

    dilations = list(dilations)
    span = 1 + (kernel_size - 1) * sum(dilations)
    length = length or min(max(span, 8), 64)
    levels = reached_nodes(kernel_size, dilations, length)
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 1 + 0.8 * len(levels)))
    for level, reached in enumerate(levels):
        ax.scatter(np.arange(length), np.full(length, level), s=14, color="0.85", zorder=2)
        if level < len(levels) - 1:
            d = dilations[level]
            for t in np.flatnonzero(levels[level + 1]):
                for j in range(kernel_size):
                    if t - j * d >= 0:
                        ax.plot([t - j * d, t], [level, level + 1], color="tab:blue", lw=1, alpha=0.6, zorder=1)
        ax.scatter(np.flatnonzero(reached), np.full(int(reached.sum()), level), s=26,
                   color="tab:orange" if level == 0 else "tab:blue", zorder=3)
    ax.set_yticks(range(len(levels)))
    ax.set_yticklabels(["input"] + [f"layer {i + 1} (d={d})" for i, d in enumerate(dilations)])
    ax.set_xlabel(f"time step (the last {length} of the sequence)")
    ax.set_xlim(-1, length)
    shown = "" if span <= length else f" (its receptive field is {span} steps; the last {length} are shown)"
    ax.set_title(f"kernel {kernel_size}, dilations {dilations}: the last output reads the orange inputs" + shown)
    return ax


def draw_footprint(counts, ax=None, label="paths"):
    """Bar chart of how many paths lead from each input step to the last output."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 2))
    ax.bar(np.arange(len(counts)), counts, color="tab:orange")
    ax.set_xlabel("input time step")
    ax.set_ylabel(label)
    ax.set_xlim(-1, len(counts))
    return ax
