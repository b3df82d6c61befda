"""Pure compute functions behind the demos of notebook 12 (long contexts).

Nothing here uses the course's reference or the student's answers. The models of the
extrapolation experiment need a rotary embedding of their own: it is written here in the
complex-number form (each column pair is one complex number, multiplied by e^{i pos theta}),
a different route from the real 2 x 2 rotation the exercise asks for. Training runs on one CPU
thread and is seeded: the same arguments give the same numbers.
"""
import functools
import math
import weakref

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from course_utils.training import one_thread

__all__ = [
    "POSITION_KINDS", "offset_recall_batch", "PositionModel", "train_position_model",
    "recall_accuracy", "extrapolation_experiment", "score_profile", "PeakTensorMemory",
    "peak_tensor_bytes",
]

POSITION_KINDS = ("learned", "sinusoidal", "rotary")


# --------------------------------------------------------------------------- positions

def _frequencies(d, base=10000.0):
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


@functools.lru_cache(maxsize=16)
def _sinusoidal_table(T, d):
    """(T, d) float32: sin in even columns, cos in odd ones (notebook 03). Cached: never
    modify the result in place."""
    angles = torch.arange(T, dtype=torch.float64)[:, None] * _frequencies(d)[None, :]
    table = torch.zeros(T, d, dtype=torch.float64)
    table[:, 0::2], table[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return table.float()


@functools.lru_cache(maxsize=16)
def _turns(T, d):
    """e^{i pos theta_i} for pos = 0..T-1, complex64 (T, d/2). Cached: never modify in place."""
    angles = torch.arange(T, dtype=torch.float64)[:, None] * _frequencies(d)[None, :]
    return torch.polar(torch.ones_like(angles), angles).to(torch.complex64)


def _turn(x, positions):
    """Each column pair of x (..., T, d) as a complex number, times e^{i pos theta}."""
    d = x.shape[-1]
    positions = torch.as_tensor(positions)
    if len(positions) and positions.min() >= 0:
        turn = _turns(int(positions.max()) + 1, d)[positions]
    else:  # negative positions: no table to look them up in
        angles = positions.to(torch.float64)[:, None] * _frequencies(d)[None, :]
        turn = torch.polar(torch.ones_like(angles), angles).to(torch.complex64)
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).reshape(x.shape).to(x.dtype)


def score_profile(offset, shifts, d=16, seed=0):
    """Scores q . k of one random query and key placed `offset` positions apart, as the pair
    slides along the sequence (the key at position s, the query at s + offset, for s in shifts).

    Returns a dict of float64 NumPy arrays of len(shifts):
    "rotary": q and k rotated by their positions (constant: only the offset matters);
    "sinusoidal (added)": the sinusoidal encoding added to q and k before the dot product
    (moves with the absolute positions)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(d, generator=g, dtype=torch.float64)
    k = torch.randn(d, generator=g, dtype=torch.float64)
    shifts = np.asarray(shifts, dtype=np.int64)
    key_pos = torch.as_tensor(shifts)
    query_pos = key_pos + int(offset)
    rotary = (_turn(q.expand(len(shifts), d), query_pos) * _turn(k.expand(len(shifts), d), key_pos)).sum(-1)
    top = int(max(query_pos.max().item(), key_pos.max().item())) + 1
    table = _sinusoidal_table(top, d).double()
    added = ((q + table[query_pos]) * (k + table[key_pos])).sum(-1)
    return {"rotary": rotary.numpy(), "sinusoidal (added)": added.numpy()}


# --------------------------------------------------------------------------- the task

def offset_recall_batch(batch_size, length, vocab_size, offset, generator):
    """Random tokens x (batch_size, length); the target at position t is the token `offset`
    positions earlier, x[t - offset] (-100, ignored by the loss, for t < offset)."""
    x = torch.randint(0, vocab_size, (batch_size, length), generator=generator)
    y = torch.full_like(x, -100)
    y[:, offset:] = x[:, :-offset]
    return x, y


class PositionModel(nn.Module):
    """One causal self-attention layer (one head) and a read-out, with one of three kinds of
    position information: "learned" (a table of max_len position vectors added to the tokens),
    "sinusoidal" (the fixed encoding added) or "rotary" (queries and keys rotated)."""

    def __init__(self, kind, vocab_size=16, d_model=32, max_len=128):
        super().__init__()
        if kind not in POSITION_KINDS:
            raise ValueError(f"kind must be one of {POSITION_KINDS}, got {kind!r}")
        self.kind, self.d_model, self.max_len = kind, d_model, max_len
        self.token = nn.Embedding(vocab_size, d_model)
        if kind == "learned":
            self.position = nn.Embedding(max_len, d_model)
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d_model, d_model) for _ in range(3))
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens):
        """Shape of tokens: (batch_size, T), T <= max_len. Returns logits (batch_size, T, vocab)."""
        T = tokens.shape[-1]
        if T > self.max_len:
            raise ValueError(f"at most {self.max_len} positions, got {T}")
        positions = torch.arange(T)
        h = self.token(tokens)
        if self.kind == "learned":
            h = h + self.position(positions)
        elif self.kind == "sinusoidal":
            h = h + _sinusoidal_table(T, self.d_model)
        q, k, v = self.q_proj(h), self.k_proj(h), self.v_proj(h)
        if self.kind == "rotary":
            q, k = _turn(q, positions), _turn(k, positions)
        return self.head(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class _Adam:
    """Adam (Kingma and Ba), written out: `torch.optim` imports TorchDynamo on first use, which
    costs seconds, more than all of this notebook's training. Same update as torch.optim.Adam
    with its defaults (no weight decay)."""

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.t = lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self):
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            denominator = (v / (1 - b2 ** self.t)).sqrt_().add_(self.eps)
            p.addcdiv_(m, denominator, value=-self.lr / (1 - b1 ** self.t))

    def zero_grad(self):
        for p in self.params:
            p.grad = None


@one_thread()
def train_position_model(kind, seed=0, steps=100, train_length=16, vocab_size=16, offset=4,
                         batch_size=32, lr=1e-2, d_model=32, max_len=128):
    """Train a PositionModel with Adam on offset recall at one length. Returns (model, losses)."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = PositionModel(kind, vocab_size, d_model, max_len)
    optimizer = _Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        x, y = offset_recall_batch(batch_size, train_length, vocab_size, offset, generator)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return model, losses


