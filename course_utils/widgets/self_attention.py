"""Pure compute functions behind the demos of notebook 05 (QKV self-attention).

The notebook only wires sliders and drop-downs to these and draws the results with
`course_utils.plots`. Nothing here needs the student's answers: weights are computed with
PyTorch's own `torch.softmax`, and nothing here is shaped like an exercise's function.
"""
import functools
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
    "attention_flops_by_part", "TABLE", "formula_flops", "build_layer", "counted_flops", "sequential_products", "path_length", "cost_table",
    "format_cost_table",
]

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


def attention_flops_by_part(n, d):
    """(FLOPs of the four projections, FLOPs of the two n x n products Q K^T and A V) of the
    table's self-attention layer (`TABLE`), counted by PyTorch's FlopCounterMode while it runs on
    the "meta" device (shapes only, no arithmetic: n = d = 1000 costs nothing)."""
    total = counted_flops("self-attention + W_O", n, d, device="meta")
    x, weight = torch.zeros(n, d, device="meta"), torch.zeros(d, d, device="meta")
    with FlopCounterMode(display=False) as projections:
        for _ in range(4):  # x W_q, x W_k, x W_v and the output's W_o: each (n, d) @ (d, d)
            x @ weight
    return int(projections.get_total_flops()), total - int(projections.get_total_flops())


# --------------------------------------------------------------------------- the whole table, measured
#
# The three columns of Vaswani et al.'s Table 1 for five layers, each written the way the course
# writes it and mapping
# n tokens of width d to n outputs of width d. A layer takes a *list* of n tensors of shape (B, d),
# one per token, and returns such a list: separate tensors let the autograd graph tell token 0 from
# the others and the last output from the rest (one (B, n, d) tensor would join every position in a
# single node). Weights are seeded
# and scaled by 1/sqrt(fan-in); tanh and sigmoid never have a zero derivative, so no dependence is
# cut by accident.

def _rnn(d, generator, dtype):
    """Notebook 01's vanilla RNN, unrolled: h_t = tanh(x_t W_xh + h_{t-1} W_hh + b), h_0 = 0."""
    W_xh, W_hh = (torch.randn(d, d, generator=generator, dtype=dtype) / math.sqrt(d) for _ in range(2))
    b = torch.zeros(d, dtype=dtype)

    def layer(tokens):
        h = torch.zeros_like(tokens[0])
        states = []
        for x_t in tokens:  # step t needs h_{t-1}: n steps, one after the other
            h = torch.tanh(x_t @ W_xh + h @ W_hh + b)
            states.append(h)
        return states
    return layer


def _lstm(d, generator, dtype):
    """The table's recurrent row, an LSTM: four gates, each from x_t (W_x) and h_{t-1} (W_h)."""
    W_x, W_h = (torch.randn(d, 4 * d, generator=generator, dtype=dtype) / math.sqrt(d) for _ in range(2))

    def layer(tokens):
        h = c = torch.zeros_like(tokens[0])
        states = []
        for x_t in tokens:
            i, f, g, o = (x_t @ W_x + h @ W_h).chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            states.append(h)
        return states
    return layer


def _causal_cnn(d, generator, dtype, depth=1, dilated=False, k=3):
    """Notebook 02's causal convolution (pad (k - 1) x dilation zeros on the left, then convolve),
    `depth` of them stacked with tanh between; dilations 1, k, k^2, ... if dilated."""
    weights = [torch.randn(d, d, k, generator=generator, dtype=dtype) / math.sqrt(d * k) for _ in range(depth)]

    def layer(tokens):
        x = torch.stack(tokens, dim=-1)  # (B, d, n): channels first, time last, as in nn.Conv1d
        for i, weight in enumerate(weights):
            dilation = k ** i if dilated else 1
            x = nn.functional.conv1d(nn.functional.pad(x, ((k - 1) * dilation, 0)), weight, dilation=dilation)
            if i < depth - 1:
                x = torch.tanh(x)
        return list(x.unbind(dim=-1))
    return layer


def _self_attention(d, generator, dtype):
    """Exercise 4's layer, Q = x W_q, K = x W_k, V = x W_v, softmax(Q K^T / sqrt(d)) V, followed
    by the output projection W_o that notebook 07 adds (the layer the table's worked example counts)."""
    W_q, W_k, W_v, W_o = (torch.randn(d, d, generator=generator, dtype=dtype) / math.sqrt(d) for _ in range(4))

    def layer(tokens):
        x = torch.stack(tokens, dim=1)  # (B, n, d)
        q, k, v = x @ W_q, x @ W_k, x @ W_v
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
        return list(((weights @ v) @ W_o).unbind(dim=1))
    return layer


RESTRICTED_R = 4  # the window of the restricted self-attention row: each query sees r tokens


