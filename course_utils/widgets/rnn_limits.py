"""Pure compute and drawing behind the demos of notebook 01 (the limits of RNNs).

Nothing here knows an exercise's answer. The recurrent matrices of the gradient demo are a
random orthogonal matrix times a radius: every eigenvalue of such a matrix has modulus exactly
`radius` (so its spectral radius is `radius` by construction, no eigenvalue solver needed),
and multiplying a vector by it scales the vector's length by exactly `radius`. The RNNs here
are written with `torch.nn.RNNCell`, the sequence-to-sequence model with `torch.nn.GRU`.

Conventions: batch first, `(B, T, d)`; time step 0 is the oldest input; "the last output" is
a fixed linear read-out of the hidden state after the final step.
"""
import contextlib
import copy
import time

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator
import numpy as np
import torch
from torch import nn

from course_utils import optim
from course_utils.data import sequences
from course_utils.models.seq2seq import bidirectional_gru
from course_utils.training import in_parallel

__all__ = [
    "ACTIVATIONS", "orthogonal_recurrence", "gradient_norms", "decay_rate", "draw_gradient_norms",
    "multiply_adds", "time_sequential_vs_parallel", "loglog_slope", "Seq2Seq", "train_seq2seq", "accuracy_by_length",
    "accuracy_by_position", "draw_accuracy_by_length", "MODELS", "bottleneck_experiment", "spread",
    "draw_bottleneck",
]

ACTIVATIONS = {"tanh": torch.tanh, "linear (none)": lambda z: z}


def orthogonal_recurrence(hidden, radius, seed=0):
    """radius * Q for a random orthogonal Q of shape (hidden, hidden): spectral radius `radius`."""
    generator = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(hidden, hidden, generator=generator, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r))  # a uniformly random orthogonal matrix
    return radius * q


def gradient_norms(radius, length, activation="tanh", hidden=32, d_in=8, input_scale=1.0, seed=0):
    """How strongly the last output depends on each input: ||d y / d x_t|| for t = 0 .. length-1.

    A vanilla RNN h_t = f(x_t W_xh + h_{t-1} W_hh) with W_hh = radius * (random orthogonal),
    W_xh with entries N(0, 1/d_in), h_0 = 0, inputs N(0, input_scale^2), and a scalar output
    y = u . h_T with a fixed random unit vector u. Returns a float64 NumPy array of `length`
    gradient norms (entry t is the gradient with respect to input step t).
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; choose one of {list(ACTIVATIONS)}")
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    f = ACTIVATIONS[activation]
    generator = torch.Generator().manual_seed(seed + 1)
    W_hh = orthogonal_recurrence(hidden, radius, seed)
    W_xh = torch.randn(d_in, hidden, generator=generator, dtype=torch.float64) / d_in ** 0.5
    u = torch.randn(hidden, generator=generator, dtype=torch.float64)
    u = u / u.norm()
    x = input_scale * torch.randn(length, d_in, generator=generator, dtype=torch.float64)
    x.requires_grad_(True)
    h = torch.zeros(hidden, dtype=torch.float64)
    for t in range(length):
        h = f(x[t] @ W_xh + h @ W_hh)
    (u @ h).backward()
    return x.grad.norm(dim=-1).numpy()


def decay_rate(norms, last=None):
    """The factor by which the gradient norm shrinks per step back in time (a geometric fit).

    Fits log ||g_t|| = a + (T - 1 - t) log(rate) by least squares over the `last` steps nearest
    the output (all steps when None) and returns `rate`: below 1 the gradient vanishes, above 1
    it explodes. Steps with a zero gradient are ignored.
    """
    norms = np.asarray(norms, dtype=float)
    back = np.arange(len(norms))[::-1]  # steps between input t and the output
    keep = norms > 0
    if last is not None:
        keep &= back < last
    if keep.sum() < 2:
        return float("nan")
    slope = np.polyfit(back[keep], np.log(norms[keep]), 1)[0]
    return float(np.exp(slope))


def draw_gradient_norms(norms_by_label, radius=None, ax=None, title=None):
    """Gradient norm per input step on a log scale, one line per entry of {label: norms}.

    With `radius`, a dashed guide radius^(T-1-t) through the last point: the geometric law a
    linear RNN with an orthogonal-times-radius matrix follows.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.6), layout="constrained")
    length = None
    for label, norms in norms_by_label.items():
        norms = np.asarray(norms, dtype=float)
        length = len(norms)
        ax.semilogy(np.arange(length), np.where(norms > 0, norms, np.nan), label=label)
    if radius is not None and length:
        last = np.asarray(list(norms_by_label.values())[0], dtype=float)[-1]
        steps_back = np.arange(length)[::-1]
        with np.errstate(over="ignore", under="ignore"):
            ax.semilogy(np.arange(length), last * float(radius) ** steps_back, "k--", lw=1,
                        label=f"{radius:g}^(T-1-t)")
    ax.set_xlabel("input time step t (the output reads the state after the last step)")
    ax.set_ylabel("||d y / d x_t||  (log scale)")
    ax.set_title(title or "How much the last output depends on each input")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax


@contextlib.contextmanager
def _threads(n):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def multiply_adds(length, hidden=64, batch=8):
    """Multiply-adds of one RNN layer's forward pass over (batch, length) positions, state size `hidden`.

    Every position needs x_t W_ih (hidden x hidden) and h W_hh (hidden x hidden): 2 * hidden^2
    multiply-adds each, so 2 * batch * length * hidden^2 in all, for the loop and the one multiply alike.
    """
    return 2 * batch * length * hidden ** 2


def time_sequential_vs_parallel(lengths, hidden=64, batch=8, repeats=3, seed=0, threads=1):
    """CPU seconds (best of `repeats`) for an RNN's forward pass vs the same arithmetic done at once, per length.

    CPU time of this process (`time.process_time`), not wall-clock time, so that other programs
    on a shared machine do not inflate the numbers (with more than one thread it adds up the
    threads' time, so it does not show a speed-up from several cores).

    Sequential: `torch.nn.RNNCell` called once per time step, each step waiting for the last:
    T dependent steps, each two small (batch, hidden) x (hidden, hidden) products, a bias and a tanh.
    Parallel: the same multiply-adds (`multiply_adds`) with no dependence between positions: one
    (batch*T, 2*hidden) x (2*hidden, hidden) product of the inputs and a second block of states
    side by side with the cell's two weight matrices stacked, then the same bias and tanh, the
    kind of work attention and convolutions are made of. Returns two lists of seconds
    (sequential, parallel). Both run on `threads` threads (default one: the comparison is about
    the shape of the work, and on a shared machine a second thread mostly measures the neighbours).
    """
    torch.manual_seed(seed)
    cell = nn.RNNCell(hidden, hidden)
    with _threads(threads):
        return _time_both(cell, lengths, hidden, batch, repeats)


def _time_both(cell, lengths, hidden, batch, repeats):
    sequential, parallel = [], []
    stacked = torch.cat([cell.weight_ih, cell.weight_hh], dim=1).T.contiguous()  # (2 hidden, hidden)
    bias = cell.bias_ih + cell.bias_hh
    with torch.no_grad():
        for length in lengths:
            x = torch.randn(batch, length, hidden)
            x_and_h = torch.randn(batch * length, 2 * hidden)  # inputs and states, all known up front

            def run_rnn():
                h = torch.zeros(batch, hidden)
                for t in range(length):
                    h = cell(x[:, t], h)
                return h

            def run_matmul():
                return torch.tanh(torch.addmm(bias, x_and_h, stacked))

            for fn, out in ((run_rnn, sequential), (run_matmul, parallel)):
                fn()  # warm-up: first-call allocations are not part of the work
                best = float("inf")
                for _ in range(repeats):
                    start = time.process_time()
                    fn()
                    best = min(best, time.process_time() - start)
                out.append(best)
    return sequential, parallel


def loglog_slope(lengths, seconds):
    """The exponent p of a least-squares fit seconds ~ c * length^p (a straight line on log-log axes)."""
    return float(np.polyfit(np.log(np.asarray(lengths, dtype=float)), np.log(np.asarray(seconds, dtype=float)), 1)[0])