@one_thread()
@torch.no_grad()
def recall_accuracy(model, length, vocab_size=16, offset=4, n=128, seed=1234):
    """Share of the targets predicted right on n fresh sequences of `length` tokens (fixed seed)."""
    x, y = offset_recall_batch(n, length, vocab_size, offset, torch.Generator().manual_seed(seed))
    predicted = model(x).argmax(dim=-1)
    scored = y != -100
    return ((predicted == y) & scored).sum().item() / scored.sum().item()


def extrapolation_experiment(kinds=POSITION_KINDS, seeds=(0, 1, 2), test_lengths=(16, 32, 64, 128),
                             steps=100, train_length=16, progress=None):
    """Accuracy of every kind and seed at every test length: float64 array (kinds, seeds, lengths).
    `progress`, if given, wraps the list of runs (e.g. a tqdm bar)."""
    runs = [(i, j, kind, seed) for i, kind in enumerate(kinds) for j, seed in enumerate(seeds)]
    result = np.zeros((len(kinds), len(seeds), len(test_lengths)))
    for i, j, kind, seed in (progress or (lambda r: r))(runs):
        model, _ = train_position_model(kind, seed=seed, steps=steps, train_length=train_length,
                                        max_len=max(test_lengths))
        result[i, j] = [recall_accuracy(model, T) for T in test_lengths]
    return result


# --------------------------------------------------------------------------- memory

class PeakTensorMemory(TorchFunctionMode):
    """Count the bytes of the tensors PyTorch calls return while the mode is active.

    Every PyTorch function or tensor method called from Python passes through
    `__torch_function__` (a `torch.overrides.TorchFunctionMode`); a storage not seen before in
    its outputs is a new allocation (its `nbytes`), released when the last tensor using it is
    garbage collected (a weakref finalizer). `peak` is the largest total alive at any moment.
    Storages of tensors listed in `ignore` (the inputs) are not counted. What the count cannot
    see: temporaries created and freed *inside* one PyTorch call (e.g. inside
    F.scaled_dot_product_attention), and the allocator's own overhead. (A TorchDispatchMode
    would see one level deeper, but its first use imports TorchDynamo, seconds of start-up.)"""

    def __init__(self, ignore=()):
        super().__init__()
        self._ignored = {t.untyped_storage().data_ptr() for t in ignore if isinstance(t, torch.Tensor)}
        self._users, self._sizes = {}, {}
        self.current = 0
        self.peak = 0

    def _release(self, key):
        self._users[key] -= 1
        if self._users[key] == 0:
            self.current -= self._sizes.pop(key)
            del self._users[key]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key = storage.data_ptr()
            if key == 0 or key in self._ignored:
                continue
            if key not in self._users:
                self._users[key] = 0
                self._sizes[key] = storage.nbytes()
                self.current += storage.nbytes()
                self.peak = max(self.peak, self.current)
            self._users[key] += 1
            weakref.finalize(t, self._release, key)
        return out


@torch.no_grad()
def peak_tensor_bytes(fn, *args, **kwargs):
    """(fn(*args, **kwargs), the peak bytes of the tensors it allocated while it ran)."""
    inputs = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
    counter = PeakTensorMemory(ignore=inputs)
    with counter:
        result = fn(*args, **kwargs)
    return result, counter.peak
