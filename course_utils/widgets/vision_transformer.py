"""Notebook 09 (Vision Transformer): the computations behind its figures and widget, and the
figures that draw them.

Pure functions first (`class_token_attention`, `attention_rollout`, `confusion_matrix`), then
the drawing. Everything works on a trained `course_utils.models.vit_model.TinyViT`: the notebook's
runs the student's own functions when they passed `vit_model.check_parts` (they are part of the
model), but nothing here calls a student's answer by name.
"""
import matplotlib.pyplot as plt
import numpy as np
import torch

from course_utils.models import vit_model

__all__ = [
    "class_token_attention", "attention_rollout", "confusion_matrix", "draw_patches",
    "draw_cls_attention", "draw_confusion", "draw_fraction_sweep", "draw_example",
]


def class_token_attention(model, images):
    """How much the class token attends to each patch, per block and head.

    Shape of images: (B, C, H, W). Returns a tensor (B, depth, num_heads, grid, grid): the row
    of the class token (query 0) over the patch keys 1..N, laid out as the patch grid. The
    weight the class token puts on itself is left out, so a map sums to at most one.
    """
    maps = vit_model.attention_maps(model, images)  # (B, depth, heads, N+1, N+1)
    row = maps[:, :, :, 0, 1:]
    return row.reshape(*row.shape[:3], model.grid, model.grid)


def attention_rollout(model, images):
    """Attention rollout (Abnar & Zuidema, 2020): how much each patch flows into the class
    token through all blocks, counting the residual path.

    Per block, the heads' weights are averaged and the identity is added (the residual
    connection) and rows renormalised; the blocks' matrices are multiplied from first to last.
    Returns (B, grid, grid): the class token's row over the patches, rescaled to sum to one.
    """
    maps = vit_model.attention_maps(model, images).mean(dim=2)  # (B, depth, T, T)
    T = maps.shape[-1]
    flow = torch.eye(T, dtype=maps.dtype).expand(maps.shape[0], T, T)
    for layer in range(maps.shape[1]):
        a = maps[:, layer] + torch.eye(T, dtype=maps.dtype)
        a = a / a.sum(dim=-1, keepdim=True)
        flow = a @ flow
    row = flow[:, 0, 1:]
    row = row / row.sum(dim=-1, keepdim=True)
    return row.reshape(-1, model.grid, model.grid)


def confusion_matrix(y_true, y_pred, num_classes=10):
    """counts[i, j] = how many images of class i were predicted as class j (an int array)."""
    y_true = np.asarray(y_true).astype(int)
    y_pred = np.asarray(y_pred).astype(int)
    counts = np.zeros((num_classes, num_classes), dtype=int)
    np.add.at(counts, (y_true, y_pred), 1)
    return counts


# --------------------------------------------------------------------------- drawing

def _image(x):
    x = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
    return x[0] if x.ndim == 3 else x


def draw_patches(image, patch_size, title="One digit, cut into patches"):
    """Left: the image with its patch grid, each patch numbered in row-major order. Right: the
    sequence the transformer reads, one patch per row (its P*P pixels, row by row)."""
    img = _image(image)
    H, W = img.shape
    P = patch_size
    rows, cols = H // P, W // P
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4), layout="constrained",
                                      gridspec_kw={"width_ratios": [1, 1.3]})
    left.imshow(img, cmap="gray_r", vmin=0, vmax=1)
    for k in range(1, rows):
        left.axhline(k * P - 0.5, color="tab:red", linewidth=1.5)
    for k in range(1, cols):
        left.axvline(k * P - 0.5, color="tab:red", linewidth=1.5)
    for r in range(rows):
        for c in range(cols):
            left.text(c * P - 0.3, r * P + 0.4, str(r * cols + c), color="tab:red", fontsize=9,
                      va="top")
    left.set_title(title)
    left.set_xlabel("pixel column")
    left.set_ylabel("pixel row")
    strip = np.stack([img[r * P:(r + 1) * P, c * P:(c + 1) * P].ravel()
                      for r in range(rows) for c in range(cols)])
    right.imshow(strip, cmap="gray_r", vmin=0, vmax=1, aspect="auto")
    right.set_title(f"the sequence: {rows * cols} tokens of {P * P} numbers")
    right.set_xlabel("pixel within the patch (row by row)")
    right.set_ylabel("patch = token")
    right.set_yticks(range(rows * cols))
    return fig


