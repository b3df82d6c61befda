"""Student-safe: a Llama-style character language model for notebook 13 (attention as LLMs run it).

Notebook 08's `CharLM` stacks the block of 2017 (LayerNorm, a ReLU MLP, learned positions, as
many key/value heads as query heads). Today's open models change four parts of it, and this
module puts them together, each one given as a function so that the student's own answers can
be plugged in:

* `rms_norm(x, weight, eps)` in place of LayerNorm (no centring, no bias);
* `swiglu(x, w_gate, w_up, w_down)` in place of the ReLU MLP;
* `attention(q, k, v, causal=True)` with fewer key/value heads than query heads (grouped-query);
* rotary positions (notebook 12) on queries and keys in place of a learned position table.

`choose_llama_parts` checks the student's three functions on small random inputs against
PyTorch's own computations and keeps each one that agrees; PyTorch's stands in for the others,
so the model always trains. `LlamaLM` is the model, `train_llama_lm` trains it with the same loop,
data and settings as notebook 08's `train_char_lm`, and `compare_with_08` trains both on the same
seeds, two at a time.

Nothing here is an exercise's answer in a form its exercise could call: the library stand-ins are
`torch.nn.functional.rms_norm` and `scaled_dot_product_attention` (both off limits in their
exercises) and the block's own MLP written inline with PyTorch's silu.
"""
import dataclasses
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.training import held_out_loss, in_parallel, train_next_char
from course_utils.widgets.long_context import _turn  # notebook 12's rotary embedding (complex form)

__all__ = ["LlamaParts", "choose_llama_parts", "LlamaBlock", "LlamaLM", "train_llama_lm", "compare_with_08",
           "count_parameters"]


# --------------------------------------------------------------------------- PyTorch's stand-ins

def _library_rms_norm(x, weight, eps=1e-6):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _library_attention(q, k, v, causal=True):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)


def _gated_mlp(x, block):
    """The block's MLP written with PyTorch's silu, inline (no function here takes the exercise's
    arguments)."""
    return F.linear(F.silu(F.linear(x, block.w_gate.T)) * F.linear(x, block.w_up.T), block.w_down.T)


# --------------------------------------------------------------------------- which parts to use

@dataclasses.dataclass
class LlamaParts:
    """The three functions the block calls, and whose they are."""

    rms_norm: object = _library_rms_norm
    swiglu: object = None  # None: PyTorch's silu, inline in the block
    attention: object = _library_attention
    yours: tuple = ()
    reasons: dict = dataclasses.field(default_factory=dict)

    @property
    def sentence(self):
        names = {"rms_norm": "rms_norm", "swiglu": "swiglu", "grouped_query_attention": "grouped_query_attention"}
        parts = []
        for name in names:
            if name in self.yours:
                parts.append(f"YOUR {name}")
            else:
                parts.append(f"PyTorch's {name} (yours {self.reasons.get(name, 'is not used')})")
        return "This Llama-style model trains with " + ", ".join(parts[:-1]) + " and " + parts[-1] + "."


def _agrees(fn, cases):
    """None if fn gives library's numbers on every case, else a few words saying why not."""
    try:
        for args, kwargs, want in cases:
            with torch.random.fork_rng(devices=[]):
                got = fn(*args, **kwargs)
            if not isinstance(got, torch.Tensor) or got.shape != want.shape:
                return "does not give the expected shape"
            if not torch.allclose(got.double(), want.double(), atol=1e-5, rtol=1e-4):
                return "does not pass its checks yet"
    except NotImplementedError:
        return "is not written yet"
    except Exception as error:  # any failure of the student's code: PyTorch's stands in
        return f"raises {type(error).__name__}"
    return None


def _cases():
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    def with_expected(library, cases):
        return [(args, kwargs, library(*args, **kwargs)) for args, kwargs in cases]

    x, gate, up, down = r(2, 3, 4), r(4, 6), r(4, 6), r(6, 4)
    return {
        "rms_norm": with_expected(_library_rms_norm, [((r(2, 3, 8) + 0.5, r(8)), {"eps": 1e-6}),
                                                      ((0.2 * r(4, 6), r(6)), {"eps": 0.1})]),
        "swiglu": [((x, gate, up, down), {}, F.linear(F.silu(x @ gate) * (x @ up), down.T))],
        "grouped_query_attention": with_expected(_library_attention, [
            ((r(2, 4, 5, 8), r(2, 2, 5, 8), r(2, 2, 5, 8)), {"causal": True}),
            ((r(1, 2, 3, 4), r(1, 1, 3, 4), r(1, 1, 3, 4)), {"causal": True})]),
    }


def choose_llama_parts(rms_norm=None, swiglu=None, grouped_query_attention=None):
    """Check the student's functions (None: not defined yet) against PyTorch's on small random
    inputs and return the `LlamaParts` to build `LlamaLM` from. Never raises."""
    given = {"rms_norm": rms_norm, "swiglu": swiglu, "grouped_query_attention": grouped_query_attention}
    chosen, yours, reasons = {}, [], {}
    library = {"rms_norm": _library_rms_norm, "swiglu": None, "grouped_query_attention": _library_attention}
    for name, cases in _cases().items():
        fn = given[name]
        reason = "is not defined: run its cell" if fn is None else _agrees(fn, cases)
        if reason is None:
            chosen[name], yours = fn, yours + [name]
        else:
            chosen[name], reasons[name] = library[name], reason
    return LlamaParts(rms_norm=chosen["rms_norm"], swiglu=chosen["swiglu"],
                      attention=chosen["grouped_query_attention"], yours=tuple(yours), reasons=reasons)


