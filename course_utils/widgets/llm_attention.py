"""Notebook 13 (attention as today's LLMs run it): the computations behind its demos and widget,
and the figures that draw them.

* `kv_head_of_query(num_heads, num_kv_heads)`: which key/value head each query head reads;
* `saved_tensor_bytes(fn, *args)`: the bytes autograd keeps between a forward and its backward,
  counted exactly through `torch.autograd.graph.saved_tensors_hooks` (deterministic, the same
  on every CPU);
* `draw_heads_and_window(...)`: the widget's picture, the query heads grouped on their key/value
  heads and a sliding-window mask.

Nothing here computes an exercise's answer: the mask the widget draws is the one the caller
passes in (the student's `sliding_window_mask`), and no function builds a cache or a mask.
"""
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap

__all__ = ["kv_head_of_query", "saved_tensor_bytes", "draw_heads_and_window"]


def kv_head_of_query(num_heads, num_kv_heads):
    """A list: entry i is the key/value head that query head i reads (groups of neighbours)."""
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    group = num_heads // num_kv_heads
    return [i // group for i in range(num_heads)]


def saved_tensor_bytes(fn, *args, **kwargs):
    """Run `fn(*args, **kwargs)` with autograd recording and return (result, bytes): the bytes of
    the distinct storages autograd saves for the backward pass (each counted once, however many
    operations save it, views included). The inputs count too when an operation saves them.

    The count is what stays alive between forward and backward because of the backward pass
    (temporaries that are freed during the forward are not in it)."""
    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = fn(*args, **kwargs)
    return result, int(sum(storages.values()))


def draw_heads_and_window(num_heads, num_kv_heads, mask=None, window=None, axes=None, message=None):
    """Left: query heads (top row) and the key/value head each reads (colours). Right: a
    (T_q, T_k) boolean mask, True = may attend (e.g. a sliding window), or `message` if none."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained",
                               gridspec_kw={"width_ratios": [1.3, 1]})
    ax = axes[0]
    owner = kv_head_of_query(num_heads, num_kv_heads)
    colours = plt.get_cmap("tab10")
    for i, j in enumerate(owner):
        ax.add_patch(plt.Rectangle((i, 1.2), 0.9, 0.8, color=colours(j % 10)))
        ax.text(i + 0.45, 1.6, f"q{i}", ha="center", va="center", fontsize=9, color="white")
    width = num_heads / num_kv_heads
    for j in range(num_kv_heads):
        ax.add_patch(plt.Rectangle((j * width, 0), width - 0.1, 0.8, color=colours(j % 10), alpha=0.6))
        ax.text(j * width + (width - 0.1) / 2, 0.4, f"k{j}, v{j}", ha="center", va="center", fontsize=9)
    ax.set(xlim=(0, num_heads), ylim=(-0.1, 2.1), xticks=[], yticks=[0.4, 1.6],
           title=f"{num_heads} query heads share {num_kv_heads} key/value head(s)")
    ax.set_yticklabels(["cached K/V heads", "query heads"])
    ax = axes[1]
    if mask is None:
        ax.axis("off")
        ax.text(0.5, 0.5, message or "no mask", ha="center", va="center", wrap=True, fontsize=10)
    else:
        mask = np.asarray(mask, dtype=bool)
        ax.imshow(mask, cmap=ListedColormap(["#eeeeee", "#1f77b4"]), vmin=0, vmax=1)
        step = max(1, mask.shape[1] // 8)
        ax.set_xticks(range(0, mask.shape[1], step))
        ax.set_yticks(range(0, mask.shape[0], step))
        ax.set(title=f"sliding window of {window}: blue = may attend", xlabel="key position",
               ylabel="query position")
    return axes
