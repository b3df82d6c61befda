"""Notebook 14's laboratory: a small attention-only transformer, the data that makes it copy in
context, and the training that lets the student watch induction heads form.

Why: an induction head ("after A came B before; now A again, so predict B") is the simplest
circuit a transformer learns that needs two layers working together, one head that marks each
position with the token before it and one that looks for the position whose previous token is
the current one. To *see* it form, the model must be small enough to train on a laptop CPU over
several seeds, keep every head's attention pattern and output in view, and let one head be
switched off. Nothing here is an answer of the notebook's exercises (the scores of a head, the
per-token loss, the ablation); those live in `course_utils.reference.induction_heads`.

* `repeated_tokens`: sequences of random tokens in which one span of random length is repeated
  straight after itself at a random place. The length varies so that no fixed position offset
  finds the copy: only its content does.
* `AttentionOnlyTransformer`: token and learned position embeddings, layers of causal
  multi-head attention added to the residual stream (no MLP, no normalisation), an unembedding.
  `trace` returns every head's attention pattern and its output; `head_mask` (layers, heads) of
  0/1 scales each head's output, which is how a head is ablated. `attend` may be the student's
  own `scaled_dot_product_attention` from notebook 05, once `choose_attention` has checked it.
* `train_seeds`: N seeds trained at once as one stacked model (`course_utils.stacked`), each
  with its own weights and batches, the loss on the first copy and on the repeated copy of a
  fixed held-out batch recorded as it trains, and the attention patterns on one example.
* `phase_change_step`: the first recorded step at which the in-context loss fell below a level.

Shapes: N seeds, B sequences, T positions, V tokens, d = d_model, H heads, d_k = d // H.
"""
import dataclasses
import math
import time

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.stacked import Stack, adam_step, seeded_models
from course_utils.training import in_parallel, one_thread

__all__ = ["Config", "RepeatedTokens", "repeated_tokens", "repeat_of", "AttentionOnlyTransformer",
           "Trace", "check_attention", "choose_attention", "TrainingRun", "train_seeds", "train_depths", "held_out",
           "example_sequence", "phase_change_level", "phase_change_step", "FORBIDDEN"]

# What would answer the notebook's exercises if a student called it: off limits in their hidden tests.
FORBIDDEN = (
    "course_utils.induction:_next_token_losses",
    "course_utils.induction:_copy_losses",
)


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything a run depends on. The defaults are the notebook's configuration, measured in
    bench/topic_induction_heads.py: on ten seeds every two-layer model builds a previous-token
    head in layer 0 and induction heads in layer 1 near step 300, and no one-layer model copies.

    A model can also copy with another circuit: a layer-0 head that finds the *earlier copy of
    the current token* and a layer-1 head that moves one position on from there. Measured here,
    that route wins on some seeds with 64 tokens (2 of 5), with Adam's beta2 = 0.98 (1 of 5) or
    with attention weights initialised at standard deviation 1 / sqrt(d) (2 of 10). A likely
    reason (not measured) why 32 tokens favour the previous-token route: a token then often
    occurs twice in a sequence, which blurs "one position on from the earlier copy" more than
    "the token before was the same"."""
    vocab: int = 32
    seq_len: int = 24
    min_span: int = 8
    max_span: int = 12
    d_model: int = 32
    num_heads: int = 2
    num_layers: int = 2
    steps: int = 500
    batch_size: int = 32
    lr: float = 1e-2
    betas: tuple = (0.9, 0.999)
    eval_every: int = 10
    eval_size: int = 64

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


# --------------------------------------------------------------------------- the data

@dataclasses.dataclass
class RepeatedTokens:
    """A batch of sequences with one repeated span each.

    tokens (B, T) int64; start (B,): where the first copy begins; span (B,): its length. The
    second copy occupies positions start + span ... start + 2 span - 1."""
    tokens: torch.Tensor
    start: torch.Tensor
    span: torch.Tensor

    def first_copy(self):
        """(B, T) boolean: the positions of the first copy."""
        pos = torch.arange(self.tokens.shape[-1])
        return (pos >= self.start[..., None]) & (pos < (self.start + self.span)[..., None])

    def second_copy(self):
        """(B, T) boolean: the positions of the repeated copy."""
        pos = torch.arange(self.tokens.shape[-1])
        begin = (self.start + self.span)[..., None]
        return (pos >= begin) & (pos < begin + self.span[..., None])


def repeated_tokens(batch_size, config=Config(), generator=None):
    """B sequences of `config.seq_len` tokens drawn uniformly from `config.vocab`, in each of which
    a span of random length (min_span to max_span) starting at a random place is followed at once
    by a copy of itself. Everything else is random filler."""
    T = config.seq_len
    if 2 * config.max_span > T:
        raise ValueError(f"two copies of a span of {config.max_span} do not fit in {T} positions")
    tokens = torch.randint(config.vocab, (batch_size, T), generator=generator)
    span = torch.randint(config.min_span, config.max_span + 1, (batch_size,), generator=generator)
    start = (torch.rand(batch_size, generator=generator) * (T - 2 * span + 1)).long()
    batch = RepeatedTokens(tokens, start, span)
    source = torch.where(batch.second_copy(), torch.arange(T) - span[:, None], torch.arange(T))
    batch.tokens = tokens.gather(1, source)
    return batch


def repeat_of(span_tokens):
    """One clean example for pictures and scores: the tokens (B, L) followed by themselves, (B, 2L)."""
    return torch.cat([span_tokens, span_tokens], dim=-1)


# --------------------------------------------------------------------------- the model

def _attend(q, k, v, mask):
    """softmax(q k^T / sqrt(d_k)) v with a boolean mask (True = may attend): (output, weights)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights @ v, weights


