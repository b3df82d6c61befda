"""Notebook 07 (multi-head attention): the computations behind its demos and widget, and the
figures that draw them.

The trained demo uses PyTorch's own `torch.nn.MultiheadAttention` (never the course's
reference or the student's answers), on the toy task of `course_utils.data.relations`.
Everything is seeded: the same arguments give the same numbers.
"""
import copy

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from course_utils import optim, plots
from course_utils.data import relations
from course_utils.training import in_parallel

__all__ = [
    "RelationModel", "train_relation_model", "evaluate", "head_weights", "head_relation_table",
    "head_specialisation", "ablate_heads", "compare_head_counts", "first_step_reaching", "draw_head_counts",
    "split_layout", "split_numbers", "draw_split", "draw_heads",
    "draw_head_query",
]


class RelationModel(nn.Module):
    """Token + learned position embeddings, one multi-head self-attention layer, and one linear
    read-out per relation from the attention output (no residual path: whatever a read-out
    needs must come through attention)."""

    def __init__(self, vocab_size=10, seq_len=8, d_model=48, num_heads=3):
        super().__init__()
        self.token = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(seq_len, d_model)
        self.attention = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
        self.readout = nn.ModuleDict({r: nn.Linear(d_model, vocab_size) for r in relations.RELATIONS})

    def forward(self, tokens):
        """Shape of tokens: (batch_size, seq_len). Returns ({relation: logits (batch_size,
        seq_len, vocab_size)}, weights (batch_size, num_heads, seq_len, seq_len))."""
        positions = torch.arange(tokens.shape[-1], device=tokens.device)
        x = self.token(tokens) + self.position(positions)
        out, weights = self.attention(x, x, x, need_weights=True, average_attn_weights=False)
        return {r: head(out) for r, head in self.readout.items()}, weights


def _loss(logits, targets):
    return sum(
        nn.functional.cross_entropy(logits[r].flatten(0, 1), targets[r].flatten(), ignore_index=relations.IGNORE)
        for r in relations.RELATIONS
    ) / len(relations.RELATIONS)


def train_relation_model(steps=300, batch_size=64, seq_len=8, vocab_size=10, d_model=48,
                         num_heads=3, lr=3e-3, seed=0, eval_every=None):
    """Train a RelationModel with Adam on fresh random batches. Returns (model, losses), the
    loss of every step as a list of floats; with eval_every = k, (model, losses, curve), where
    curve lists (step, `evaluate(model)`) after step 0, k, 2k, ... and after the last step.

    Runs on one CPU thread (restoring the previous setting afterwards): for a model this small
    that is the fastest, and it makes the result the same on every machine. Evaluating does not
    touch the training batches, so the model is the same with or without a curve.
    """
    model = _new_relation_model(seed, vocab_size, seq_len, d_model, num_heads)
    return _train_relation(model, steps, batch_size, seq_len, vocab_size, lr, seed, eval_every)


def _new_relation_model(seed, vocab_size, seq_len, d_model, num_heads):
    # Built from the global random numbers: one model after the other, never inside parallel runs.
    torch.manual_seed(seed)
    return RelationModel(vocab_size, seq_len, d_model, num_heads)


