"""Pure compute functions, and the drawing around them, behind notebook 14's demos.

Why: the notebook shows two things the student should be able to scrub through: the in-context
loss of every seed over training (the phase change, against the one-layer contrast), and each
head's attention on one repeated sequence at any recorded training step. Both read what
`course_utils.induction.train_seeds` recorded; nothing is trained or scored here (the scores of
a head and the ablation are the student's exercises), so a slider moves instantly.
"""
import matplotlib.pyplot as plt
import numpy as np

from course_utils import induction, plots

__all__ = ["phase_change_steps", "recorded_index", "pattern_at", "draw_phase_change", "draw_pattern"]


def phase_change_steps(run, level=None):
    """Per seed, the first recorded step at which the loss on the repeated copy is below `level`
    (default: `induction.phase_change_level`); None for a seed that never gets there."""
    level = induction.phase_change_level(run.config) if level is None else level
    return [induction.phase_change_step(run.steps, losses, level) for losses in run.repeated_loss]


def recorded_index(run, step):
    """Index of the recorded step nearest to `step` (the patterns exist only at recorded steps)."""
    return int(np.abs(run.steps.numpy() - step).argmin())


def pattern_at(run, seed_index, step, layer, head):
    """(the recorded step nearest to `step`, the (2L, 2L) attention of that head on the run's
    example sequence at that step, as a NumPy array)."""
    index = recorded_index(run, step)
    return int(run.steps[index]), run.patterns[seed_index, index, layer, head].numpy()


def draw_phase_change(two_layers, one_layer=None, level=None, ax=None):
    """The in-context loss of every seed over training: the two-layer runs (solid), the one-layer
    runs (dashed), the first copy's loss of the two-layer runs (dotted: nothing to copy there),
    the level that counts as copying and each seed's crossing of it."""
    level = induction.phase_change_level(two_layers.config) if level is None else level
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    steps = two_layers.steps.numpy()
    for i, seed in enumerate(two_layers.seeds):
        color = colors[i % len(colors)]
        ax.plot(steps, two_layers.repeated_loss[i].numpy(), color=color, label=f"2 layers, seed {seed}")
        ax.plot(steps, two_layers.first_loss[i].numpy(), color=color, linestyle=":", linewidth=1)
        if one_layer is not None and i < len(one_layer.seeds):
            ax.plot(one_layer.steps.numpy(), one_layer.repeated_loss[i].numpy(), color=color, linestyle="--",
                    linewidth=1)
    for step in phase_change_steps(two_layers, level):
        if step is not None:
            ax.plot([step], [level], marker="o", color="black", markersize=4)
    ax.axhline(level, color="grey", linewidth=0.8)
    ax.text(steps[-1], level, " ln V / 2", va="center", fontsize=8, color="grey")
    ax.plot([], [], color="grey", linestyle="--", label="1 layer (dashed)")
    ax.plot([], [], color="grey", linestyle=":", label="first copy, 2 layers (dotted)")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss on the repeated copy (nats per token)")
    ax.set_title("In-context loss over training")
    ax.legend(fontsize=7, ncol=2)
    return ax


def draw_pattern(run, seed_index, step, layer, head, ax=None):
    """One head's attention on the run's example sequence (its tokens on the axes) at the recorded
    step nearest to `step`. Returns the Axes."""
    shown_step, pattern = pattern_at(run, seed_index, step, layer, head)
    labels = [str(t) for t in run.example[0].tolist()]
    if ax is None:
        _, ax = plt.subplots(figsize=(5.2, 4.4), layout="constrained")
    return plots.show_attention(pattern, labels, labels, ax=ax, annotate=False,
                                title=f"seed {run.seeds[seed_index]}, step {shown_step}: layer {layer}, head {head}",
                                xlabel="key (token id)", ylabel="query (token id)")