def _failure(error):
    """Why calling the student's function failed, in a few words."""
    if isinstance(error, NotImplementedError):
        return "is not written yet"
    text = (str(error).strip().splitlines() or [""])[0]
    text = text if len(text) <= 90 else text[:87] + "..."
    return f"raises {type(error).__name__}" + (f": {text}" if text else "")


def check_attention(attend):
    """None if `attend(q, k, v, mask)` (notebook 05's `scaled_dot_product_attention`) returns
    this module's (output, weights) for a causal mask, on a batch of heads and inside torch.vmap
    (the seeds train as one stacked model), with finite gradients; else a short reason."""
    if attend is None:
        return "has not been run"
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 2, 2, 6, 4, generator=g) for _ in range(3))
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    expected_out, expected_weights = _attend(q, k, v, mask)
    try:
        got = attend(q[0], k[0], v[0], mask)
        if not (isinstance(got, tuple) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got)):
            return "does not return the pair (output, weights)"
        if got[0].shape != expected_out[0].shape or got[1].shape != expected_weights[0].shape:
            return "does not return output (..., T, d_v) and weights (..., T, T) for a batch of heads"
        if not (torch.allclose(got[0], expected_out[0], atol=1e-5)
                and torch.allclose(got[1], expected_weights[0], atol=1e-5)):
            return "computes something else than softmax(q k^T / sqrt(d_k)) v with the causal mask"
        q.requires_grad_(True)
        out, weights = torch.vmap(lambda q1, k1, v1: attend(q1, k1, v1, mask))(q, k, v)
        if not (torch.allclose(out, expected_out, atol=1e-5) and torch.allclose(weights, expected_weights, atol=1e-5)):
            return "computes something else inside torch.vmap"
        (out.sum() + weights.sum()).backward()
        if not torch.isfinite(q.grad).all():
            return "gives gradients that are not finite"
    except Exception as error:  # the student's code: say what happened, never raise
        return _failure(error)
    return None


def choose_attention(attend):
    """(the attention the models will use, one sentence saying which): the student's function
    where it passes `check_attention`, else this module's own (None)."""
    reason = check_attention(attend)
    if reason is None:
        return attend, "The models attend with YOUR scaled_dot_product_attention."
    return None, f"The models attend with the course's own attention (your scaled_dot_product_attention {reason})."


@dataclasses.dataclass
class Trace:
    """What one forward pass saw. logits (B, T, V); patterns: one (B, H, T, T) tensor per layer
    (row t: how query position t spreads its attention over key positions); head_outputs: one
    (B, H, T, d) tensor per layer (what each head adds to the residual stream)."""
    logits: torch.Tensor
    patterns: list
    head_outputs: list