def _train_relation(model, steps, batch_size, seq_len, vocab_size, lr, seed, eval_every):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(seed)
        optimizer = optim.Adam(model.parameters(), lr=lr)
        losses, curve = [], []
        for step in range(steps):
            tokens, targets = relations.make_batch(batch_size, seq_len, vocab_size, generator)
            logits, _ = model(tokens)
            loss = _loss(logits, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if eval_every and (step % eval_every == 0 or step == steps - 1):
                curve.append((step + 1, evaluate(model)))
    finally:
        torch.set_num_threads(threads)
    model.eval()
    return (model, losses) if not eval_every else (model, losses, curve)


@torch.no_grad()
def evaluate(model, n=1000, seed=1):
    """Accuracy of each relation's read-out on n fresh sequences: {relation: float in [0, 1]}."""
    seq_len = model.position.num_embeddings
    vocab_size = model.token.num_embeddings
    tokens, targets = relations.make_batch(n, seq_len, vocab_size, torch.Generator().manual_seed(seed))
    logits, _ = model(tokens)
    accuracy = {}
    for r in relations.RELATIONS:
        keep = targets[r] != relations.IGNORE
        accuracy[r] = float((logits[r].argmax(-1) == targets[r])[keep].float().mean())
    return accuracy


@torch.no_grad()
def head_weights(model, tokens):
    """Attention weights of every head for one sequence: NumPy (num_heads, seq_len, seq_len).
    Shape of tokens: (seq_len,)."""
    _, weights = model(torch.as_tensor(tokens).unsqueeze(0))
    return weights[0].numpy()


@torch.no_grad()
def head_relation_table(model, n=500, seed=2):
    """How much weight each head puts on each relation's source position, on average.

    Returns a NumPy array (num_heads, len(RELATIONS)): entry [h, r] is the mean over n random
    sequences and over the positions where relation r has a source of head h's weight on it.
    """
    seq_len = model.position.num_embeddings
    tokens, _ = relations.make_batch(n, seq_len, model.token.num_embeddings, torch.Generator().manual_seed(seed))
    _, weights = model(tokens)  # (n, heads, T, T)
    table = np.zeros((weights.shape[1], len(relations.RELATIONS)))
    for j, r in enumerate(relations.RELATIONS):
        source = relations.source_positions(r, seq_len)
        rows = [t for t in range(seq_len) if source[t] >= 0]
        cols = [source[t] for t in rows]
        table[:, j] = weights[:, :, rows, cols].mean(dim=(0, 2)).numpy()
    return table


def head_specialisation(table):
    """For each head, the relation it attends to most and the weight it puts there:
    a list of (relation, weight)."""
    return [(relations.RELATIONS[int(np.argmax(row))], float(np.max(row))) for row in np.asarray(table)]


@torch.no_grad()
def ablate_heads(model, n=1000, seed=1):
    """Switch off one head at a time and measure: a list with, for each head h, `evaluate` of
    the model whose output projection W_O ignores head h (its columns set to zero), as at test
    time in Michel et al. (2019). The model itself is left unchanged."""
    attention = model.attention
    d_k = attention.embed_dim // attention.num_heads
    results = []
    for h in range(attention.num_heads):
        pruned = copy.deepcopy(model)
        pruned.attention.out_proj.weight[:, h * d_k:(h + 1) * d_k] = 0.0
        results.append(evaluate(pruned, n=n, seed=seed))
    return results


def compare_head_counts(head_counts=(1, 3), seeds=(0, 1, 2), steps=300, d_model=48, eval_every=50, workers=2):
    """Train the relation model with each number of heads and each seed (same width, same data),
    `workers` runs at a time, each on one thread (the results do not depend on `workers`).

    Returns {num_heads: {seed: {"model", "losses", "accuracy": {relation: float}, "roles": [(relation,
    weight), ...], "curve": [(step, accuracy), ...], "ablation": [accuracy with head h off, ...]}}};
    "roles" is `head_specialisation` of the trained model (what each head attends to most),
    "curve" the held-out accuracy every `eval_every` steps, "ablation" `ablate_heads`.
    """
    runs = [(num_heads, seed) for num_heads in head_counts for seed in seeds]
    models = [_new_relation_model(seed, 10, 8, d_model, num_heads) for num_heads, seed in runs]

    def run(model, seed):
        model, losses, curve = _train_relation(model, steps, 64, 8, 10, 3e-3, seed, eval_every)
        return {"model": model, "losses": losses, "accuracy": evaluate(model),
                "roles": head_specialisation(head_relation_table(model)), "curve": curve,
                "ablation": ablate_heads(model)}

    # Two runs at a time, one per core; each gives what it gives alone (the models are built above).
    done = in_parallel([lambda model=model, seed=seed: run(model, seed) for model, (_, seed) in zip(models, runs)],
                       workers=workers, models=models, description="runs")
    results = {num_heads: {} for num_heads in head_counts}
    for (num_heads, seed), result in zip(runs, done):
        results[num_heads][seed] = result
    return results


def first_step_reaching(curve, level):
    """The first step of a curve [(step, {relation: accuracy}), ...] at which every relation is at
    least `level`, or None if it never gets there."""
    for step, accuracy in curve:
        if min(accuracy.values()) >= level:
            return step
    return None


def split_layout(d_model, num_heads):
    """Which head owns each feature after splitting: an int array of shape (d_model,), feature
    f going to head f // d_k (d_k = d_model // num_heads)."""
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return np.arange(d_model) // (d_model // num_heads)


# ----------------------------------------------------------------------------------------
# Figures

def split_numbers(seq_len, d_model, num_heads, transpose=True):
    """Where the numbers of a (seq_len, d_model) matrix holding 0, 1, 2, ... (row by row) end up
    after splitting into heads: an int array (num_heads, seq_len, d_k). With transpose=False,
    what a plain reshape to (num_heads, seq_len, d_k) gives instead (the common mistake)."""
    d_k = d_model // num_heads
    x = np.arange(seq_len * d_model).reshape(seq_len, d_model)
    if transpose:
        return x.reshape(seq_len, num_heads, d_k).transpose(1, 0, 2)
    return x.reshape(num_heads, seq_len, d_k)


def draw_split(seq_len, d_model, num_heads, axes=None):
    """Three panels: a (seq_len, d_model) matrix numbered 0, 1, 2, ... and coloured by the head
    that owns each column; the heads after reshape + transpose (right); the heads after a
    plain reshape (wrong: each head gets whole tokens, the colours mix)."""
    owner = split_layout(d_model, num_heads)
    d_k = d_model // num_heads
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(12, 3.6), layout="constrained",
                               gridspec_kw={"width_ratios": [d_model, d_k + 1, d_k + 1]})
    cmap = plt.get_cmap("tab10", num_heads)
    numbers = np.arange(seq_len * d_model).reshape(seq_len, d_model)

    def panel(ax, values, title):
        colour = owner[values % d_model]
        ax.imshow(colour, cmap=cmap, vmin=-0.5, vmax=num_heads - 0.5, aspect="auto")
        for (i, j), v in np.ndenumerate(values):
            ax.text(j, i, str(v), ha="center", va="center", fontsize=7, color="white")
        ax.set_title(title, fontsize=10)

    panel(axes[0], numbers, f"X W_Q: (T, d_model) = ({seq_len}, {d_model})")
    for f in range(d_k, d_model, d_k):
        axes[0].axvline(f - 0.5, color="black", linewidth=2)
    axes[0].set_xlabel("feature (colour = the head that owns it)")
    axes[0].set_ylabel("token")
    for ax, transpose, title in ((axes[1], True, "reshape + transpose (right)"),
                                 (axes[2], False, "reshape only (wrong)")):
        stacked = split_numbers(seq_len, d_model, num_heads, transpose).reshape(num_heads * seq_len, d_k)
        panel(ax, stacked, title)
        for h in range(1, num_heads):
            ax.axhline(h * seq_len - 0.5, color="black", linewidth=2)
        ax.set_yticks([h * seq_len + seq_len / 2 - 0.5 for h in range(num_heads)],
                      labels=[f"head {h}" for h in range(num_heads)])
        ax.set_xlabel("feature within the head")
    return axes