# --------------------------------------------------------------------------- the model

def _linear_init(fan_in, *shape):
    """A (fan_in, fan_out) matrix drawn as nn.Linear draws its weights: U(-1/sqrt(fan_in), +)."""
    bound = 1.0 / math.sqrt(fan_in)
    return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


class LlamaBlock(nn.Module):
    """Pre-norm block as in Llama: x + attn(rms_norm(x)), then x + swiglu(rms_norm(x)).

    Attention has `num_heads` query heads and `num_kv_heads` key/value heads of size
    d_model // num_heads, rotary positions on queries and keys, no biases anywhere."""

    def __init__(self, d_model, num_heads, num_kv_heads, d_ff, parts=None):
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads:
            raise ValueError("d_model must be a multiple of num_heads, num_heads of num_kv_heads")
        self.parts = parts if parts is not None else LlamaParts()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.norm1 = nn.Parameter(torch.ones(d_model))
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.norm2 = nn.Parameter(torch.ones(d_model))
        self.w_gate = _linear_init(d_model, d_model, d_ff)
        self.w_up = _linear_init(d_model, d_model, d_ff)
        self.w_down = _linear_init(d_ff, d_ff, d_model)

    def _heads(self, x, n):  # (B, T, n * head_dim) -> (B, n, T, head_dim)
        B, T, _ = x.shape
        return x.reshape(B, T, n, self.head_dim).transpose(1, 2)

    def forward(self, x):
        """Shape of x: (batch_size, T, d_model); position t sees positions 0..t. Returns x's shape."""
        B, T, d_model = x.shape
        h = self.parts.rms_norm(x, self.norm1)
        q = self._heads(self.q_proj(h), self.num_heads)
        k = self._heads(self.k_proj(h), self.num_kv_heads)
        v = self._heads(self.v_proj(h), self.num_kv_heads)
        positions = torch.arange(T)
        q, k = _turn(q, positions), _turn(k, positions)
        out = self.parts.attention(q, k, v, causal=True)  # (B, num_heads, T, head_dim)
        x = x + self.out_proj(out.transpose(1, 2).reshape(B, T, d_model))
        h = self.parts.rms_norm(x, self.norm2)
        if self.parts.swiglu is None:
            return x + _gated_mlp(h, self)
        return x + self.parts.swiglu(h, self.w_gate, self.w_up, self.w_down)


class LlamaLM(nn.Module):
    """Token embeddings (no position table: the blocks rotate queries and keys), a stack of
    `LlamaBlock`s, a final RMSNorm and a linear read-out, one logit per character."""

    def __init__(self, vocab_size, context=32, d_model=32, num_heads=2, num_kv_heads=1, num_layers=2, d_ff=43,
                 parts=None):
        super().__init__()
        self.parts = parts if parts is not None else LlamaParts()
        self.context = context
        self.token = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(LlamaBlock(d_model, num_heads, num_kv_heads, d_ff, self.parts)
                                    for _ in range(num_layers))
        self.norm = nn.Parameter(torch.ones(d_model))
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens):
        """Shape of tokens: (batch_size, T), T <= context. Returns logits (batch_size, T, vocab_size)."""
        if tokens.shape[-1] > self.context:
            raise ValueError(f"at most {self.context} tokens fit in the context, got {tokens.shape[-1]}")
        x = self.token(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.parts.rms_norm(x, self.norm))


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())


def train_llama_lm(steps=200, context=32, batch_size=16, d_model=32, num_heads=2, num_kv_heads=1, num_layers=2,
                   d_ff=43, lr=5e-3, seed=0, text=None, progress=None, parts=None):
    """Train a `LlamaLM` with notebook 08's loop (`course_utils.training.train_next_char`: Adam,
    the course's generated text, the last 10% held out). Returns an LMRun; seeded."""
    return train_next_char(lambda vocab_size: LlamaLM(vocab_size, context, d_model, num_heads, num_kv_heads,
                                                      num_layers, d_ff, parts=parts),
                           steps, context, batch_size, lr, seed=seed, text=text, progress=progress)


def _held_out_of_08(seed, settings):
    from course_utils.widgets.masking_transformer import train_char_lm
    return held_out_loss(train_char_lm(seed=seed, **settings))


def _held_out_of_llama(seed, settings, parts):
    return held_out_loss(train_llama_lm(seed=seed, parts=parts, **settings))


def compare_with_08(seeds, parts=None, steps=200, context=32, batch_size=16, d_model=32, num_heads=2,
                    num_kv_heads=1, num_layers=2, d_ff_08=64, d_ff_llama=43, lr=5e-3, workers=2):
    """Held-out loss (nats per character) of notebook 08's model and of `LlamaLM`, both trained
    with the same loop, data, steps, batch, width, depth and learning rate, on each seed.
    Returns (losses_08, losses_llama), two arrays in the order of `seeds`. The runs go two at a
    time, each on one thread, so each is the number its seed gives alone."""
    common = dict(steps=steps, context=context, batch_size=batch_size, d_model=d_model, num_heads=num_heads,
                  num_layers=num_layers, lr=lr)
    tasks = [lambda seed=seed: _held_out_of_08(seed, dict(common, d_ff=d_ff_08)) for seed in seeds]
    tasks += [lambda seed=seed: _held_out_of_llama(seed, dict(common, d_ff=d_ff_llama, num_kv_heads=num_kv_heads),
                                                   parts) for seed in seeds]
    losses = in_parallel(tasks, workers=workers, models=[None] * len(tasks))
    return np.array(losses[:len(seeds)]), np.array(losses[len(seeds):])
