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

__all__ = ["RULES", "random_pairs", "write_state", "read_back", "recall", "recall_curve", "draw_recall"]

RULES = ("linear", "delta", "softmax")
SOFTMAX_SHARPNESS = 20.0  # the lookup's scale on q . k: unit keys that match score 20, others about 20 / sqrt(d)


def random_pairs(num_pairs, d, draws=32, seed=0):
    """(keys, values), each (draws, N, d) of unit length, drawn from a generator seeded by `seed`."""
    g = torch.Generator().manual_seed(seed)
    keys = F.normalize(torch.randn(draws, num_pairs, d, generator=g), dim=-1)
    values = F.normalize(torch.randn(draws, num_pairs, d, generator=g), dim=-1)
    return keys, values


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
        stored = (k[..., :, None] * S).sum(-2)  # S^T k: what k reads now
        S = S + k[..., :, None] * (v - stored)[..., None, :]
    return S


def read_back(keys, values, rule):
    """What every key reads, (..., N, d): S^T k_i from the written state, or for "softmax" the
    lookup softmax(SOFTMAX_SHARPNESS K k_i) V over every pair kept."""
    if rule == "softmax":
        weights = torch.softmax(SOFTMAX_SHARPNESS * keys @ keys.transpose(-2, -1), dim=-1)
        return weights @ values
    return keys @ write_state(keys, values, rule)


def recall(keys, values, rule):
    """(fraction of keys whose read-back is nearest, by cosine, to their own value among the N;
    mean distance |read-back - value|), both averaged over every key and draw."""
    read = read_back(keys, values, rule)
    similarity = F.normalize(read, dim=-1) @ values.transpose(-2, -1)  # (..., N, N)
    right = similarity.argmax(-1) == torch.arange(keys.shape[-2])
    return right.float().mean().item(), (read - values).norm(dim=-1).mean().item()


def recall_curve(d, pair_counts, draws=32, seed=0):
    """{rule: (recall per N, mean error per N)} for every rule, the same pairs for all three."""
    curves = {rule: ([], []) for rule in RULES}
    for n in pair_counts:
        keys, values = random_pairs(n, d, draws, seed)
        for rule in RULES:
            right, error = recall(keys, values, rule)
            curves[rule][0].append(right)
            curves[rule][1].append(error)
    return curves


def draw_recall(d, pair_counts, curves, ax=None):
    """Recall against the number of pairs, one line per rule, the state's size marked."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.5), layout="constrained")
    styles = {"linear": ("o-", "linear attention (sum of k v^T)"), "delta": ("s-", "delta rule (beta = 1)"),
              "softmax": ("k--", "softmax lookup over the cache")}
    for rule in RULES:
        marker, label = styles[rule]
        ax.plot(pair_counts, curves[rule][0], marker, label=label, markersize=4)
    ax.axvline(d, color="grey", linewidth=0.8)
    ax.text(d, 0.02, f" N = d = {d}", fontsize=8, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("pairs written (N)")
    ax.set_ylabel("recall (read-back nearest its value)")
    ax.set_title(f"A {d} x {d} state, no training")
    ax.legend(fontsize=8)
    return ax