class Seq2Seq(nn.Module):
    """A GRU encoder-decoder; without attention, the source reaches the decoder only through the
    encoder's last hidden state, one vector of `hidden` numbers.

    bidirectional=True: the encoder reads the source both ways (each direction hidden // 2 wide)
    and hands over both last states, concatenated: still one vector of `hidden` numbers.
    attention=True: at every output step the decoder also reads a weighted average of the encoder's
    states (its *context*), with weights softmax_i(s_t^T W h_i) (Luong's "general" score: the
    decoder state s_t is computed first, then it looks). Notebook 04 builds Bahdanau's additive
    version, which looks before the state update; this one lets training run the decoder over
    the whole target at once.

    Shape of source and target: (B, T) token ids; forward returns logits (B, T, n_symbols).
    """

    def __init__(self, n_symbols, hidden=32, embed=16, attention=False, bidirectional=False):
        super().__init__()
        if bidirectional and hidden % 2:
            raise ValueError("a bidirectional encoder splits `hidden` in two: make it even")
        self.n_symbols = n_symbols
        self.attention = attention
        self.bidirectional = bidirectional
        self.embed = nn.Embedding(n_symbols + 1, embed)  # + the begin-of-sequence token
        self.encoder = nn.GRU(embed, hidden // 2 if bidirectional else hidden, batch_first=True,
                              bidirectional=bidirectional)
        self.decoder = nn.GRU(embed, hidden, batch_first=True)
        if attention:
            self.score = nn.Linear(hidden, hidden, bias=False)  # W in s_t^T W h_i
        self.out = nn.Linear(2 * hidden if attention else hidden, n_symbols)

    def encode(self, source):
        """(B, T) ids -> the encoder's states (B, T, hidden) and its hand-over (1, B, hidden)."""
        if self.bidirectional:  # the same as self.encoder(...), with both directions in one pass (faster)
            states, last = bidirectional_gru(self.encoder, self.embed(source))
            last = torch.cat([last[0], last[1]], dim=-1).unsqueeze(0)
        else:
            states, last = self.encoder(self.embed(source))
        return states, last  # last: the bottleneck

    def read_out(self, decoder_states, encoder_states):
        """Logits from the decoder's states (B, L, hidden), with a look back when attention is on."""
        if not self.attention:
            return self.out(decoder_states)
        weights = torch.softmax(self.score(decoder_states) @ encoder_states.transpose(1, 2), dim=-1)
        context = weights @ encoder_states  # (B, L, hidden)
        return self.out(torch.cat([decoder_states, context], dim=-1))

    def forward(self, source, target):
        """Teacher forcing: the decoder reads BOS, y_0, ..., y_{T-2} and predicts y_0 .. y_{T-1}."""
        start = torch.full_like(target[:, :1], sequences.bos(self.n_symbols))
        decoder_in = torch.cat([start, target[:, :-1]], dim=1)
        encoder_states, last = self.encode(source)
        states, _ = self.decoder(self.embed(decoder_in), last)
        return self.read_out(states, encoder_states)

    @torch.no_grad()
    def generate(self, source, length=None):
        """Greedy decoding of `length` tokens (default: the source length): (B, length) ids."""
        length = source.shape[1] if length is None else length
        encoder_states, state = self.encode(source)
        token = torch.full_like(source[:, :1], sequences.bos(self.n_symbols))
        outputs = []
        for _ in range(length):
            step, state = self.decoder(self.embed(token), state)
            token = self.read_out(step, encoder_states).argmax(-1)
            outputs.append(token)
        return torch.cat(outputs, dim=1)


def train_seq2seq(task="copy", lengths=range(2, 17), steps=600, n_symbols=8, hidden=32, embed=16,
                  batch_size=64, lr=1e-2, seed=0, progress=None, callback=None, attention=False,
                  bidirectional=False):
    """Train a `Seq2Seq` on `task` with lengths drawn from `lengths`; returns (model, losses).

    Seeded and single-threaded, so the same arguments give the same model on every run.
    `progress` wraps the range of steps (e.g. a tqdm bar) when given; `callback(step, model)`, when
    given, is called after each step (step = 1, 2, ...), e.g. to keep a copy of the model part-way:
    the first n steps of a longer run are exactly a run of n steps.
    """
    model = _new_seq2seq(seed, n_symbols, hidden, embed, attention, bidirectional)
    losses = _fit_seq2seq(model, task, lengths, steps, batch_size, lr, seed, progress, callback)
    return model, losses


