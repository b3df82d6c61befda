"""Notebook 11 (fast generation): the computations behind its demos and widget, and the figures.

Nothing here uses the course's reference or the student's answers, and everything is seeded.
The demos need a key/value cache of their own (the timings and the sampler run before the
student has written one), so this module keeps one in the form inference servers use: a
*static* cache, one buffer per model allocated up front and filled in place as tokens arrive,
with a length counter. The exercise asks for the other form, a function that returns a new,
longer cache and never touches the one it was given.

Training, sampling and timing run on one CPU thread (restored afterwards): for models this
small it is the fastest, and it makes the numbers the same on every machine.
"""
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from course_utils.models.decoder_lm import DecoderLM
from course_utils import training
from course_utils.training import LMRun, one_thread, train_next_char

__all__ = [
    "StaticCache", "static_forward", "generate_ids", "time_per_token", "loglog_slope",
    "MODEL_CONFIGS", "cache_table", "LMRun", "train_lm", "held_out_loss",
    "next_token_distribution", "next_token_probs", "sample_text", "draw_distribution",
    "draw_timings",
]


# --------------------------------------------------------------------------- a static cache

class StaticCache:
    """Keys and values of every block for up to `max_len` tokens, preallocated:
    `keys[layer]` and `values[layer]` have shape (B, num_heads, max_len, head_dim); the first
    `length` positions are filled. dtype: the model's, unless given."""

    def __init__(self, model, batch_size, max_len, dtype=None):
        attn = model.blocks[0].attn
        dtype = dtype or model.head.weight.dtype
        shape = (batch_size, attn.num_heads, max_len, attn.head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype) for _ in model.blocks]
        self.values = [torch.zeros(shape, dtype=dtype) for _ in model.blocks]
        self.length = 0

    def nbytes(self):
        """Bytes of the filled part: keys and values, every block, every sequence."""
        return sum(t[:, :, :self.length].numel() * t.element_size() for t in self.keys + self.values)


@torch.no_grad()
def static_forward(model, tokens, cache):
    """Run `tokens` (B, T_new), which follow the cache's `length` tokens, through `model`,
    writing their keys and values into the cache in place. Returns the logits (B, T_new, V)."""
    start, end = cache.length, cache.length + tokens.shape[1]
    x = model.embed(tokens, torch.arange(start, end))
    visible = torch.arange(end)[None, :] <= torch.arange(start, end)[:, None]  # (T_new, end)
    for block, keys, values in zip(model.blocks, cache.keys, cache.values):
        attn = block.attn
        h = block.norm1(x)
        keys[:, :, start:end] = attn.split_heads(attn.k_proj(h))
        values[:, :, start:end] = attn.split_heads(attn.v_proj(h))
        out = F.scaled_dot_product_attention(attn.split_heads(attn.q_proj(h)), keys[:, :, :end],
                                             values[:, :, :end], attn_mask=visible)
        x = x + attn.out_proj(attn.merge_heads(out))
        x = x + block.mlp(block.norm2(x))
    cache.length = end
    return model.head(model.norm(x))


@one_thread()
@torch.no_grad()
def generate_ids(model, prompt_ids, n_new, use_cache=True, choose=None):
    """Continue `prompt_ids` (B, P) by n_new tokens. `choose(logits (B, V)) -> (B,)` picks each
    next token (default: the most likely). With the cache each step runs one token through the
    model; without it, the whole sequence so far. Returns (B, P + n_new)."""
    choose = choose or (lambda logits: logits.argmax(dim=-1))
    ids = prompt_ids
    if use_cache:
        cache = StaticCache(model, ids.shape[0], ids.shape[1] + n_new)
        logits = static_forward(model, ids, cache)[:, -1]
    for step in range(n_new):
        if not use_cache:
            logits = model(ids)[:, -1]
        nxt = choose(logits)[:, None]
        ids = torch.cat([ids, nxt], dim=1)
        if use_cache and step + 1 < n_new:
            logits = static_forward(model, nxt, cache)[:, -1]
    return ids


@one_thread()
@torch.no_grad()
def time_per_token(model, lengths, repeats=5, batch_size=1, seed=0):
    """Seconds to produce the next token after T tokens, for every T in `lengths`: with the
    cache (one token through the model, attending to T cached keys) and without it (all T + 1
    tokens recomputed). The fastest of `repeats` runs: other programs on the machine only ever
    slow a run down, so the minimum is the best estimate of the work itself. Returns two NumPy
    arrays."""
    g = torch.Generator().manual_seed(seed)
    with_cache, without = [], []
    for T in lengths:
        ids = torch.randint(0, model.vocab_size, (batch_size, T + 1), generator=g)
        cache = StaticCache(model, batch_size, T + 1)
        static_forward(model, ids[:, :T], cache)
        runs_with, runs_without = [], []
        for _ in range(repeats):
            cache.length = T
            start = time.perf_counter()
            static_forward(model, ids[:, T:], cache)
            runs_with.append(time.perf_counter() - start)
            start = time.perf_counter()
            model(ids)
            runs_without.append(time.perf_counter() - start)
        with_cache.append(min(runs_with))
        without.append(min(runs_without))
    return np.array(with_cache), np.array(without)


def loglog_slope(xs, ys):
    """Slope of the least-squares line through (log x, log y): the exponent p in y ~ x^p."""
    slope, _ = np.polyfit(np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float)), 1)
    return float(slope)