class CausalHeads(nn.Module):
    """One layer of causal multi-head attention whose heads' outputs are kept apart.

    W_Q, W_K, W_V: nn.Linear(d, d, bias=False), head h using columns h d_k ... (h + 1) d_k - 1 of
    their outputs; W_O: nn.Linear(d, d, bias=False), head h writing through its columns
    h d_k ... (h + 1) d_k - 1. The layer's output is the sum of its heads' outputs."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_Q = nn.Linear(d_model, d_model, bias=False)
        self.W_K = nn.Linear(d_model, d_model, bias=False)
        self.W_V = nn.Linear(d_model, d_model, bias=False)
        self.W_O = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, attend=_attend, head_mask=None, per_head=False):
        """Shape of x: (B, T, d); head_mask (optional): (H,), each head's output scaled by its entry.
        Returns (output (B, T, d), patterns (B, H, T, T), head_outputs (B, H, T, d) or None): the
        heads' outputs one by one only if `per_head` (training needs only their sum)."""
        T = x.shape[-2]

        def heads(t):  # (B, T, d) -> (B, H, T, d_k)
            return t.unflatten(-1, (self.num_heads, self.head_dim)).transpose(-3, -2)

        mask = torch.ones(T, T, dtype=torch.bool).tril()
        z, patterns = attend(heads(self.W_Q(x)), heads(self.W_K(x)), heads(self.W_V(x)), mask)
        if head_mask is not None:  # scaling what a head reads out scales what it writes: W_O is linear
            z = z * head_mask[:, None, None].to(z.dtype)
        output = self.W_O(z.transpose(-3, -2).flatten(-2))
        head_outputs = None
        if per_head:  # head h writes z_h W_O[:, h d_k:(h + 1) d_k]^T; the sum over h is `output`
            per_head_W_O = self.W_O.weight.unflatten(-1, (self.num_heads, self.head_dim))  # (d, H, d_k)
            head_outputs = torch.einsum("...htk,dhk->...htd", z, per_head_W_O)
        return output, patterns, head_outputs


