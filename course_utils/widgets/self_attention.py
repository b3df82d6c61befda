"""Pure compute functions behind the demos of notebook 05 (QKV self-attention).

The notebook only wires sliders and drop-downs to these and draws the results with
`course_utils.plots`. Nothing here needs the student's answers: weights are computed with
PyTorch's own `torch.softmax`, and nothing here is shaped like an exercise's function.
"""
import math
import time

from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import numpy as np
import torch

from course_utils.data import sentences as toy

__all__ = [
    "worked_example", "hand_made_projections", "random_projections", "PROJECTIONS",
    "sentence_attention", "time_attention", "attention_matrix_bytes", "loglog_slope",
    "LAYERS", "measured_flops", "attention_flops_by_part", "layers_to_connect",
]

LAYERS = ("self-attention", "recurrent (LSTM)", "convolution")


def worked_example(d_k=64, dots=(112.0, 96.0), seed=0):
    """The lectures' two-word example: a query q1 and keys k1, k2 of size d_k with
    q1 . k1 = dots[0] and q1 . k2 = dots[1] exactly (float64 NumPy arrays).

    Random seeded vectors, then each key is moved along q1 until its dot product is the target.
    """
    rng = np.random.default_rng(seed)
    q1 = rng.standard_normal(d_k)
    keys = []
    for target in dots:
        k = rng.standard_normal(d_k)
        k = k + (target - q1 @ k) / (q1 @ q1) * q1
        keys.append(k)
    return q1, keys[0], keys[1]


# Hand-made projections: which key feature each query feature looks for, and how strongly.
# Key dimensions: 0 "is animate", 1 "is a thing", 2 "is an action", 3 "is a place".
_KEY_OF = {"animate": 0, "thing": 1, "action": 2, "place": 3}
_LOOKS_FOR = {
    "refers-back": {"animate": 3.0, "thing": 1.0},  # a pronoun looks for the animate noun it stands for
    "describes": {"animate": 2.0, "thing": 1.0},    # "tired", "hungry": who is?
    "action": {"thing": 2.0},                       # a verb looks for its nouns
    "thing": {"action": 1.5},                       # a noun looks for what it does
    "function": {"thing": 1.0},                     # "the", "on": the noun they belong to
}


def hand_made_projections(d_model=toy.D_MODEL, d_k=8, gain=2.5, noise=0.05, seed=0):
    """Readable query and key projections W_q, W_k of shape (d_model, d_k) (float64 NumPy).

    Row f of W_k puts feature f of a word into the key dimension that announces it; row f of
    W_q puts it into the key dimension that feature looks for (`_LOOKS_FOR`). A trained model
    learns such matrices; here they are written by hand so the pattern can be checked by eye.
    """
    rng = np.random.default_rng(seed)
    W_q = noise * rng.standard_normal((d_model, d_k))
    W_k = noise * rng.standard_normal((d_model, d_k))
    index = {name: i for i, name in enumerate(toy.FEATURES)}
    for name, dim in _KEY_OF.items():
        W_k[index[name], dim] += gain
    for name, wanted in _LOOKS_FOR.items():
        for target, strength in wanted.items():
            W_q[index[name], _KEY_OF[target]] += strength
    return W_q, W_k


def random_projections(d_model=toy.D_MODEL, d_k=8, seed=0):
    """Untrained projections: Gaussian entries with variance 1/d_model (float64 NumPy)."""
    rng = np.random.default_rng(seed)
    W_q = rng.standard_normal((d_model, d_k)) / math.sqrt(d_model)
    W_k = rng.standard_normal((d_model, d_k)) / math.sqrt(d_model)
    return W_q, W_k


PROJECTIONS = {"hand-made": hand_made_projections, "random (untrained)": random_projections}


def sentence_attention(sentence, scale=1.0, projections="hand-made", seed=0):
    """Self-attention weights of a toy sentence.

    sentence: a key of `course_utils.data.sentences.SENTENCES` or a sentence of its words.
    scale: multiplies the scores (like scaling W_q): 0 gives uniform weights, large values
    make each row close to one-hot.
    Returns (words, weights) with weights a (T, T) float64 NumPy array: row i holds how
    much word i (the query) attends to every word j (the keys); each row sums to one.
    """
    words, X = toy.embed(sentence, seed=seed)
    W_q, W_k = PROJECTIONS[projections](d_model=X.shape[1], seed=seed)
    Q = torch.from_numpy(X @ W_q)
    K = torch.from_numpy(X @ W_k)
    scores = scale * (Q @ K.T) / math.sqrt(Q.shape[-1])
    return words, torch.softmax(scores, dim=-1).numpy()


