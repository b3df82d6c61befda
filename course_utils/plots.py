"""Shared figures of the course: attention heatmaps, bar charts, log-log cost plots.

Every function draws on a given matplotlib Axes (or a new figure when `ax` is None), gives the
figure a title and labelled axes, and returns the Axes; the notebook cell ends with
`plt.show()`. Inputs may be NumPy arrays, PyTorch tensors or nested lists.
"""
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter

__all__ = ["show_attention", "show_bars", "plot_loglog"]


def _array(x):
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=float)


def _axes(ax, figsize):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def show_attention(weights, row_labels=None, col_labels=None, ax=None, title="Attention weights",
                   xlabel="key", ylabel="query", cmap="viridis", vmin=0.0, vmax=1.0,
                   annotate=None, highlight_row=None, colorbar=True, figsize=(5, 4)):
    """A heatmap of an attention matrix: row i = query i, column j = key j.

    Shape of weights: (Tq, Tk). `annotate` writes each weight in its cell (default: when the
    matrix is at most 12 x 12). `highlight_row` outlines one query's row. vmin/vmax fix the
    colour scale (0..1 suits weights; pass None to fit the data, e.g. for raw scores).
    """
    w = _array(weights)
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (queries, keys), got shape {w.shape}")
    ax = _axes(ax, figsize)
    image = ax.imshow(w, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    if row_labels is not None:
        ax.set_yticks(range(w.shape[0]), labels=list(row_labels))
    if col_labels is not None:
        ax.set_xticks(range(w.shape[1]), labels=list(col_labels), rotation=45, ha="right")
    if annotate is None:
        annotate = max(w.shape) <= 12
    if annotate:
        middle = (np.nanmin(w) + np.nanmax(w)) / 2 if vmin is None or vmax is None else (vmin + vmax) / 2
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if w[i, j] > middle else "white")
    if highlight_row is not None:
        ax.add_patch(plt.Rectangle((-0.5, highlight_row - 0.5), w.shape[1], 1, fill=False,
                                   edgecolor="red", linewidth=2))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="weight" if vmax == 1.0 else "value")
    return ax


def show_bars(values, labels=None, ax=None, title="", xlabel="", ylabel="weight",
              highlight=None, ylim=None, color="tab:blue", figsize=(5, 3)):
    """A bar per value (e.g. one query's weights over the keys); `highlight` (an index or a
    list of indices) colours those bars orange; each bar is labelled with its value."""
    v = _array(values).ravel()
    ax = _axes(ax, figsize)
    colors = [color] * len(v)
    for i in ([] if highlight is None else np.atleast_1d(highlight)):
        colors[int(i)] = "tab:orange"
    bars = ax.bar(range(len(v)), v, color=colors)
    ax.bar_label(bars, labels=[f"{x:.2f}" for x in v], fontsize=7)
    if labels is not None:
        ax.set_xticks(range(len(v)), labels=list(labels), rotation=45, ha="right")
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return ax


def plot_loglog(xs, ys, ax=None, title="", xlabel="", ylabel="", label=None, slopes=(1, 2),
                anchor=-1, marker="o", figsize=(5, 3.5)):
    """ys against xs on log-log axes, with dashed guide lines of the given slopes through the
    point at index `anchor` (a power law y ~ x^p is a straight line of slope p)."""
    x, y = _array(xs), _array(ys)
    ax = _axes(ax, figsize)
    ax.loglog(x, y, marker=marker, label=label or "measured")
    for p in slopes:
        guide = y[anchor] * (x / x[anchor]) ** p
        ax.loglog(x, guide, linestyle="--", linewidth=1, label=f"slope {p}: $y \\propto x^{{{p}}}$")
    # Tick labels at the measured x values, written plainly (128, not 1.28 x 10^2).
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(x, labels=[f"{value:g}" for value in x])
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax
