"""Pure compute and drawing behind the demos of notebook 03 (embeddings and positions).

`positional_table` computes the sinusoidal encoding for the heatmap widget, through complex
exponentials rather than the sin/cos formula of the exercise; the exercise's hidden tests
forbid calling it, so it cannot stand in for the student's own `sinusoidal_encoding`.
"""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import optim
from course_utils.training import one_thread

__all__ = [
    "positional_table", "similarity_profile", "offset_similarity", "train_skipgram",
    "nearest_neighbours", "category_agreement", "train_previous_token_scorer", "extrapolation_runs", "hits_by_position",
    "chance_tail", "off_block_share", "position_ranges", "draw_encoding", "draw_similarity", "draw_extrapolation",
]


def positional_table(max_len, d_model):
    """The sinusoidal positional encoding as a float64 NumPy array of shape (max_len, d_model).

    Column pair (2i, 2i + 1) holds the imaginary and real parts of exp(1j * pos * w_i),
    w_i = 10000 ** (-2i / d_model). d_model must be even.
    """
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be even and >= 2, got {d_model}")
    w = np.power(10000.0, -np.arange(d_model // 2) * 2.0 / d_model)
    phasors = np.exp(1j * np.outer(np.arange(max_len), w))  # (max_len, d_model / 2)
    return np.stack([phasors.imag, phasors.real], axis=-1).reshape(max_len, d_model)


def similarity_profile(table, position):
    """Cosine similarity between row `position` of the table and every row: shape (max_len,)."""
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    return unit @ unit[position]


def offset_similarity(table):
    """The dot product of every pair of rows, divided by d_model / 2: shape (max_len, max_len).

    For the sinusoidal table, entry (p, q) is the mean of cos((p - q) * w_i) over the pairs,
    so it depends only on the offset p - q: the matrix is constant along every diagonal.
    """
    return table @ table.T / (table.shape[1] / 2)


def train_skipgram(centers, contexts, vocab_size, dim=16, steps=300, lr=0.05, seed=0):
    """Skip-gram with a full softmax: predict each context word from its center word.

    centers, contexts: int arrays of equal length. Returns (embeddings as a float64 NumPy array
    of shape (vocab_size, dim), list of the loss every 50 steps).
    """
    with one_thread():
        torch.manual_seed(seed)
        embed = nn.Embedding(vocab_size, dim)
        output = nn.Linear(dim, vocab_size, bias=False)
        optimiser = optim.Adam(list(embed.parameters()) + list(output.parameters()), lr=lr)
        centers = torch.as_tensor(centers)
        contexts = torch.as_tensor(contexts)
        losses = []
        for step in range(steps):
            loss = F.cross_entropy(output(embed(centers)), contexts)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            if step % 50 == 0 or step == steps - 1:
                losses.append(round(loss.item(), 3))
    return embed.weight.detach().double().numpy(), losses


def nearest_neighbours(vectors, words, word, k=3):
    """The k words whose vectors have the highest cosine similarity with `word`'s, with the
    similarities: a list of (word, similarity) pairs, most similar first."""
    table = torch.as_tensor(vectors)
    index = words.index(word)
    sims = F.cosine_similarity(table[index][None, :], table, dim=-1)
    sims[index] = -2.0  # never the word itself
    best = torch.argsort(sims, descending=True)[:k]
    return [(words[int(i)], float(sims[i])) for i in best]


def category_agreement(vectors, words, categories, k=3):
    """How often a word's k nearest neighbours (by cosine) belong to its own category.

    categories: {name: words}; only words of the vocabulary `words` count. Returns (hits, total,
    chance): hits of the total neighbours looked at, and the share of hits to expect if each
    neighbour were another word of the vocabulary drawn uniformly at random.
    """
    category = {w: name for name, members in categories.items() for w in members if w in words}
    sizes = {name: sum(1 for c in category.values() if c == name) for name in categories}
    hits = total = 0
    for word, name in category.items():
        for neighbour, _ in nearest_neighbours(vectors, words, word, k=k):
            hits += category.get(neighbour) == name
            total += 1
    chance = float(np.mean([(sizes[name] - 1) / (len(words) - 1) for name in category.values()]))
    return hits, total, chance


def train_previous_token_scorer(kind, d_model=16, train_len=32, total_len=64, steps=300, lr=0.05, seed=0):
    """A toy task for position encodings: each position must pick the position just before it.

    Position p scores every position q as E[p] @ A @ E[q] (A is learned); the softmax over q
    should put its mass on q = p - 1. Training uses positions 1 .. train_len - 1, choosing among
    the first train_len positions; testing uses positions train_len .. total_len - 1, choosing
    among all total_len positions.

    kind: "sinusoidal" (E fixed, from positional_table) or "learned" (E an nn.Embedding of
    total_len rows, trained along with A; rows >= train_len are never trained).
    Returns a dict: parameters (of E), train_accuracy, test_accuracy, and test_correct (a list
    of bools, one per test position train_len .. total_len - 1: was its pick p - 1?) and
    off_block_share (`off_block_share` of the trained A).
    """
    with one_thread():
        torch.manual_seed(seed)
        if kind == "sinusoidal":
            table = torch.tensor(positional_table(total_len, d_model), dtype=torch.float32)
            encodings = lambda: table  # noqa: E731
            parameters = []
            n_params = 0
        elif kind == "learned":
            learned = nn.Embedding(total_len, d_model)
            encodings = lambda: learned.weight  # noqa: E731
            parameters = list(learned.parameters())
            n_params = learned.weight.numel()
        else:
            raise ValueError(f"kind must be 'sinusoidal' or 'learned', got {kind!r}")
        A = nn.Parameter(0.1 * torch.randn(d_model, d_model))
        optimiser = optim.Adam(parameters + [A], lr=lr)
        queries = torch.arange(1, train_len)
        for _ in range(steps):
            E = encodings()
            scores = E[queries] @ A @ E[:train_len].T
            loss = F.cross_entropy(scores, queries - 1)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        with torch.no_grad():
            E = encodings()
            train_pick = (E[queries] @ A @ E[:train_len].T).argmax(dim=-1)
            test_queries = torch.arange(train_len, total_len)
            test_pick = (E[test_queries] @ A @ E.T).argmax(dim=-1)
    test_correct = test_pick == test_queries - 1
    return {
        "parameters": n_params,
        "train_accuracy": float((train_pick == queries - 1).float().mean()),
        "test_accuracy": float(test_correct.float().mean()),
        "test_correct": test_correct.tolist(),
        "off_block_share": off_block_share(A.detach().double().numpy()),
    }


def off_block_share(A):
    """The share of A's squared entries outside its 2 x 2 diagonal blocks: a float in [0, 1].

    The rotation R_k of the sinusoidal encoding is block diagonal (each sine/cosine pair maps
    only to itself), so for R_k the share is 0; weight off the blocks mixes different pairs.
    """
    A = np.asarray(A, dtype=float)
    on_blocks = sum(np.sum(A[i:i + 2, i:i + 2] ** 2) for i in range(0, A.shape[0], 2))
    return float(1 - on_blocks / np.sum(A ** 2))


def position_ranges(positions):
    """Sorted integers written as runs: [32, 41, 42, 43, 45] -> "32, 41-43, 45" ("none" if empty)."""
    positions = sorted(positions)
    runs = []
    for p in positions:
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs) or "none"


def extrapolation_runs(kinds=("learned", "sinusoidal"), seeds=range(10), **kwargs):
    """`train_previous_token_scorer` for every kind and seed (other arguments passed on):
    {kind: [result of seed 0, result of seed 1, ...]} in the order of `seeds`."""
    return {kind: [train_previous_token_scorer(kind, seed=seed, **kwargs) for seed in seeds] for kind in kinds}


def hits_by_position(results):
    """The fraction of runs that got each test position right: a float array (n_test_positions,),
    from a list of `train_previous_token_scorer` results."""
    return np.mean([r["test_correct"] for r in results], axis=0)


def chance_tail(hits, trials, p):
    """P(X <= hits) for X ~ Binomial(trials, p): how often a guesser who is right with
    probability p on each of `trials` independent tries gets `hits` or fewer right."""
    from math import comb

    return sum(comb(trials, k) * p ** k * (1 - p) ** (trials - k) for k in range(hits + 1))


def draw_encoding(table, ax=None, title=None):
    """Heatmap of an encoding table: positions down, dimensions across."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    ax.set_title(title or f"sinusoidal encoding, d_model = {table.shape[1]}")
    ax.figure.colorbar(image, ax=ax, fraction=0.046)
    return ax


def draw_similarity(profile, position, ax=None):
    """Line plot of the cosine similarity between one position and all others."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3))
    ax.plot(np.arange(len(profile)), profile, marker=".", color="tab:blue")
    ax.axvline(position, color="tab:red", ls="--", lw=1)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel("position q")
    ax.set_ylabel(f"cos(PE[{position}], PE[q])")
    ax.set_title(f"similarity of position {position} to every position")
    return ax


def draw_extrapolation(runs, first_test_position, chance=None, exact=None, axes=None):
    """Two panels for the extrapolation experiment.

    Left: each seed's accuracy on the unseen positions (one dot per seed), the mean (a bar) and
    the lowest and highest seed (the whisker), per kind. Right: for each unseen position, the
    fraction of seeds that got it right, per kind. runs: {kind: list of results of
    `train_previous_token_scorer`}; chance: a horizontal line (the accuracy of a uniform guess);
    exact: optional list of bools per test position for a solution without training (drawn on
    the right as a dashed line).
    """
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(12, 3.8), layout="constrained",
                               gridspec_kw={"width_ratios": [1, 2.4]})
    left, right = axes
    colours = {"learned": "tab:orange", "sinusoidal": "tab:blue"}
    jitter = np.random.default_rng(0)
    for i, (kind, results) in enumerate(runs.items()):
        accuracy = 100 * np.array([r["test_accuracy"] for r in results])
        colour = colours.get(kind, f"C{i}")
        left.bar(i, accuracy.mean(), width=0.6, color=colour, alpha=0.35)
        left.errorbar(i, accuracy.mean(), yerr=[[accuracy.mean() - accuracy.min()], [accuracy.max() - accuracy.mean()]],
                      color="black", capsize=6, lw=1)
        left.scatter(i + jitter.uniform(-0.15, 0.15, len(accuracy)), accuracy, color=colour, s=18, zorder=3)
        positions = first_test_position + np.arange(len(results[0]["test_correct"]))
        right.plot(positions, 100 * hits_by_position(results), marker="o", ms=4, color=colour,
                   label=f"{kind}, trained A")
    if exact is not None:
        right.plot(positions, 100 * np.asarray(exact, dtype=float), ls="--", color="tab:green",
                   label="sinusoidal, A = R_-1 (no training)")
    for ax in axes:
        if chance is not None:
            ax.axhline(100 * chance, color="grey", ls=":", lw=1)
        ax.set_ylim(-4, 104)
    left.set_xticks(range(len(runs)), labels=list(runs))
    left.set_ylabel("% of the unseen positions right")
    left.set_title(f"each dot one seed; bar = mean, whisker = range ({len(next(iter(runs.values())))} seeds)",
                   fontsize=10)
    right.set_xlabel("unseen position p (its answer is p - 1)")
    right.set_ylabel("% of seeds that got it right")
    right.set_title("which unseen positions are right" + ("" if chance is None else f" (dotted: chance, 1/{round(1 / chance)})"),
                    fontsize=10)
    right.legend(fontsize=8, loc="center right")
    return axes
