"""Notebook 13 (attention as today's LLMs run it): the computations behind its demos and widget,
and the figures that draw them.

* `kv_head_of_query(num_heads, num_kv_heads)`: which key/value head each query head reads;
* `saved_tensor_bytes(fn, *args)`: the bytes autograd keeps between a forward and its backward,
  counted exactly through `torch.autograd.graph.saved_tensors_hooks` (deterministic, the same
  on every CPU);
* `draw_heads_and_window(...)`: the widget's picture, the query heads grouped on their key/value
  heads and a sliding-window mask;
* `blocked_attention_function(block_backward, block_size)`: attention as FlashAttention-2
  schedules it, on the CPU in PyTorch, as a `torch.autograd.Function` (`apply(q, k, v,
  is_causal)`): the forward runs over blocks of keys, twice (the rows' log-sum-exp, then the
  output) and saves only q, k, v, the output and the log-sum-exp; the backward runs
  over blocks too and calls `block_backward` (the notebook passes the student's
  `attention_backward`) on every pair of a query block and a key block, adding up dq, dk, dv;
* `peak_memory_bytes(fn, *args)`: the high-water mark of the process's resident memory while
  `fn` runs, above what was resident before (Linux: /proc/self/clear_refs resets the mark).

Nothing here computes an exercise's answer: the mask the widget draws is the one the caller
passes in (the student's `sliding_window_mask`), no function builds a cache or a mask, and the
blocked backward has no gradient formula of its own: each block's (dq, dk, dv) comes from the
`block_backward` it is given.
"""
import math
import os

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap

__all__ = ["kv_head_of_query", "saved_tensor_bytes", "draw_heads_and_window", "blocked_attention_function",
           "block_pairs", "peak_memory_bytes", "BLOCK_SIZE"]

BLOCK_SIZE = 128


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


# --------------------------------------------------------------------------- blocked attention

def block_pairs(T, block_size, causal):
    """[(i0, i1, j0, j1, diagonal)]: the (query block, key block) pairs a blocked attention visits.

    Queries and keys are cut at the same multiples of `block_size` (the last block may be
    shorter). With `causal`, a key block after the query block is skipped, one before it is seen
    whole, and the block on the diagonal is square (the same positions), so the causal mask
    inside it is the plain lower triangle."""
    starts = range(0, T, block_size)
    return [(i0, min(i0 + block_size, T), j0, min(j0 + block_size, T), i0 == j0)
            for i0 in starts for j0 in starts if not (causal and j0 > i0)]


def _tiles(q_i, k, i0, i1, T, causal, block_size, scale):
    """(j0, j1, scores) of query block [i0, i1) against each key block it may see: a
    (block, block) tile at a time; the causal diagonal tile is square and masked."""
    for j0 in range(0, i1 if causal else T, block_size):
        j1 = min(j0 + block_size, T)
        s = q_i @ k[..., j0:j1, :].transpose(-2, -1) * scale
        if causal and j0 == i0:  # the diagonal tile: square, same positions
            s = s.masked_fill(~torch.ones(i1 - i0, j1 - j0, dtype=torch.bool).tril(), -math.inf)
        yield j0, j1, s


def _blocked_forward(q, k, v, causal, block_size):
    """(out, lse) in blocks, never a (T, T) matrix: per block of queries, two passes over the
    blocks of keys. The first gathers the log-sum-exp of each row, tile by tile (torch's
    logsumexp of a tile, combined with logaddexp); the second adds up exp(S - lse) V, each tile's
    weights final at once because lse already knows every key. (Notebook 12's exercise does it in
    one pass with a running maximum and sum; this is the simpler schedule, at twice the score
    products, and not that exercise's answer.)"""
    T, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:-1], dtype=q.dtype)
    for i0 in range(0, T, block_size):
        i1 = min(i0 + block_size, T)
        q_i = q[..., i0:i1, :]
        row_lse = torch.full(q_i.shape[:-1], -math.inf, dtype=q.dtype)
        for _, _, s in _tiles(q_i, k, i0, i1, T, causal, block_size, scale):
            row_lse = torch.logaddexp(row_lse, torch.logsumexp(s, dim=-1))
        acc = torch.zeros_like(q_i)
        for j0, j1, s in _tiles(q_i, k, i0, i1, T, causal, block_size, scale):
            acc += torch.exp(s - row_lse[..., None]) @ v[..., j0:j1, :]
        out[..., i0:i1, :] = acc
        lse[..., i0:i1] = row_lse
    return out, lse


