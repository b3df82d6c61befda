"""Notebook 08 (masking and the transformer block): the computations behind its demos and
widget, and the figures that draw them.

Everything here uses PyTorch's own layers (`torch.nn.TransformerEncoderLayer`) and
`course_utils.models.tiny_lm.CharLM`, never the course's reference. The language model is built
from the student's block, mask and softmax only when `tiny_lm.choose_parts` found that they pass
their checks (PyTorch's otherwise), and the functions that read it (samples, attention maps, head
roles) work on either. Everything is seeded: the same arguments give the same numbers.
Training and sampling run on one CPU thread (restored afterwards), which for models this small
is the fastest and makes the numbers the same however many cores there are.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.models.tiny_lm import CharLM, LMParts
from course_utils.training import LMRun, held_out_loss, in_parallel, one_thread, text_batch, train_next_char

__all__ = [
    "LMRun", "train_char_lm", "train_many", "train_pairs", "held_out_loss", "next_char_probabilities", "generate", "future_leak",
    "next_char_entropy", "attention_maps", "head_roles", "draw_head_offsets", "draw_attention",
    "gradient_norms_by_layer", "top_layer_gradients", "draw_gradient_norms", "draw_masks", "draw_next_char",
    "draw_losses",
]


def train_char_lm(steps=300, context=32, batch_size=32, d_model=64, num_heads=4, num_layers=2,
                  d_ff=128, lr=3e-3, seed=0, text=None, progress=None, parts=None):
    """Train a `CharLM` with Adam to predict the next character of the course's text (the last
    10% held out). `parts` (from `course_utils.models.tiny_lm.choose_parts`; default PyTorch's
    only) says whose blocks, softmax and mask it is built from. `progress`, if given, wraps the
    range of steps (e.g. a tqdm bar).

    Returns an `LMRun` whose `parts` are the parts it was trained with. If the student's parts
    raise or make the loss nan while training, the model is trained again from PyTorch's parts,
    and `parts.reasons` says why. The same arguments always give the same model and losses."""
    parts = parts if parts is not None else LMParts()

    def train_with(parts):
        run = train_next_char(lambda vocab_size: CharLM(vocab_size, context, d_model, num_heads, num_layers,
                                                        d_ff, parts=parts),
                              steps, context, batch_size, lr, seed=seed, text=text, progress=progress)
        if not np.isfinite(run.losses).all():
            raise FloatingPointError("the training loss became nan")
        run.parts = parts
        return run

    if not parts.yours:
        return train_with(parts)
    try:
        return train_with(parts)
    except Exception as error:  # the student's code failed in training: say so, train PyTorch's instead
        return train_with(parts.without_student_code(f"failed in training ({type(error).__name__}: "
                                                     f"{str(error)[:80]})"))


def train_many(seeds, parts=None, workers=2, **settings):
    """`train_char_lm(seed=seed, parts=parts, **settings)` for each seed, `workers` at a time, each
    on one thread (`in_parallel`): the list of LMRuns, each the run that seed gives alone."""
    return in_parallel([lambda seed=seed: train_char_lm(seed=seed, parts=parts, **settings) for seed in seeds],
                       workers=workers, models=[None] * len(seeds),  # the runs come back whole
                       description="language models")


def train_pairs(seeds, parts, yours=None, library=None, workers=2, **settings):
    """For each seed, the model built from `parts` (the student's) and the one built from PyTorch's
    parts only, each `train_char_lm(seed=seed, ..., **settings)`: every run not given already in
    `yours` or `library` (dicts seed -> LMRun), all at once, `workers` at a time, each on one thread
    (`in_parallel`), so each is the run its seed gives alone. Returns (yours, library): two dicts
    seed -> LMRun, with the runs given and the runs trained, in the order of `seeds`.

    A run trained here comes back from a worker process as a copy: its `parts` say what it was
    trained with (the student's, or PyTorch's after the student's code failed), but are not the
    `parts` object passed in."""
    yours, library = dict(yours or {}), dict(library or {})
    jobs = [(seed, parts) for seed in seeds if seed not in yours] + [(seed, None) for seed in seeds if seed not in library]
    runs = in_parallel([lambda seed=seed, chosen=chosen: train_char_lm(seed=seed, parts=chosen, **settings)
                        for seed, chosen in jobs],  # the student's first: they take a little longer
                       workers=workers, models=[None] * len(jobs), description="language models")
    for (seed, chosen), run in zip(jobs, runs):
        (library if chosen is None else yours)[seed] = run
    return {seed: yours[seed] for seed in seeds}, {seed: library[seed] for seed in seeds}


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
def next_char_entropy(run, temperatures, n_windows=32, seed=0):
    """The mean entropy, in bits, of the next-character distribution softmax(logits / temperature)
    over every position of `n_windows` held-out windows, one number per temperature (0 for
    temperature 0, which always takes the most likely character). A uniform guess over the
    vocabulary has log2(len(vocab)) bits. Returns a 1-D NumPy array."""
    generator = torch.Generator().manual_seed(seed)
    x, _ = text_batch(run.held_out_ids, n_windows, run.model.context, generator)
    logits = run.model(x).double()
    out = []
    for temperature in temperatures:
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if temperature == 0:
            out.append(0.0)
            continue
        log_p = torch.log_softmax(logits / temperature, dim=-1)
        out.append(float(-(log_p.exp() * log_p).sum(-1).mean() / np.log(2)))
    return np.array(out)


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


# --------------------------------------------------------------------------- attention maps

def _attention_weights(model, ids):
    """The attention weights of every head of every block of a `CharLM` on token ids (B, T),
    read while the model runs: a hook catches what each block hands its attention (the normalised
    stream and the mask), and the weights are recomputed from it with the attention's own W_Q
    and W_K. Returns a tensor (num_layers, B, num_heads, T, T), rows = queries."""
    caught = []

    def catch(module, args, kwargs):
        if isinstance(module, nn.MultiheadAttention):  # PyTorch's layer: mask True/-inf = blocked
            blocked = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
            allowed = None if blocked is None else (~blocked if blocked.dtype == torch.bool else blocked == 0)
        else:  # the course's MaskedSelfAttention, called as attn(h, mask): True = may attend
            allowed = kwargs.get("mask", args[1] if len(args) > 1 else None)
        caught.append((module, args[0], allowed))

    attentions = [block.self_attn if isinstance(block, nn.TransformerEncoderLayer) else block.attn
                  for block in model.blocks]
    hooks = [attention.register_forward_pre_hook(catch, with_kwargs=True) for attention in attentions]
    was_training = model.training
    model.train()  # PyTorch's layer skips its attention module on its fused inference path
    try:
        model(ids)
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    if [module for module, _, _ in caught] != attentions:
        raise ValueError("could not read the attention of every block: does each block call its attention once?")
    maps = []
    for module, h, allowed in caught:
        if isinstance(module, nn.MultiheadAttention):
            num_heads, d_model = module.num_heads, module.embed_dim
            q, k, _ = F.linear(h, module.in_proj_weight, module.in_proj_bias).chunk(3, dim=-1)
        else:
            num_heads, d_model = module.num_heads, h.shape[-1]
            q, k = module.q_proj(h), module.k_proj(h)
        B, T, _ = h.shape
        q = q.reshape(B, T, num_heads, -1).transpose(1, 2)
        k = k.reshape(B, T, num_heads, -1).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / np.sqrt(d_model // num_heads)
        if allowed is not None:
            scores = scores.masked_fill(~(allowed.unsqueeze(1) if allowed.dim() == 3 else allowed), float("-inf"))
        maps.append(torch.softmax(scores, dim=-1))
    return torch.stack(maps)


@one_thread()
@torch.no_grad()
def attention_maps(run, text):
    """What every head of the trained model attends to on `text` (lower-cased, unknown characters
    dropped, the last `context` characters kept).

    Returns {"chars": the characters (list of str), "weights": NumPy array (num_layers,
    num_heads, T, T)}: weights[l, h, i, j] is how much head h of block l (0 = next to the input),
    at character i, attends to character j; each row sums to 1, and is 0 right of the diagonal."""
    ids = _prompt_ids(run, text)[-run.model.context:]
    return {"chars": list(run.vocab.decode(ids.tolist())),
            "weights": _attention_weights(run.model, ids[None])[:, 0].numpy()}


def _roles(w, max_offset):
    """Measures of attention weights w (..., T, T), averaged over the queries: the weight on the
    query's own character, on the one before it, the mean distance back, and the weight at each
    distance back 0..max_offset (each averaged over the queries that have a key that far back)."""
    T = w.shape[-1]
    back = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).clamp(min=0).to(w.dtype)
    by_offset = torch.stack([w.diagonal(offset=-k, dim1=-2, dim2=-1).mean(-1) for k in range(max_offset + 1)], -1)
    return {"itself": by_offset[..., 0], "previous": by_offset[..., 1],
            "distance": (w * back).sum(-1).mean(-1), "by_offset": by_offset}


@one_thread()
@torch.no_grad()
def head_roles(run, n_windows=64, seed=0, max_offset=12):
    """Measured, on `n_windows` windows of the held-out text, what each head does: the mean over
    the queries of the weight it gives to the character itself ("itself"), to the character just
    before it ("previous"), how far back its weight lies on average ("distance": sum_j w_ij (i - j),
    in characters), and its weight at each distance back 0..max_offset ("by_offset").

    Returns a dict of NumPy arrays of shape (num_layers, num_heads) ("by_offset": (num_layers,
    num_heads, max_offset + 1)), and under "uniform" the same measures for a head that spreads its
    weight evenly over every character it may see, the baseline to read them against (floats, and
    an array for "by_offset"). The same arguments give the same numbers."""
    generator = torch.Generator().manual_seed(seed)
    x, _ = text_batch(run.held_out_ids, n_windows, run.model.context, generator)
    measured = {name: value.mean(1).numpy()
                for name, value in _roles(_attention_weights(run.model, x), max_offset).items()}
    T = x.shape[1]
    even = torch.ones(T, T).tril()
    uniform = _roles(even / even.sum(-1, keepdim=True), max_offset)
    measured["uniform"] = {name: value.numpy() if name == "by_offset" else float(value)
                           for name, value in uniform.items()}
    return measured


def draw_head_offsets(roles, axes=None):
    """One panel per block: each head's mean attention weight against how far back the key is
    (0 = the query's own character), from `head_roles`, with the even spread for reference."""
    by_offset = roles["by_offset"]
    num_layers, num_heads, n = by_offset.shape
    if axes is None:
        _, axes = plt.subplots(1, num_layers, figsize=(4.5 * num_layers, 3.2), layout="constrained", sharey=True)
    axes = np.atleast_1d(axes)
    offsets = np.arange(n)
    for block, ax in enumerate(axes):
        for head in range(num_heads):
            ax.plot(offsets, by_offset[block, head], "o-", label=f"head {head + 1}")
        ax.plot(offsets, roles["uniform"]["by_offset"], ":", color="grey", label="even spread")
        ax.set_title(f"block {block + 1}")
        ax.set_xlabel("how far back the key is (characters)")
        ax.set_xticks(offsets)
        ax.set_ylim(0, 1)
        ax.legend()
    axes[0].set_ylabel("mean attention weight")
    return axes


def draw_attention(maps, layer, head, ax=None):
    """One head's attention over the characters (from `attention_maps`): rows are the characters
    that look (queries), columns the characters they look at (keys); a space is shown as '␣'."""
    weights = maps["weights"][layer, head]
    labels = ["␣" if c == " " else c for c in maps["chars"]]
    if ax is None:
        size = 2.0 + 0.22 * len(labels)
        _, ax = plt.subplots(figsize=(size + 1.0, size), layout="constrained")
    image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(labels)), labels=labels, fontsize=8)
    ax.set_yticks(range(len(labels)), labels=labels, fontsize=8)
    ax.set_xlabel("key: the character attended to")
    ax.set_ylabel("query: the character looking")
    ax.set_title(f"block {layer + 1}, head {head + 1}")
    ax.figure.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
    return ax


def _stack(norm_first, depths, d_model, num_heads, d_ff, vocab_size, seed):
    """The embedding, the `max(depths)` layers and, for each depth in `depths`, the read-out of
    a stack that deep, each made exactly as a stack of that depth alone would make it after
    torch.manual_seed(seed): embedding, layers, final LayerNorm, read-out, in that order. The first
    d layers of a deeper stack are the layers of a d-deep one (the same random numbers, drawn in
    the same order); only the read-out, drawn after the layers, differs, so the random-number
    state after layer d is kept to draw d's read-out from."""
    torch.manual_seed(seed)
    embed = nn.Embedding(vocab_size, d_model)
    layers, heads = nn.ModuleList(), {}
    after = {}
    for depth in range(1, max(depths) + 1):
        layers.append(nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=norm_first))
        if depth in depths:
            after[depth] = torch.get_rng_state()
    final = nn.LayerNorm(d_model) if norm_first else nn.Identity()  # draws no random numbers
    for depth in depths:
        torch.set_rng_state(after[depth])
        heads[depth] = nn.Linear(d_model, vocab_size)
    return embed, layers, final, heads