def _new_seq2seq(seed, n_symbols, hidden, embed, attention, bidirectional):
    # Built from the global random numbers: one model after the other, never inside parallel runs.
    torch.manual_seed(seed)
    return Seq2Seq(n_symbols, hidden, embed, attention=attention, bidirectional=bidirectional)


def _fit_seq2seq(model, task, lengths, steps, batch_size, lr, seed, progress, callback):
    optimizer = optim.Adam(model.parameters(), lr=lr, fused=True)
    loss_fn = nn.CrossEntropyLoss()
    stream = sequences.batches(task, batch_size, lengths, model.n_symbols, seed=seed)
    losses = []
    with _threads(1):
        model.train()
        for step in (progress(range(steps)) if progress else range(steps)):
            source, target = next(stream)
            optimizer.zero_grad()
            logits = model(source, target)
            loss = loss_fn(logits.reshape(-1, model.n_symbols), target.reshape(-1))
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
            if callback is not None:
                callback(step + 1, model)
    model.eval()
    return losses


def accuracy_by_length(model, task, lengths, per_length=200, seed=12345):
    """{length: share of target tokens predicted right by greedy decoding} on a fixed test set."""
    test = sequences.fixed_test_set(task, lengths, per_length, model.n_symbols, seed=seed)
    with _threads(1):
        return {length: float((model.generate(source) == target).double().mean())
                for length, (source, target) in test.items()}


def accuracy_by_position(model, task, length, per_length=200, seed=12345):
    """Share of right tokens at each output position for sources of one `length`: (length,) array."""
    source, target = sequences.fixed_test_set(task, [length], per_length, model.n_symbols, seed=seed)[length]
    with _threads(1):
        return (model.generate(source) == target).double().mean(0).numpy()