class AttentionOnlyTransformer(nn.Module):
    """Embeddings, `num_layers` layers of causal attention on a residual stream, an unembedding.

    `attend`: how each layer turns (q, k, v, mask) into (output, weights); by default this
    module's own softmax attention, or e.g. the student's `scaled_dot_product_attention`."""

    def __init__(self, vocab, max_len, d_model, num_heads, num_layers, attend=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(CausalHeads(d_model, num_heads) for _ in range(num_layers))
        self.unembed = nn.Linear(d_model, vocab, bias=False)
        self.attend = attend

    @classmethod
    def from_config(cls, config, num_layers=None, attend=None):
        return cls(config.vocab, config.seq_len, config.d_model, config.num_heads,
                   config.num_layers if num_layers is None else num_layers, attend)

    def _embed(self, tokens):  # the residual stream before the first layer: token plus position
        return self.embed(tokens) + self.position(torch.arange(tokens.shape[-1]))

    def trace(self, tokens, head_mask=None):
        """Shape of tokens: (B, T) integers; head_mask (optional): (num_layers, H), each head's
        output multiplied by its entry (0 removes the head). Returns a `Trace`."""
        x = self._embed(tokens)
        patterns, head_outputs = [], []
        for i, layer in enumerate(self.layers):
            out, pattern, per_head = layer(x, self.attend or _attend, None if head_mask is None else head_mask[i],
                                           per_head=True)
            x = x + out
            patterns.append(pattern)
            head_outputs.append(per_head)
        return Trace(self.unembed(x), patterns, head_outputs)

    def forward(self, tokens, head_mask=None):
        """Shape of tokens: (B, T). Returns the logits of the next token, (B, T, V)."""
        x = self._embed(tokens)
        for i, layer in enumerate(self.layers):
            x = x + layer(x, self.attend or _attend, None if head_mask is None else head_mask[i])[0]
        return self.unembed(x)


# --------------------------------------------------------------------------- training several seeds

def _next_token_losses(logits, tokens):
    """(..., T - 1): the cross-entropy of the token at t + 1 given the logits at t."""
    return F.cross_entropy(logits[..., :-1, :].flatten(0, -2), tokens[..., 1:].flatten(), reduction="none"
                           ).view(tokens[..., 1:].shape)


def _copy_losses(losses, batch):
    """The mean loss (...,) over the predictable targets of each copy: loss index i predicts the
    token at i + 1, and counts when both i and i + 1 lie in the copy (the first token of a copy
    follows filler or the other copy, so nothing predicts it). `losses`: (..., B, T - 1) from
    `_next_token_losses`. Returns (first copy, repeated copy)."""
    def mean(copy):
        where = (copy[..., 1:] & copy[..., :-1]).to(losses.dtype)
        return (losses * where).sum((-1, -2)) / where.sum((-1, -2))
    return mean(batch.first_copy()), mean(batch.second_copy())


@dataclasses.dataclass
class TrainingRun:
    """N seeds of one configuration, trained together.

    models: the N trained models; steps (E,): the steps at which losses were recorded;
    first_loss, repeated_loss (N, E): mean loss on the first and on the repeated copy of a fixed
    held-out batch; example (1, 2L): one repeated sequence; patterns (N, E, layers, H, 2L, 2L):
    the attention on it at each recorded step; cpu_seconds, wall_seconds: the training's cost."""
    config: Config
    seeds: tuple
    models: list
    steps: torch.Tensor
    first_loss: torch.Tensor
    repeated_loss: torch.Tensor
    example: torch.Tensor
    patterns: torch.Tensor
    cpu_seconds: float
    wall_seconds: float


def held_out(config, size=None, seed=10_000):
    """The held-out batch every seed is measured on (the same for all)."""
    return repeated_tokens(size or config.eval_size, config, torch.Generator().manual_seed(seed))


def example_sequence(config, seed=10_001):
    """One clean repeated sequence [span, span] of max_span random tokens, shape (1, 2 max_span)."""
    g = torch.Generator().manual_seed(seed)
    return repeat_of(torch.randint(config.vocab, (1, config.max_span), generator=g))


@one_thread()  # tensors this small gain nothing from a second thread; on a busy machine it costs 10x
def train_seeds(config=Config(), seeds=(0, 1, 2), num_layers=None, attend=None):
    """Train one model per seed (initial weights and batches from that seed), all at once as a
    stacked model, with Adam at `config.lr`, on one CPU thread. Returns a `TrainingRun`."""
    models = seeded_models(seeds, lambda: AttentionOnlyTransformer.from_config(config, num_layers, attend))
    stack = Stack(models)
    generators = [torch.Generator().manual_seed(1000 + seed) for seed in seeds]
    test, example = held_out(config), example_sequence(config)
    test_tokens = test.tokens.expand(len(seeds), -1, -1)
    lr = torch.full((len(seeds),), config.lr)
    state, steps, first, repeated, patterns = {}, [], [], [], []

    cpu, wall = time.process_time(), time.perf_counter()
    for step in range(config.steps + 1):
        if step % config.eval_every == 0 or step == config.steps:
            with torch.no_grad():
                f, r = _copy_losses(_next_token_losses(stack(test_tokens), test_tokens), test)
                stack.unstack(models)
                patterns.append(torch.stack([torch.stack(m.trace(example).patterns)[:, 0] for m in models]))
            steps.append(step)
            first.append(f)
            repeated.append(r)
        if step == config.steps:
            break
        tokens = torch.stack([repeated_tokens(config.batch_size, config, g).tokens for g in generators])
        losses = _next_token_losses(stack(tokens), tokens)  # (N, B, T - 1)
        losses.mean(dim=(-1, -2)).sum().backward()  # summed over seeds: each its own gradient
        adam_step(stack.params, state, lr, betas=config.betas)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return TrainingRun(config, tuple(seeds), models, torch.tensor(steps), torch.stack(first, 1),
                       torch.stack(repeated, 1), example, torch.stack(patterns, 1), cpu, wall)


def train_depths(config=Config(), seeds=(0, 1, 2), depths=(2, 1), attend=None):
    """`train_seeds` once per number of layers in `depths`, the depths side by side on two cores
    (`course_utils.training.in_parallel`: each on one thread in a forked copy of the process, so
    each run is exactly what `train_seeds` gives alone; one after the other while grading).
    Returns the TrainingRuns in the order of `depths`."""
    return in_parallel([lambda n=n: train_seeds(config, seeds, num_layers=n, attend=attend) for n in depths],
                       models=[None] * len(depths))


def phase_change_level(config):
    """Halfway from guessing (ln V, a uniform guess over the vocabulary) to knowing (0): the
    in-context loss below which a model is said to copy."""
    return math.log(config.vocab) / 2


def phase_change_step(steps, losses, level):
    """The first of `steps` at which `losses` (one per step) is below `level`; None if never."""
    below = torch.as_tensor(losses) < level
    if not below.any():
        return None
    return int(torch.as_tensor(steps)[below.nonzero()[0, 0]])