def _lm_loss(head, final, x, tokens):
    return F.cross_entropy(head(final(x)).flatten(0, 1), tokens[:, 1:].flatten())


def _norm(grads):
    return float(torch.sqrt(sum((g ** 2).sum() for g in grads)))


def _random_tokens(vocab_size, batch_size, T, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (batch_size, T + 1), generator=generator)


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
    embed, layers, final, heads = _stack(norm_first, (num_layers,), d_model, num_heads, d_ff, vocab_size, seed)
    tokens = _random_tokens(vocab_size, batch_size, T, seed)
    blocked = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    x = embed(tokens[:, :-1])
    stream = []
    for layer in layers:
        stream.append(float(x.detach().pow(2).mean().sqrt()))
        x = layer(x, src_mask=blocked)
    _lm_loss(heads[num_layers], final, x, tokens).backward()
    grad = [_norm(p.grad for p in layer.parameters()) for layer in layers]
    return {"grad": np.array(grad), "stream": np.array(stream)}


@one_thread()
def _top_gradients(norm_first, depths, seed, d_model=64, num_heads=4, d_ff=256, vocab_size=28, batch_size=16, T=32):
    """For each depth in `depths`, the gradient norm of the top block of a stack that deep:
    `gradient_norms_by_layer(norm_first, num_layers=depth, seed=seed)["grad"][-1]`, the same
    numbers, computed with one pass through the deepest stack. A d-deep stack is the first d
    layers of the deepest one (`_stack`), so its residual stream is the deepest stack's after d
    layers: one forward pass serves every depth, and each depth's loss is differentiated with
    respect to its top block only (what the lower blocks' gradients would be is not asked)."""
    embed, layers, final, heads = _stack(norm_first, depths, d_model, num_heads, d_ff, vocab_size, seed)
    tokens = _random_tokens(vocab_size, batch_size, T, seed)
    blocked = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    x, out = embed(tokens[:, :-1]), []
    for depth, layer in enumerate(layers, start=1):
        x = layer(x, src_mask=blocked)
        if depth in depths:
            loss = _lm_loss(heads[depth], final, x, tokens)
            out.append(_norm(torch.autograd.grad(loss, list(layer.parameters()), retain_graph=depth < len(layers))))
    return [out[sorted(depths).index(depth)] for depth in depths]