def _restricted_attention(d, generator, dtype, depth=1, r=RESTRICTED_R):
    """Vaswani et al.'s fourth row, restricted self-attention: the layer above, but each query
    attends only to itself and the r - 1 tokens before it (causal, like the CNNs here); `depth`
    of them stacked with tanh between. The keys and values are cut into windows of r (r - 1
    masked slots of padding on the left), so the two products cost r n d, not n^2 d."""
    weights = [tuple(torch.randn(d, d, generator=generator, dtype=dtype) / math.sqrt(d) for _ in range(4))
               for _ in range(depth)]

    def layer(tokens):
        x = torch.stack(tokens, dim=1)  # (B, n, d)
        n = x.shape[1]
        # slot j of query t's window holds position t - (r - 1) + j; slots before position 0 are padding
        allowed = (torch.arange(n).unsqueeze(1) - (r - 1) + torch.arange(r)) >= 0  # (n, r)
        for i, (W_q, W_k, W_v, W_o) in enumerate(weights):
            q, k, v = x @ W_q, x @ W_k, x @ W_v
            k_windows = nn.functional.pad(k, (0, 0, r - 1, 0)).unfold(1, r, 1)  # (B, n, d, r)
            v_windows = nn.functional.pad(v, (0, 0, r - 1, 0)).unfold(1, r, 1)  # (B, n, d, r)
            scores = (q.unsqueeze(-2) @ k_windows).squeeze(-2) / math.sqrt(d)  # (B, n, r)
            attention = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
            x = (attention.unsqueeze(-2) @ v_windows.transpose(-2, -1)).squeeze(-2) @ W_o  # (B, n, d)
            if i < depth - 1:
                x = torch.tanh(x)
        return list(x.unbind(dim=1))
    return layer


# name -> (builder, stacked: whether more layers are stacked to connect far positions, FLOPs
#          formula, sequential operations and path length as Vaswani et al.'s Table 1 states them)
TABLE = {
    "RNN (notebook 01)": (_rnn, False, "4 n d^2", "O(n)", "O(n)"),
    "LSTM": (_lstm, False, "16 n d^2", "O(n)", "O(n)"),
    "causal CNN, k = 3": (_causal_cnn, True, "2 k n d^2", "O(1) per layer", "O(n/k) layers"),
    "dilated causal CNN, k = 3": (functools.partial(_causal_cnn, dilated=True), True, "2 k n d^2",
                                  "O(1) per layer", "O(log_k n) layers"),
    "self-attention + W_O": (_self_attention, False, "4 n^2 d + 8 n d^2", "O(1)", "O(1)"),
    f"restricted attn, r = {RESTRICTED_R}": (_restricted_attention, True, "4 r n d + 8 n d^2", "O(1) per layer",
                                             "O(n/r) layers"),
}


def formula_flops(name, n, d, k=3):
    """The FLOPs formula of TABLE[name] (2 per multiply-add), evaluated."""
    return {"4 n d^2": 4 * n * d * d, "16 n d^2": 16 * n * d * d, "2 k n d^2": 2 * k * n * d * d,
            "4 n^2 d + 8 n d^2": 4 * n * n * d + 8 * n * d * d,
            "4 r n d + 8 n d^2": 4 * RESTRICTED_R * n * d + 8 * n * d * d}[TABLE[name][2]]


def build_layer(name, d, depth=1, seed=0, dtype=torch.float64):
    """The layer `name` of TABLE with width d (for the CNNs, a stack of `depth` layers)."""
    builder, stacked = TABLE[name][:2]
    generator = torch.Generator().manual_seed(seed)
    return builder(d, generator, dtype, depth=depth) if stacked else builder(d, generator, dtype)


def _tokens(n, d, seed=0, dtype=torch.float64, requires_grad=False):
    generator = torch.Generator().manual_seed(seed + 1)
    return [torch.randn(1, d, generator=generator, dtype=dtype).requires_grad_(requires_grad) for _ in range(n)]


def counted_flops(name, n, d, device="cpu"):
    """FLOPs of one layer of TABLE on one sequence of n tokens, counted by FlopCounterMode while the
    layer runs (2 per multiply-add of every matrix product and convolution; element-wise work is
    not counted). device="meta" runs the same code on shapes only, without arithmetic."""
    with torch.device(device):
        layer = build_layer(name, d, dtype=torch.float32)
        tokens = [torch.zeros(1, d) for _ in range(n)]
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            layer(tokens)
    return int(counter.get_total_flops())


# Autograd nodes that are a matrix product or a convolution: the operations counted as steps.
_PRODUCTS = ("MmBackward", "BmmBackward", "AddmmBackward", "MvBackward", "DotBackward", "ConvolutionBackward")


