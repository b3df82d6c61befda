"""Notebook 08 (masking and the transformer block): the computations behind its demos and
widget, and the figures that draw them.

Everything here uses PyTorch's own layers (`torch.nn.TransformerEncoderLayer`,
`course_utils.models.tiny_lm.CharLM`), never the course's reference or the student's answers, and is
seeded: the same arguments give the same numbers. Training and sampling run on one CPU thread
(restored afterwards), which for models this small is the fastest and makes the numbers the
same on every machine.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.models.tiny_lm import CharLM
from course_utils.training import LMRun, held_out_loss, one_thread, train_next_char

__all__ = [
    "LMRun", "train_char_lm", "held_out_loss", "next_char_probabilities", "generate",
    "future_leak", "gradient_norms_by_layer", "draw_gradient_norms", "draw_masks",
    "draw_next_char", "draw_losses",
]


def train_char_lm(steps=300, context=32, batch_size=32, d_model=64, num_heads=4, num_layers=2,
                  d_ff=128, lr=3e-3, seed=0, text=None, progress=None):
    """Train a `CharLM` with Adam to predict the next character of the course's text (the last
    10% held out). `progress`, if given, wraps the range of steps (e.g. a tqdm bar).
    Returns an `LMRun`. The same arguments always give the same model and losses."""
    return train_next_char(lambda vocab_size: CharLM(vocab_size, context, d_model, num_heads, num_layers, d_ff),
                           steps, context, batch_size, lr, seed=seed, text=text, progress=progress)


def _prompt_ids(run, prompt):
    ids = run.vocab.encode(run.vocab.clean(prompt)) or run.vocab.encode(" ")
    return torch.tensor(ids)


@one_thread()
@torch.no_grad()
def next_char_probabilities(run, prompt, temperature=1.0):
    """The model's distribution over the next character after `prompt` (cleaned to the
    vocabulary), at the given temperature: softmax(logits / temperature). Temperature 0 puts
    all the probability on the most likely character. Returns a 1-D NumPy array."""
    ids = _prompt_ids(run, prompt)[-run.model.context:]
    logits = run.model(ids[None])[0, -1]
    if temperature <= 0:
        probs = torch.zeros_like(logits)
        probs[logits.argmax()] = 1.0
        return probs.numpy()
    return torch.softmax(logits / temperature, dim=-1).numpy()


@one_thread()
@torch.no_grad()
def generate(run, prompt, n_chars=80, temperature=1.0, seed=0):
    """Continue `prompt` (lower-cased, unknown characters dropped) by n_chars characters, each
    drawn from softmax(logits / temperature) of the last `context` characters (temperature 0:
    always the most likely one). Seeded: the same arguments give the same text.
    Returns the continuation only (a str)."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    generator = torch.Generator().manual_seed(seed)
    ids = _prompt_ids(run, prompt).tolist()
    out = []
    for _ in range(n_chars):
        logits = run.model(torch.tensor(ids[-run.model.context:])[None])[0, -1]
        if temperature == 0:
            nxt = int(logits.argmax())
        else:
            probs = torch.softmax(logits.double() / temperature, dim=-1)
            nxt = int(torch.multinomial(probs, 1, generator=generator))
        ids.append(nxt)
        out.append(nxt)
    return run.vocab.decode(out)


@one_thread()
@torch.no_grad()
def future_leak(run, text, t, seed=0):
    """Replace every character after position t of `text` by random ones and return the largest
    change of the model's logits at positions 0..t (0.0 for a causal model) and after t."""
    ids = torch.tensor(run.vocab.encode(run.vocab.clean(text)))[: run.model.context]
    generator = torch.Generator().manual_seed(seed)
    changed = ids.clone()
    changed[t + 1:] = torch.randint(0, len(run.vocab), (len(ids) - t - 1,), generator=generator)
    a, b = run.model(ids[None])[0], run.model(changed[None])[0]
    diff = (a - b).abs()
    return float(diff[: t + 1].max()), float(diff[t + 1:].max()) if t + 1 < len(ids) else 0.0