def draw_cls_attention(image, maps, prediction=None, label=None):
    """The image, then one panel per (block, head): where the class token looks.

    maps: (depth, heads, grid, grid) from class_token_attention for this one image.
    """
    img = _image(image)
    maps = maps.detach().cpu().numpy() if hasattr(maps, "detach") else np.asarray(maps)
    depth, heads = maps.shape[:2]
    fig, axes = plt.subplots(depth, heads + 1, figsize=(1.9 * (heads + 1), 2.0 * depth + 0.4),
                             layout="constrained", squeeze=False)
    for layer in range(depth):
        ax = axes[layer, 0]
        ax.imshow(img, cmap="gray_r", vmin=0, vmax=1)
        ax.set_title("input" if prediction is None else f"label {label}, predicted {prediction}",
                     fontsize=8)
        ax.set_ylabel(f"block {layer}")
        ax.set_xticks([])
        ax.set_yticks([])
        for head in range(heads):
            ax = axes[layer, head + 1]
            image = ax.imshow(maps[layer, head], cmap="magma", vmin=0, vmax=maps.max())
            ax.set_title(f"block {layer}, head {head}", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.colorbar(image, ax=axes[:, 1:], label="class token's weight on the patch", shrink=0.8)
    fig.suptitle("Attention of the class token over the patches (patch grid, row-major)")
    return fig


def draw_confusion(counts, ax=None, title="Held-out confusion matrix"):
    """A heatmap of a confusion matrix with the counts written in."""
    if ax is None:
        _, ax = plt.subplots(figsize=(4.8, 4.2), layout="constrained")
    n = counts.shape[0]
    ax.imshow(counts, cmap="Blues")
    for i in range(n):
        for j in range(n):
            if counts[i, j]:
                ax.text(j, i, str(counts[i, j]), ha="center", va="center", fontsize=8,
                        color="white" if counts[i, j] > counts.max() / 2 else "black")
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xlabel("predicted digit")
    ax.set_ylabel("true digit")
    ax.set_title(title)
    return ax


def draw_fraction_sweep(fractions, results, train_size, ax=None):
    """Held-out accuracy against the share of the training set, one line per model.

    results: {kind: accuracies}, one accuracy per fraction, or one row of them per seed (then the
    line is the mean over seeds and every seed's point is drawn, so the spread is visible)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.8), layout="constrained")
    markers = {"ViT": "o", "CNN": "s", "MLP": "^"}
    x = [100 * f for f in fractions]
    for kind, accuracies in results.items():
        runs = 100 * np.atleast_2d(np.asarray(accuracies, dtype=float))  # (seeds, fractions)
        label = kind if len(runs) == 1 else f"{kind} (mean of {len(runs)} seeds; dots: each seed)"
        line, = ax.plot(x, runs.mean(axis=0), marker=markers.get(kind, "o"), label=label)
        if len(runs) > 1:
            for row in runs:
                ax.scatter(x, row, color=line.get_color(), s=12, alpha=0.5)
    ax.set_xscale("log")
    ax.set_xticks(x, labels=[f"{100 * f:g} %\n({round(f * train_size)} images)" for f in fractions])
    ax.minorticks_off()
    ax.set_xlabel("share of the training set used")
    ax.set_ylabel("held-out accuracy (%)")
    ax.set_title("Held-out accuracy against the size of the training set")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def draw_example(model, image, label, block="rollout", head=0):
    """Widget view: the image, the chosen attention map over it, and the predicted probabilities.

    block: an int (that block's `head`) or "rollout" (all blocks and heads combined).
    """
    x = image.unsqueeze(0)
    with torch.no_grad():
        probabilities = torch.softmax(model(x), dim=-1)[0].numpy()
    if block == "rollout":
        grid = attention_rollout(model, x)[0].numpy()
        what = "attention rollout"
    else:
        grid = class_token_attention(model, x)[0, block, head].numpy()
        what = f"block {block}, head {head}"
    img = _image(image)
    prediction = int(probabilities.argmax())
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.2), layout="constrained")
    axes[0].imshow(img, cmap="gray_r", vmin=0, vmax=1)
    axes[0].set_title(f"true digit {int(label)}")
    axes[1].imshow(img, cmap="gray", vmin=0, vmax=1)
    P = img.shape[0] // grid.shape[0]
    upsampled = np.kron(grid, np.ones((P, P)))
    shown = axes[1].imshow(upsampled, cmap="magma", alpha=0.6, vmin=0)
    fig.colorbar(shown, ax=axes[1], label="weight")
    axes[1].set_title(f"where the class token looks\n({what})", fontsize=9)
    for ax in axes[:2]:
        ax.set_xticks([])
        ax.set_yticks([])
    colors = ["tab:blue"] * len(probabilities)
    colors[prediction] = "tab:green" if prediction == int(label) else "tab:red"
    axes[2].bar(range(len(probabilities)), probabilities, color=colors)
    axes[2].set_xticks(range(len(probabilities)))
    axes[2].set_ylim(0, 1)
    axes[2].set_xlabel("digit")
    axes[2].set_ylabel("predicted probability")
    axes[2].set_title(f"prediction: {prediction}")
    return fig