def _is_product(node):
    return type(node).__name__.startswith(_PRODUCTS)


def _children(node):
    return [child for child, _ in node.next_functions if child is not None]


def sequential_products(name, n, d=4):
    """The longest chain of matrix products (or convolutions) in one layer's autograd graph, each
    needing the result of the one before: steps that no number of cores can run side by side."""
    out = torch.stack(build_layer(name, d)(_tokens(n, d, requires_grad=True)))
    order, stack, seen = [], [(out.grad_fn, False)], set()
    while stack:  # an iterative post-order: an RNN's graph is too deep for recursion
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif node not in seen:
            seen.add(node)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node) if child not in seen)
    longest = {}
    for node in order:  # every child comes before its parents
        longest[node] = max((longest[c] for c in _children(node)), default=0) + _is_product(node)
    return longest[out.grad_fn]


def _fewest_operations(output, token):
    """Fewest operations on any route from the leaf `token` to `output` in the autograd graph
    (a breadth-first search from the output; the leaf itself is not an operation)."""
    depth, frontier, seen = 1, [output.grad_fn], {output.grad_fn}
    while frontier:
        following = []
        for node in frontier:
            for child in _children(node):
                if getattr(child, "variable", None) is token:
                    return depth
                if child not in seen:
                    seen.add(child)
                    following.append(child)
        frontier, depth = following, depth + 1
    return None


def path_length(name, n, d=4):
    """How far the first token is from the last output, measured: (layers, operations).

    Layers: stacks more layers (CNNs only; one layer of the others already reads every earlier
    token) until the gradient of the last output with respect to the first token is non-zero.
    Operations: the fewest operations (products, sums, activations, reshapes) on a route between
    them in that stack's autograd graph: the chain the signal crosses, and its gradient on the way
    back. Counting products alone would miss the LSTM's cell state, which crosses every step by
    element-wise operations only."""
    stacked = TABLE[name][1]
    for depth in range(1, (n if stacked else 1) + 1):
        tokens = _tokens(n, d, requires_grad=True)
        last = build_layer(name, d, depth=depth)(tokens)[-1].sum()
        grad, = torch.autograd.grad(last, tokens[0], retain_graph=True, allow_unused=True)
        if grad is not None and bool(grad.abs().max() > 0):
            return depth, _fewest_operations(last, tokens[0])
    raise ValueError(f"{name}: the last output does not depend on the first token within {n} layers")


def cost_table(ns=(16, 64), flops_n=64, flops_d=32, k=3):
    """Every measurement of the table, one dict per layer of TABLE: FLOPs counted at n = flops_n,
    d = flops_d beside the formula's value; the longest chain of products and the path length at
    each n of ns (width 4: only the graph matters there). Runs on one thread: the layers are tiny,
    and waking idle threads would cost more than the arithmetic."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _cost_table(ns, flops_n, flops_d, k)
    finally:
        torch.set_num_threads(threads)


def _cost_table(ns, flops_n, flops_d, k):
    rows = []
    for name, (_, _, formula, seq, path) in TABLE.items():
        rows.append({"layer": name, "formula": formula, "flops": counted_flops(name, flops_n, flops_d),
                     "formula_flops": formula_flops(name, flops_n, flops_d, k), "table_sequential": seq, "table_path": path,
                     "sequential": [sequential_products(name, n) for n in ns],
                     "path": [path_length(name, n) for n in ns]})
    return rows


def format_cost_table(rows, ns=(16, 64), flops_n=64, flops_d=32):
    """The table as text: what Vaswani et al.'s table states ("in theory") beside what was measured."""
    a, b = ns
    head = (f"{'layer':26s}|{'FLOPs per layer':>18s}{'counted':>10s}{'formula':>10s} |"
            f"{'sequential':>15s}{'chain':>7s}{'':6s} |{'path length':>18s}{'(layers, operations)':>22s}\n"
            f"{'':26s}|{'':18s}{f'n = {flops_n}, d = {flops_d}':>20s} |"
            f"{'(in theory)':>15s}{f'n={a}':>7s}{f'n={b}':>6s} |{'(in theory)':>18s}{f'n={a}':>11s}{f'n={b}':>11s}")
    lines = [head, "-" * len(head.splitlines()[0])]
    for row in rows:
        (la, pa), (lb, pb) = row["path"]
        lines.append(f"{row['layer']:26s}|{row['formula']:>18s}{row['flops']:>10d}{row['formula_flops']:>10d} |"
                     f"{row['table_sequential']:>15s}{row['sequential'][0]:>7d}{row['sequential'][1]:>6d} |"
                     f"{row['table_path']:>18s}{f'({la}, {pa})':>11s}{f'({lb}, {pb})':>11s}")
    return "\n".join(lines)