def top_layer_gradients(depths=(2, 4, 8, 16, 32), seeds=(0, 1, 2), workers=2, **kwargs):
    """The gradient norm of the top block (next to the output) at initialisation, for stacks of
    each depth, pre-norm and post-norm, over several seeds: `gradient_norms_by_layer(norm_first,
    num_layers=depth, seed=seed)["grad"][-1]`, the same numbers, with one forward pass per seed
    and arrangement serving every depth; the arrangements and seeds run `workers` at a time
    (`course_utils.training.in_parallel`, one thread each).

    Returns {"depths": (D,), "pre": (D, S), "post": (D, S)}: Xiong et al. (2020) predict that
    pre-norm's top gradient shrinks as the stack deepens while post-norm's does not."""
    depths, seeds = tuple(depths), tuple(seeds)
    jobs = [(norm_first, seed) for norm_first in (True, False) for seed in seeds]
    results = in_parallel([lambda job=job: _top_gradients(job[0], depths, job[1], **kwargs) for job in jobs],
                          workers=workers, models=[None] * len(jobs))
    columns = dict(zip(jobs, results))
    return {"depths": np.array(depths),
            **{name: np.array([columns[(norm_first, seed)] for seed in seeds]).T
               for name, norm_first in (("pre", True), ("post", False))}}


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