def draw_accuracy_by_length(accuracy, n_symbols=None, trained_lengths=None, ax=None, title=None):
    """Token accuracy against source length from {length: accuracy}; chance level dotted."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
    lengths = sorted(accuracy)
    ax.plot(lengths, [accuracy[n] for n in lengths], marker="o", label="no attention (GRU encoder-decoder)")
    if n_symbols:
        ax.axhline(1 / n_symbols, color="gray", ls=":", label=f"chance (1/{n_symbols})")
    if trained_lengths is not None:
        trained = list(trained_lengths)
        ax.axvspan(min(trained) - 0.5, max(trained) + 0.5, color="tab:green", alpha=0.08,
                   label="lengths seen in training")
    ax.set_ylim(0, 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("source length (tokens)")
    ax.set_ylabel("token accuracy")
    ax.set_title(title or "Everything must pass through one vector: accuracy falls with length")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return ax


MODELS = {"no attention": False, "attention": True}  # name -> Seq2Seq's `attention` flag


def bottleneck_experiment(seeds=(0, 1, 2), steps=250, longer_steps=None, task="reverse", lengths=range(2, 31),
                          test_lengths=range(5, 31, 5), position_length=30, n_symbols=8, hidden=64,
                          per_length=200, progress=None, workers=2):
    """Train both models (the same bidirectional GRU encoder-decoder, with and without attention)
    on `task` for `steps` steps with each seed, and measure them on a fixed test set.

    Returns {model name: {"by_length": {seed: {length: token accuracy}},
                          "by_position": {seed: (position_length,) array},
                          "loss": {seed: mean training loss of the last 50 steps}}}.
    With `longer_steps`, the first seed's model *without* attention keeps training to that many
    steps (the first `steps` of that run are exactly the short run), and the result gains
    "longer": {"by_length": ..., "by_position": ..., "loss": ...} for it. The runs go `workers` at a
    time, each on one thread, so the results do not depend on `workers`.
    """
    runs = [(name, attention, seed) for name, attention in MODELS.items() for seed in seeds]
    longer = {(name, seed): longer_steps is not None and not attention and seed == seeds[0]
              for name, attention, seed in runs}
    models = [_new_seq2seq(seed, n_symbols, hidden, 16, attention, True) for _, attention, seed in runs]

    def run(name, seed, model):
        kept = {}

        def keep(step, current):
            if step == steps:
                kept["model"] = copy.deepcopy(current).eval()

        bar = (lambda r: progress(r, desc=f"{name}, seed {seed}")) if progress else None
        losses = _fit_seq2seq(model, task, lengths, longer_steps if longer[name, seed] else steps, 64, 1e-2,
                              seed, bar, keep)
        measured = {"short": (accuracy_by_length(kept["model"], task, test_lengths, per_length),
                              accuracy_by_position(kept["model"], task, position_length, per_length))}
        if longer[name, seed]:
            measured["longer"] = (accuracy_by_length(model, task, test_lengths, per_length),
                                  accuracy_by_position(model, task, position_length, per_length))
        return measured, losses

    # Two runs at a time, one per core, the long run first (it takes as long as the others together).
    order = sorted(range(len(runs)), key=lambda i: not longer[runs[i][0], runs[i][2]])
    done = in_parallel([lambda i=i: run(runs[i][0], runs[i][2], models[i]) for i in order], workers=workers,
                       models=[None] * len(order),  # nothing trained here is needed afterwards
                       description="runs" if progress else None)
    outcome = dict(zip(order, done))
    results = {name: {"by_length": {}, "by_position": {}, "loss": {}} for name in MODELS}
    for i, (name, _, seed) in enumerate(runs):
        measured, losses = outcome[i]
        entry = results[name]
        entry["by_length"][seed], entry["by_position"][seed] = measured["short"]
        entry["loss"][seed] = float(np.mean(losses[steps - 50:steps]))
        if "longer" in measured:
            by_length, by_position = measured["longer"]
            entry["longer"] = {"by_length": by_length, "by_position": by_position,
                               "loss": float(np.mean(losses[-50:])), "steps": longer_steps}
    return results


def spread(per_seed, key):
    """(mean, lowest, highest) over seeds of per_seed[seed][key]."""
    values = np.array([per_seed[seed][key] for seed in per_seed], dtype=float)
    return float(values.mean()), float(values.min()), float(values.max())


def draw_bottleneck(results, n_symbols=8, trained_lengths=None, axes=None):
    """Left: token accuracy against length; right: against output position. Each model's mean over
    seeds as a line, every seed as a dot (so the spread is visible), chance dotted."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
    by_length_ax, by_position_ax = axes
    for (name, entry), color in zip(results.items(), ("tab:orange", "tab:blue")):
        seeds = list(entry["by_length"])
        lengths = sorted(entry["by_length"][seeds[0]])
        values = np.array([[entry["by_length"][s][n] for n in lengths] for s in seeds])
        by_length_ax.plot(lengths, values.mean(0), color=color, marker="o", label=f"{name} (mean of {len(seeds)} seeds)")
        for row in values:
            by_length_ax.scatter(lengths, row, color=color, s=10, alpha=0.5)
        positions = np.array([entry["by_position"][s] for s in seeds])
        by_position_ax.plot(np.arange(positions.shape[1]), positions.mean(0), color=color, marker=".", label=name)
        by_position_ax.fill_between(np.arange(positions.shape[1]), positions.min(0), positions.max(0), color=color,
                                    alpha=0.2)
        if "longer" in entry:
            longer = entry["longer"]
            by_length_ax.plot(lengths, [longer["by_length"][n] for n in lengths], color=color, ls="--",
                              label=f"{name}, seed {seeds[0]}, {longer['steps']} steps")
    for ax in axes:
        if n_symbols:
            ax.axhline(1 / n_symbols, color="gray", ls=":", label=f"chance (1/{n_symbols})")
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("token accuracy")
        ax.grid(True, alpha=0.3)
    if trained_lengths is not None:
        trained = list(trained_lengths)
        by_length_ax.axvspan(min(trained), max(trained), color="tab:green", alpha=0.06, label="trained lengths")
    by_length_ax.set_xlabel("source length (symbols)")
    by_length_ax.set_title("Reversal: accuracy against length")
    by_length_ax.legend(fontsize=7, loc="lower left")
    by_position_ax.set_xlabel("output position (0 = first symbol written)")
    by_position_ax.set_title("Length 30: accuracy by output position (band: seed range)")
    by_position_ax.legend(fontsize=7, loc="lower left")
    return axes