def draw_heads(weights, tokens=None, titles=None, axes=None):
    """One attention heatmap per head. Shape of weights: (num_heads, T, T)."""
    weights = np.asarray(weights)
    num_heads, T, _ = weights.shape
    if axes is None:
        _, axes = plt.subplots(1, num_heads, figsize=(3.6 * num_heads, 3.4), layout="constrained")
    axes = np.atleast_1d(axes)
    labels = None if tokens is None else [f"{t}:{int(v)}" for t, v in enumerate(tokens)]
    for h in range(num_heads):
        title = titles[h] if titles is not None else f"head {h}"
        plots.show_attention(weights[h], row_labels=labels, col_labels=labels, ax=axes[h], title=title,
                             xlabel="key (position:token)", ylabel="query (position:token)",
                             annotate=False, colorbar=h == num_heads - 1)
    return axes


def draw_head_query(weights, head, query, tokens=None, axes=None):
    """The widget's figure: head `head`'s heatmap with row `query` outlined, and that query's
    weights over the keys as bars."""
    weights = np.asarray(weights)
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    labels = None if tokens is None else [f"{t}:{int(v)}" for t, v in enumerate(tokens)]
    plots.show_attention(weights[head], row_labels=labels, col_labels=labels, ax=axes[0],
                         title=f"head {head}", xlabel="key (position:token)",
                         ylabel="query (position:token)", annotate=False, highlight_row=query)
    row = weights[head, query]
    plots.show_bars(row, labels=labels, ax=axes[1], highlight=int(np.argmax(row)), ylim=(0, 1.1),
                    title=f"head {head}, query at position {query}", xlabel="key (position:token)")
    return axes


def runs_vocab_size(runs):
    """The number of symbols of the models in a `compare_head_counts` result."""
    return next(iter(next(iter(runs.values())).values()))["model"].token.num_embeddings


def draw_head_counts(runs, axes=None):
    """Held-out accuracy against training steps, one panel per relation, one colour per number of
    heads: the mean over seeds as a line, the lowest and highest seed as a band.
    runs: the result of `compare_head_counts`."""
    if axes is None:
        _, axes = plt.subplots(1, len(relations.RELATIONS), figsize=(12, 3.4), layout="constrained", sharey=True)
    for i, (num_heads, by_seed) in enumerate(runs.items()):
        colour = f"C{i}"
        curves = [run["curve"] for run in by_seed.values()]
        steps = [step for step, _ in curves[0]]
        for ax, r in zip(axes, relations.RELATIONS):
            values = 100 * np.array([[accuracy[r] for _, accuracy in curve] for curve in curves])
            label = f"{num_heads} head{'s' if num_heads > 1 else ''} (mean of {len(curves)} seeds; band: range)"
            ax.plot(steps, values.mean(0), color=colour, label=label)
            ax.fill_between(steps, values.min(0), values.max(0), color=colour, alpha=0.25, lw=0)
            ax.set_title(f"relation: {r}", fontsize=10)
            ax.set_xlabel("training step")
    axes[0].set_ylabel("% right on 1000 new sequences")
    for ax in axes:  # a blind guess among the 10 symbols
        ax.axhline(100 / runs_vocab_size(runs), color="grey", ls=":", lw=1)
    axes[0].legend(fontsize=8, loc="lower right")
    axes[0].set_ylim(0, 102)
    return axes