def draw_timings(lengths, with_cache, without, title="Time per generated token"):
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.loglog(lengths, 1000 * np.asarray(without), "o-", label="without cache (recompute all)")
    ax.loglog(lengths, 1000 * np.asarray(with_cache), "s-", label="with KV cache (one token)")
    x = np.asarray(lengths, float)
    for p, style in ((1, ":"), (2, "--")):
        ax.loglog(x, 1000 * without[-1] * (x / x[-1]) ** p, style, color="gray", linewidth=1,
                  label=f"slope {p}")
    ax.set_xticks(x, labels=[f"{v:g}" for v in x])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_title(title)
    ax.set_xlabel("position of the new token T (tokens already generated)")
    ax.set_ylabel("time for one token (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax


# --------------------------------------------------------------------------- cache memory of real models

# Published shapes (the models' configuration files): layers, query heads, key/value heads, head size.
MODEL_CONFIGS = {
    "Llama-2-7B (MHA)": dict(num_layers=32, num_heads=32, num_kv_heads=32, head_dim=128),
    "Llama-2-70B (GQA, 8 kv heads)": dict(num_layers=80, num_heads=64, num_kv_heads=8, head_dim=128),
    "Falcon-7B (MQA, 1 kv head)": dict(num_layers=32, num_heads=71, num_kv_heads=1, head_dim=64),
}


def cache_table(T=4096, bytes_per_value=2, batch_size=1, configs=None):
    """For each named config: (name, values per token, GiB for the whole batch and context).
    Values per token: 2 (K and V) x layers x kv heads x head size."""
    rows = []
    for name, c in (configs or MODEL_CONFIGS).items():
        per_token = 2 * c["num_layers"] * c["num_kv_heads"] * c["head_dim"]
        rows.append((name, per_token, per_token * T * bytes_per_value * batch_size / 2**30))
    return rows


# --------------------------------------------------------------------------- a trained model

def train_lm(steps=200, context=64, batch_size=16, d_model=32, num_heads=2, num_layers=2, d_ff=64,
             lr=1e-2, seed=0, progress=None):
    """Train a `DecoderLM` on the course's generated text (notebook 08's), the last 10% held out.
    Adam, seeded: the same arguments give the same model. Returns an `LMRun`."""
    return train_next_char(lambda vocab_size: DecoderLM(vocab_size, context, d_model, num_heads, num_layers, d_ff),
                           steps, context, batch_size, lr, seed=seed, progress=progress)


def held_out_loss(run, n_batches=8, batch_size=16, seed=1):
    """Mean cross-entropy (nats per character) on windows of the held-out text."""
    return training.held_out_loss(run, n_batches=n_batches, batch_size=batch_size, seed=seed)


# --------------------------------------------------------------------------- sampling

def next_token_distribution(logits, temperature=1.0, k=None, p=1.0):
    """The distribution to sample the next token from, in NumPy (float64): temperature, then
    top-k, then top-p on what is left, as in most libraries. Tokens are ranked by logit with
    ties to the lower index; top-k keeps exactly min(k, V) tokens; top-p keeps a token while
    the tokens ranked before it hold less than p; temperature 0 keeps the first maximal logit.
    logits: (V,) or (..., V). Returns an array of the same shape that sums to one."""
    z = np.asarray(logits, dtype=np.float64)
    V = z.shape[-1]
    order = np.argsort(-z, axis=-1, kind="stable")           # best first, ties by index
    ranks = np.argsort(order, axis=-1, kind="stable")        # rank of every token
    if temperature == 0:
        return (ranks == 0).astype(np.float64)
    z = z / temperature
    limit = V if k is None else min(int(k), V)
    z = np.where(ranks < limit, z, -np.inf)
    probs = np.exp(z - z.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    if p < 1.0:
        ranked = np.take_along_axis(probs, order, axis=-1)
        mass_before = np.cumsum(ranked, axis=-1) - ranked
        inside = np.take_along_axis(mass_before < p, ranks, axis=-1)
        probs = np.where(inside, probs, 0.0)
        probs /= probs.sum(axis=-1, keepdims=True)
    return probs


def _prompt_ids(run, prompt):
    ids = run.vocab.encode(run.vocab.clean(prompt)) or run.vocab.encode(" ")
    return torch.tensor(ids)[None, -(run.model.context - 1):]


@one_thread()
@torch.no_grad()
def next_token_probs(run, prompt, temperature=1.0, k=None, p=1.0):
    """The trained model's sampling distribution for the character after `prompt`."""
    logits = run.model(_prompt_ids(run, prompt))[0, -1]
    return next_token_distribution(logits.numpy(), temperature, k, p)


def sample_text(run, prompt, n_chars=40, temperature=1.0, k=None, p=1.0, n_samples=3, seed=0):
    """n_samples continuations of `prompt`, each drawn with the cache from the distribution
    above, one seeded NumPy generator for all. A prompt longer than the context keeps its last
    context - 1 characters; generation stops when the context is full."""
    rng = np.random.default_rng(seed)
    ids = _prompt_ids(run, prompt).repeat(n_samples, 1)
    n_chars = min(n_chars, run.model.context - ids.shape[1])

    def choose(logits):
        probs = next_token_distribution(logits.double().numpy(), temperature, k, p)
        return torch.tensor([rng.choice(len(row), p=row) for row in probs])

    out = generate_ids(run.model, ids, n_chars, use_cache=True, choose=choose)
    return [run.vocab.decode(row[ids.shape[1]:]) for row in out]


def draw_distribution(probs, chars, title="", ax=None):
    """Bars of the next-character distribution; labels show the characters (space as '␣')."""
    probs = np.asarray(probs, dtype=np.float64)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 3))
    labels = ["␣" if c == " " else c for c in chars]
    kept = probs > 0
    ax.bar(range(len(probs)), probs, color=np.where(kept, "tab:blue", "lightgray"))
    ax.set_xticks(range(len(probs)), labels=labels)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.set_xlabel(f"next character ({int(kept.sum())} of {len(probs)} can be drawn)")
    ax.set_ylabel("probability")
    return ax
