"""Pure compute functions, and the drawing around them, behind notebook 15's "pairs and state size
against recall" widget.

Why: a trained model's recall mixes two things, how much a state of d x d numbers can hold and
how well training learnt to use it. This widget takes training out: it writes N random unit-length
key/value pairs straight into a d x d state, once by plain linear attention (the sum of the outer
products k v^T) and once by the delta rule (each write replaces what the key already reads), reads
every key back, and counts how many read-backs are nearest to their own value. A softmax lookup over
the whole cache (every key and value kept) is the reference line. Everything is a few small matrix
products, so a slider moves instantly.

Shapes: N pairs, d dimensions, R independent draws (rows of the batch).
"""
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from course_utils.training import one_thread

__all__ = ["RULES", "random_pairs", "latest", "write_state", "read_back", "recall", "recall_curve", "draw_recall"]

RULES = ("linear", "delta", "softmax")
SOFTMAX_SHARPNESS = 20.0  # the lookup's scale on q . k: unit keys that match score 20, others about 20 / sqrt(d)


def random_pairs(num_pairs, d, rewritten=0.0, draws=32, seed=0):
    """What is written, in order: N random unit keys with random unit values, then the first
    round(rewritten * N) of those keys again, each with a new value. Returns (keys, values), each
    (draws, N + rewrites, d): the answer for a key is the LAST value written under it."""
    g = torch.Generator().manual_seed(seed)
    again = round(rewritten * num_pairs)
    keys = F.normalize(torch.randn(draws, num_pairs, d, generator=g), dim=-1)
    values = F.normalize(torch.randn(draws, num_pairs + again, d, generator=g), dim=-1)
    return torch.cat([keys, keys[:, :again]], 1), values


def latest(keys, values, num_pairs):
    """(the N distinct keys, the last value written under each): the N pairs a read should return."""
    again = keys.shape[-2] - num_pairs
    answers = torch.cat([values[..., num_pairs:, :], values[..., again:num_pairs, :]], -2)
    return keys[..., :num_pairs, :], answers


def write_state(keys, values, rule):
    """The (..., d, d) state after writing the pairs in order. "linear": S = sum_i k_i v_i^T;
    "delta": S <- S + k_i (v_i - S^T k_i)^T, the delta rule with beta = 1."""
    if rule == "linear":
        return keys.transpose(-2, -1) @ values
    if rule != "delta":
        raise ValueError(f"a state is written by 'linear' or 'delta', not {rule!r}")
    S = keys.new_zeros(keys.shape[:-2] + (keys.shape[-1], values.shape[-1]))
    for i in range(keys.shape[-2]):
        k, v = keys[..., i, :], values[..., i, :]
        stored = (k[..., None, :] @ S)[..., 0, :]  # S^T k: what k reads now
        S = S + k[..., :, None] * (v - stored)[..., None, :]
    return S


def read_back(keys, values, num_pairs, rule):
    """What each of the N distinct keys reads, (..., N, d): S^T k_i from the written state, or
    for "softmax" the lookup softmax(SOFTMAX_SHARPNESS K k_i) V over the cache of every pair
    written, the latest pair of a key winning (a cache keeps a key's position: its last write)."""
    asked, _ = latest(keys, values, num_pairs)
    if rule == "softmax":
        cached_keys, cached_values = latest(keys, values, num_pairs)
        weights = torch.softmax(SOFTMAX_SHARPNESS * asked @ cached_keys.transpose(-2, -1), dim=-1)
        return weights @ cached_values
    return asked @ write_state(keys, values, rule)


def recall(keys, values, num_pairs, rule):
    """(fraction of the N keys whose read-back is nearest, by cosine, to the last value written
    under it among the N answers; mean distance |read-back - that value|), over keys and draws."""
    read = read_back(keys, values, num_pairs, rule)
    _, answers = latest(keys, values, num_pairs)
    similarity = F.normalize(read, dim=-1) @ answers.transpose(-2, -1)  # (..., N, N)
    right = similarity.argmax(-1) == torch.arange(num_pairs)
    return right.float().mean().item(), (read - answers).norm(dim=-1).mean().item()


@one_thread()  # tiny tensors: a second thread only adds overhead on a shared machine
def recall_curve(d, pair_counts, rewritten=0.0, draws=32, seed=0):
    """{rule: (recall per N, mean error per N)} for every rule, the same pairs for all three."""
    curves = {rule: ([], []) for rule in RULES}
    for n in pair_counts:
        keys, values = random_pairs(n, d, rewritten, draws, seed)
        for rule in RULES:
            right, error = recall(keys, values, n, rule)
            curves[rule][0].append(right)
            curves[rule][1].append(error)
    return curves


def draw_recall(d, pair_counts, curves, axes=None):
    """Two panels against the number of pairs, one line per rule: recall, and the mean distance
    between a read-back and its value. The state's size N = d is marked."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.5), layout="constrained")
    styles = {"linear": ("o-", "linear attention (sum of k v^T)"), "delta": ("s-", "delta rule (beta = 1)"),
              "softmax": ("k--", "softmax lookup over the cache")}
    for panel, (ax, label) in enumerate(zip(axes, ("recall (read-back nearest its value)",
                                                     "mean |read-back - value|"))):
        for rule in RULES:
            marker, name = styles[rule]
            ax.plot(pair_counts, curves[rule][panel], marker, label=name, markersize=4)
        ax.axvline(d, color="grey", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("pairs written (N)")
        ax.set_ylabel(label)
    axes[0].set_ylim(0, 1.05)
    axes[0].text(d, 0.02, f" N = d = {d}", fontsize=8, color="grey")
    axes[0].set_title(f"A {d} x {d} state, no training")
    axes[1].legend(fontsize=8)
    return axes