def _blocked_backward(q, k, v, out, lse, grad_out, causal, block_size, block_backward, rowsum_first):
    """dq, dk, dv as sums over block pairs of what `block_backward` returns for each pair.

    block_backward(q_i, k_j, v_j, out_i, lse_i, grad_out_i, causal) -> (dq_i, dk_j, dv_j), each
    block's share (the student's attention_backward has this signature: on a block it computes
    exactly that block's share, P_ij = exp(S_ij - lse_i) being the block of the whole softmax).
    With `rowsum_first` the rows' D = rowsum(dO * O) is computed once, before the loop, and
    passed in place of out_i (as FlashAttention-2 does); otherwise block_backward computes it
    from out_i, for every key block again (a (block, d) product each time: little next to the
    (block, block, d) ones)."""
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    rows = (grad_out * out).sum(-1, keepdim=True) if rowsum_first else out
    for i0, i1, j0, j1, diagonal in block_pairs(q.shape[-2], block_size, causal):
        dq_i, dk_j, dv_j = block_backward(q[..., i0:i1, :], k[..., j0:j1, :], v[..., j0:j1, :],
                                          rows[..., i0:i1, :], lse[..., i0:i1], grad_out[..., i0:i1, :],
                                          causal=bool(causal and diagonal))
        dq[..., i0:i1, :] += dq_i
        dk[..., j0:j1, :] += dk_j
        dv[..., j0:j1, :] += dv_j
    return dq, dk, dv


def blocked_attention_function(block_backward, block_size=BLOCK_SIZE, rowsum_first=False):
    """A torch.autograd.Function class: `Cls.apply(q, k, v, is_causal=False)` is
    softmax(q k^T / sqrt(d)) v (causal: query t sees keys <= t), q, k, v of shape (B, h, T, d),
    computed and differentiated in blocks of `block_size` queries and keys (T need not be a
    multiple). The forward saves q, k, v, out and the log-sum-exp, nothing of size T x T; the
    backward calls `block_backward` on each pair of blocks (see `_blocked_backward`)."""

    class BlockedAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, is_causal=False):
            if not (q.shape == k.shape == v.shape):
                raise ValueError(f"q, k and v must have one shape (B, h, T, d); got {tuple(q.shape)}, "
                                 f"{tuple(k.shape)}, {tuple(v.shape)}")
            out, lse = _blocked_forward(q, k, v, bool(is_causal), block_size)
            ctx.is_causal = bool(is_causal)
            ctx.save_for_backward(q, k, v, out, lse)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            q, k, v, out, lse = ctx.saved_tensors
            dq, dk, dv = _blocked_backward(q, k, v, out, lse, grad_out.contiguous(), ctx.is_causal, block_size,
                                           block_backward, rowsum_first)
            return dq, dk, dv, None  # no gradient for the flag

    BlockedAttention.block_size = block_size
    BlockedAttention.__qualname__ = BlockedAttention.__name__ = f"BlockedAttention_{block_size}"
    return BlockedAttention


# --------------------------------------------------------------------------- peak memory

def _status_bytes(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no {field} in /proc/self/status")


def _release_free_memory():
    """Hand the C library's free heap memory back to the system (glibc's malloc_trim), so that a
    large temporary freed by an earlier call cannot be reused unseen: it must be touched again."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_memory_bytes(fn, *args, **kwargs):
    """(fn(*args, **kwargs), bytes): how far the process's resident memory rose above where it
    stood before the call, at its highest while `fn` ran (Linux's VmHWM, reset first through
    /proc/self/clear_refs). It sees everything, PyTorch's allocations and its backward pass
    included, to the page. The C library's free memory is handed back first (malloc_trim), so
    that an earlier call's freed temporaries cannot hide; run a small case first all the same
    (the first call loads kernels). (None, not a number, where Linux's /proc is missing.)"""
    if not os.path.exists("/proc/self/clear_refs"):
        return fn(*args, **kwargs), None
    _release_free_memory()
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # since Linux 4.0: reset the high-water mark to the current size
        before = _status_bytes("VmRSS")
    except OSError:
        return fn(*args, **kwargs), None
    result = fn(*args, **kwargs)
    return result, max(_status_bytes("VmHWM") - before, 0)