@one_thread()
def gradient_norms_by_layer(norm_first, num_layers=16, d_model=64, num_heads=4, d_ff=256,
                            vocab_size=28, batch_size=16, T=32, seed=0):
    """Gradients at initialisation, layer by layer, of a stack of `num_layers`
    `torch.nn.TransformerEncoderLayer`s (pre-norm if norm_first, else post-norm) under a causal
    language-model loss on random tokens: embedding, the stack (plus a final LayerNorm for
    pre-norm, as GPT-2 has), a linear read-out, cross-entropy against random next tokens.

    Returns a dict of NumPy arrays of shape (num_layers,), bottom layer (next to the input) first:
    "grad": the L2 norm of the gradient of all the parameters of each block;
    "stream": the root-mean-square size of the residual stream (the block's input) per feature.
    The same arguments always give the same numbers."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    embed = nn.Embedding(vocab_size, d_model)
    layers = nn.ModuleList(
        nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="gelu",
                                   batch_first=True, norm_first=norm_first)
        for _ in range(num_layers)
    )
    final = nn.LayerNorm(d_model) if norm_first else nn.Identity()
    head = nn.Linear(d_model, vocab_size)
    tokens = torch.randint(0, vocab_size, (batch_size, T + 1), generator=generator)
    blocked = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    x = embed(tokens[:, :-1])
    stream = []
    for layer in layers:
        stream.append(float(x.detach().pow(2).mean().sqrt()))
        x = layer(x, src_mask=blocked)
    loss = F.cross_entropy(head(final(x)).flatten(0, 1), tokens[:, 1:].flatten())
    loss.backward()
    grad = [float(torch.sqrt(sum((p.grad ** 2).sum() for p in layer.parameters()))) for layer in layers]
    return {"grad": np.array(grad), "stream": np.array(stream)}


def top_layer_gradients(depths=(2, 4, 8, 16, 32), seeds=(0, 1, 2), **kwargs):
    """The gradient norm of the top block (next to the output) at initialisation, for stacks of
    each depth, pre-norm and post-norm, over several seeds (see `gradient_norms_by_layer`).

    Returns {"depths": (D,), "pre": (D, S), "post": (D, S)}: Xiong et al. (2020) predict that
    pre-norm's top gradient shrinks as the stack deepens while post-norm's does not."""
    out = {"depths": np.array(depths)}
    for name, norm_first in (("pre", True), ("post", False)):
        out[name] = np.array([[gradient_norms_by_layer(norm_first, num_layers=depth, seed=seed, **kwargs)["grad"][-1]
                               for seed in seeds] for depth in depths])
    return out


def draw_gradient_norms(pre, post, axes=None):
    """Two panels from `gradient_norms_by_layer` of both arrangements: the gradient norm per
    layer, and the size of the residual stream entering each layer."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    layers = np.arange(1, len(pre["grad"]) + 1)
    for result, style, label in ((pre, "o-", "pre-norm: x + f(LN(x))"), (post, "s-", "post-norm: LN(x + f(x))")):
        axes[0].plot(layers, result["grad"], style, label=label)
        axes[1].plot(layers, result["stream"], style, label=label)
    axes[0].set_ylim(bottom=0)
    axes[0].set_title(f"Gradient norm per layer at initialisation ({len(layers)} layers)")
    axes[0].set_xlabel("layer (1 = next to the input)")
    axes[0].set_ylabel("norm of the gradient of its parameters")
    axes[1].set_ylim(bottom=0)
    axes[1].set_title("Size of the residual stream entering each layer")
    axes[1].set_xlabel("layer (1 = next to the input)")
    axes[1].set_ylabel("root-mean-square per feature")
    for ax in axes:
        ax.legend()
    return axes


def draw_masks(masks, titles, axes=None, xlabel="key j", ylabel="query i"):
    """Boolean (T, T) masks side by side: dark = may attend (True), light = blocked (False)."""
    if axes is None:
        _, axes = plt.subplots(1, len(masks), figsize=(3.3 * len(masks), 3.2), layout="constrained")
    axes = np.atleast_1d(axes)
    for ax, mask, title in zip(axes, masks, titles):
        m = np.asarray(mask, dtype=float)
        ax.imshow(m, cmap="Greys", vmin=-0.15, vmax=1.15)
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(j, i, "T" if m[i, j] else "F", ha="center", va="center", fontsize=7,
                        color="white" if m[i, j] else "black")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_xticks(range(m.shape[1]))
        ax.set_yticks(range(m.shape[0]))
    return axes


def draw_next_char(run, probs, top=8, ax=None, title="next character"):
    """The `top` most likely next characters as bars (a space is shown as '␣')."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 2.6), layout="constrained")
    order = np.argsort(-probs)[:top]
    labels = ["␣" if run.vocab.chars[i] == " " else run.vocab.chars[i] for i in order]
    ax.bar(range(len(order)), probs[order], color="tab:blue")
    ax.set_xticks(range(len(order)), labels=labels)
    ax.set_ylim(0, 1)
    ax.set_xlabel("character")
    ax.set_ylabel("probability")
    ax.set_title(title)
    return ax


def draw_losses(losses, held_out=None, ax=None, window=20):
    """The training loss per step (and its running mean), in nats per character."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3), layout="constrained")
    losses = np.asarray(losses)
    ax.plot(losses, color="tab:blue", alpha=0.3, label="loss per step")
    if len(losses) >= window:
        mean = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax.plot(np.arange(window - 1, len(losses)), mean, color="tab:blue", label=f"mean of {window} steps")
    if held_out is not None:
        ax.axhline(held_out, color="tab:orange", linestyle="--", label=f"held-out text: {held_out:.2f}")
    ax.axhline(np.log(28), color="grey", linestyle=":", label="uniform guess: ln 28")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy (nats / char)")
    ax.set_title("Training the character-level model")
    ax.legend()
    return ax