def time_attention(ns, d=64, repeats=3, budget=0.05, seed=0):
    """Seconds to compute one attention of n queries over n keys of size d, with the full
    n x n weight matrix built explicitly, for each n in ns (float32, CPU).

    Each n is run once to warm up, then at least `repeats` times and until `budget` seconds
    have been spent (at most 100 runs); the best run counts, which filters out the moments
    when other programs had the CPU. PyTorch runs on one thread while timing (restored
    afterwards): on a busy machine, waking up extra threads can cost more than small
    products, and the time should measure the work, not the scheduling.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _time_attention(ns, d, repeats, budget, seed)
    finally:
        torch.set_num_threads(threads)


def _time_attention(ns, d, repeats, budget, seed):
    generator = torch.Generator().manual_seed(seed)
    seconds = []
    for n in ns:
        q, k, v = (torch.randn(n, d, generator=generator) for _ in range(3))
        best, spent, runs = math.inf, 0.0, -1  # run -1 only warms up (allocation, threads)
        while runs < repeats or (spent < budget and runs < 100):
            start = time.perf_counter()
            weights = torch.softmax(q @ k.T / math.sqrt(d), dim=-1)
            (weights @ v).sum().item()
            elapsed = time.perf_counter() - start
            if runs >= 0:
                best, spent = min(best, elapsed), spent + elapsed
            runs += 1
        seconds.append(best)
    return np.array(seconds)


def attention_matrix_bytes(n, batch=1, heads=1, bytes_per_number=4):
    """Memory of the attention weights: batch x heads x n x n numbers (float32: 4 bytes)."""
    return batch * heads * n * n * bytes_per_number


def loglog_slope(xs, ys):
    """Slope of the least-squares line through (log x, log y): the exponent p in y ~ x^p."""
    slope, _ = np.polyfit(np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float)), 1)
    return float(slope)


def _attention_layer(x, d):
    """One single-head self-attention layer written with PyTorch's layers: Q, K, V and output
    projections, scores, softmax, weighted sum. x: (1, n, d)."""
    q, k, v, out = (nn.Linear(d, d, device=x.device) for _ in range(4))
    scores = q(x) @ k(x).transpose(1, 2) / math.sqrt(d)
    return out(torch.softmax(scores, dim=-1) @ v(x))


def measured_flops(n, d, kernel_size=3):
    """FLOPs of one layer of each kind over n tokens of width d, counted by PyTorch's own
    `FlopCounterMode` while the layer runs (on the "meta" device: shapes only, no arithmetic, so
    n = d = 1000 costs nothing). It counts the matrix products and convolutions, 2 FLOPs per
    multiply-add, and leaves out the element-wise work (softmax, gates, biases).
    Returns {layer name: FLOPs} for the names in LAYERS."""
    x = torch.zeros(1, n, d, device="meta")
    layers = {
        "self-attention": lambda: _attention_layer(x, d),
        "recurrent (LSTM)": lambda: nn.LSTM(d, d, batch_first=True, device="meta")(x),
        "convolution": lambda: nn.Conv1d(d, d, kernel_size, padding=kernel_size // 2, device="meta")(x.transpose(1, 2)),
    }
    counts = {}
    for name, run in layers.items():
        with FlopCounterMode(display=False) as counter:
            run()
        counts[name] = int(counter.get_total_flops())
    return counts


def attention_flops_by_part(n, d):
    """Measured like `measured_flops`: (FLOPs of the four projections, FLOPs of the two n x n
    products Q K^T and A V) of one single-head self-attention layer."""
    x = torch.zeros(1, n, d, device="meta")
    with FlopCounterMode(display=False) as total:
        _attention_layer(x, d)
    with FlopCounterMode(display=False) as projections:
        for _ in range(4):
            nn.Linear(d, d, device="meta")(x)
    return int(projections.get_total_flops()), int(total.get_total_flops() - projections.get_total_flops())


def layers_to_connect(kind, n, kernel_size=3, width=4, seed=0):
    """Measured, not derived: how many stacked layers of `kind` it takes before the last output
    depends on the first input (a non-zero gradient), for n tokens. Each path through a layer
    counts one; the recurrent layer's path runs through its steps, reported as n - 1 steps.

    kind: "self-attention", "convolution" (plain, stride 1), "dilated convolution" (dilation
    1, k, k^2, ... as in notebook 02) or "recurrent" (the number of recurrent steps between
    them, found the same way: the first step count at which the gradient is non-zero)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, n, width, generator=generator, requires_grad=True)
    if kind == "recurrent":
        cell = nn.RNNCell(width, width)
        h = torch.zeros(1, width)
        for steps in range(n):
            h = cell(x[:, steps], h)
        # the last state after all n inputs; the path from input 0 runs through n - 1 later steps
        grad, = torch.autograd.grad(h.sum(), x)
        return n - 1 if grad[0, 0].abs().sum() > 0 else None
    torch.manual_seed(seed)
    layers = 0
    h = x
    while layers < n:
        layers += 1
        if kind == "self-attention":
            h = _attention_layer(h, width)
        elif kind in ("convolution", "dilated convolution"):
            dilation = kernel_size ** (layers - 1) if kind == "dilated convolution" else 1
            conv = nn.Conv1d(width, width, kernel_size, dilation=dilation)
            h = conv(nn.functional.pad(h.transpose(1, 2), ((kernel_size - 1) * dilation, 0))).transpose(1, 2)
        else:
            raise ValueError(f"unknown kind {kind!r}")
        grad, = torch.autograd.grad(h[0, -1].sum(), x, retain_graph=True)
        if grad[0, 0].abs().sum() > 0:
            return layers
    return None
