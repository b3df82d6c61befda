"""A small GRU encoder-decoder, with or without Bahdanau attention (notebook 04).

Student-safe, but a *separate* implementation: notebook 04 asks students to write additive
attention, a decoder step, greedy decoding and beam search themselves, and this module must
train and decode before they have. So it has its own versions, organised differently from the
exercises (the keys are projected once per sentence, decoding runs on whole batches, the
beam is a tensor), and the exercises' hidden tests forbid calling any of this module's
functions (`FORBIDDEN`): a student's answer must be their own.

Shapes: B sentences, T source characters, d_h = 2 * hidden (the two directions of the
encoder), d_s = decoder state size, d_a = attention size, V = target vocabulary.
"""
import math
import threading

import torch
from torch import nn
from torch.func import functional_call

from course_utils import optim
from course_utils.data import dates
from course_utils.training import fit_and_evaluate, one_thread

__all__ = ["Seq2Seq", "attend", "teacher_forced_logits", "greedy_translate", "beam_translate",
           "greedy_log_probs", "exact_match", "fit", "steps_to", "ToyStep", "FORBIDDEN", "gru_layer",
           "bidirectional_gru"]

# The functions that would answer notebook 04's exercises: off limits in their hidden tests.
FORBIDDEN = (
    "course_utils.models.seq2seq:attend",
    "course_utils.models.seq2seq:decoder_step",
    "course_utils.models.seq2seq:greedy_translate",
    "course_utils.models.seq2seq:greedy_log_probs",
    "course_utils.models.seq2seq:beam_translate",
)


# ----------------------------------------------------------------------------- GRU passes
# The course's recurrent models are small, so much of a training step is PyTorch's cost per operation,
# not arithmetic: fewer, larger operations train faster (measured: 5 to 8 % of a training step for the
# bidirectional encoders of notebooks 01 and 04). These two functions compute what torch.nn.GRU computes,
# with the modules' own parameters.

_LAYERS = threading.local()  # weightless GRU layers (on the meta device), one set per thread


def gru_layer(weight_ih, weight_hh, bias_ih, bias_hh, inputs, state=None):
    """A one-layer, batch-first GRU with the given parameters (nn.GRU's or nn.GRUCell's layout):
    inputs (B, T, d_in), state (B, H) or None (zeros) -> (states (B, T, H), last state (B, H)).

    The same as calling an nn.GRUCell T times, in one call of PyTorch's GRU (which loops in C++)."""
    hidden = weight_hh.shape[1]
    layers = _LAYERS.__dict__.setdefault("by_size", {})
    key = (inputs.shape[-1], hidden)
    if key not in layers:  # on the meta device: no memory, and no random numbers drawn
        layers[key] = nn.GRU(inputs.shape[-1], hidden, batch_first=True, device="meta")
    weights = {"weight_ih_l0": weight_ih, "weight_hh_l0": weight_hh, "bias_ih_l0": bias_ih, "bias_hh_l0": bias_hh}
    states, last = functional_call(layers[key], weights, (inputs,) if state is None else (inputs, state[None]))
    return states, last[0]


def bidirectional_gru(gru, inputs):
    """`gru(inputs)` for a one-layer, batch-first, bidirectional nn.GRU, with half the sequential steps:
    returns (states (B, T, 2H), last (2, B, H)), as the module does.

    The two directions run side by side as one GRU of width 2H whose weights are block-diagonal (each
    direction's gates see only its own inputs and state), reading x_t and x_{T-1-t} together. The zeros
    add exact zeros, so the states are the module's; only the order of the gradients' sums changes.
    Without gradients (decoding) the module itself is faster, and is called."""
    if not torch.is_grad_enabled():
        return gru(inputs)
    H = gru.hidden_size
    w_ih = _side_by_side(gru.weight_ih_l0, gru.weight_ih_l0_reverse, H)
    w_hh = _side_by_side(gru.weight_hh_l0, gru.weight_hh_l0_reverse, H)
    b_ih = _side_by_side(gru.bias_ih_l0[:, None], gru.bias_ih_l0_reverse[:, None], H, block=False)[:, 0]
    b_hh = _side_by_side(gru.bias_hh_l0[:, None], gru.bias_hh_l0_reverse[:, None], H, block=False)[:, 0]
    states, last = gru_layer(w_ih, w_hh, b_ih, b_hh, torch.cat([inputs, inputs.flip(1)], dim=-1))
    states = torch.cat([states[..., :H], states[..., H:].flip(1)], dim=-1)
    return states, torch.stack([last[:, :H], last[:, H:]])


def _side_by_side(forward, backward, H, block=True):
    """Two directions' gate-stacked rows [r; z; n] (3H each) -> rows [r_f; r_b; z_f; z_b; n_f; n_b];
    with `block`, each direction's columns apart (a block-diagonal matrix), else shared."""
    if block:
        forward = torch.cat([forward, forward.new_zeros(forward.shape[0], backward.shape[1])], dim=1)
        backward = torch.cat([backward.new_zeros(backward.shape[0], forward.shape[1] - backward.shape[1]), backward],
                             dim=1)
    gates = [part for g in range(3) for part in (forward[g * H:(g + 1) * H], backward[g * H:(g + 1) * H])]
    return torch.cat(gates, dim=0)


class Seq2Seq(nn.Module):
    """Bidirectional GRU encoder; GRU decoder that reads a context vector at every step.

    attention=True: the context is Bahdanau's weighted average of the encoder states,
    recomputed at every step from the previous decoder state.
    attention=False: the context is the encoder's summary (its last forward and first backward
    states), the same at every step: the classic bottleneck.
    """

    def __init__(self, attention=True, hidden=32, embed=16, attention_size=32, state_size=64):
        super().__init__()
        self.attention = attention
        d_h = 2 * hidden
        self.source_embedding = nn.Embedding(len(dates.SOURCE_VOCAB), embed, padding_idx=dates.PAD)
        self.encoder = nn.GRU(embed, hidden, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(d_h, state_size)  # s_0 = tanh(bridge(summary))
        # Decoder: the parameters the exercises use, under the same names.
        self.embedding = nn.Embedding(len(dates.TARGET_VOCAB), embed)
        self.W1 = nn.Parameter(torch.randn(attention_size, d_h) / math.sqrt(d_h))
        self.W2 = nn.Parameter(torch.randn(attention_size, state_size) / math.sqrt(state_size))
        self.v = nn.Parameter(torch.randn(attention_size) / math.sqrt(attention_size))
        self.cell = nn.GRUCell(embed + d_h, state_size)
        self.out = nn.Linear(state_size + d_h, len(dates.TARGET_VOCAB))

    def encode(self, src, mask):
        """src (B, T) ids, mask (B, T) -> keys (B, T, d_h), summary (B, d_h), s_0 (B, d_s)."""
        keys, _ = bidirectional_gru(self.encoder, self.source_embedding(src))  # = self.encoder(...)
        half = keys.shape[-1] // 2
        last = mask.sum(dim=1) - 1  # position of each sentence's last real character
        forward_last = keys[torch.arange(len(src)), last, :half]
        backward_first = keys[:, 0, half:]
        summary = torch.cat([forward_last, backward_first], dim=-1)
        return keys, summary, torch.tanh(self.bridge(summary))


def attend(model, state, keys, projected_keys, mask):
    """Bahdanau weights and context, with the keys already projected (keys @ W1.T, once)."""
    energy = torch.tanh(projected_keys + (state @ model.W2.T).unsqueeze(1))  # (B, T, d_a)
    scores = (energy @ model.v).masked_fill(~mask, float("-inf"))           # (B, T)
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def decoder_step(model, prev, state, memory):
    """One step of the decoder. memory = (keys, projected_keys, mask, summary).
    Returns logits (B, V), the new state (B, d_s) and the weights (B, T) or None."""
    keys, projected_keys, mask, summary = memory
    if model.attention:
        context, weights = attend(model, state, keys, projected_keys, mask)
    else:
        context, weights = summary, None
    state = model.cell(torch.cat([model.embedding(prev), context], dim=-1), state)
    return model.out(torch.cat([state, context], dim=-1)), state, weights


def _memory(model, src, mask):
    keys, summary, state = model.encode(src, mask)
    return (keys, keys @ model.W1.T, mask, summary), state


def teacher_forced_logits(model, src, mask, tgt):
    """Logits (B, L, V) for targets tgt (B, L), feeding the true previous character.

    `decoder_step` at every position, with what does not wait for the previous step done for all
    positions at once: the embeddings, the output layer and, without attention (the context is
    then the same at every step), the GRU itself."""
    (keys, projected_keys, mask, summary), state = _memory(model, src, mask)
    prev = torch.cat([torch.full_like(tgt[:, :1], dates.BOS), tgt[:, :-1]], dim=1)
    embedded = model.embedding(prev)  # (B, L, e)
    if model.attention:
        states, contexts = [], []
        for t in range(tgt.shape[1]):
            context, _ = attend(model, state, keys, projected_keys, mask)
            state = model.cell(torch.cat([embedded[:, t], context], dim=-1), state)
            states.append(state)
            contexts.append(context)
        states, contexts = torch.stack(states, dim=1), torch.stack(contexts, dim=1)
    else:
        contexts = summary[:, None, :].expand(-1, tgt.shape[1], -1)
        cell = model.cell
        states, _ = gru_layer(cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh,
                              torch.cat([embedded, contexts], dim=-1), state)
    return model.out(torch.cat([states, contexts], dim=-1))


@torch.no_grad()
def greedy_translate(model, texts, max_len=dates.TARGET_LENGTH + 1):
    """Translate a list of strings; returns (ISO strings, weights (B, L, T) or None)."""
    src, mask = dates.pad_sources(texts)
    memory, state = _memory(model, src, mask)
    prev = torch.full((len(texts),), dates.BOS, dtype=torch.long)
    outputs, all_weights = [], []
    for _ in range(max_len):
        logits, state, weights = decoder_step(model, prev, state, memory)
        prev = logits.argmax(dim=-1)
        outputs.append(prev)
        all_weights.append(weights)
    ids = torch.stack(outputs, dim=1)
    weights = torch.stack(all_weights, dim=1) if model.attention else None
    return [dates.decode_target(row) for row in ids.tolist()], weights


@torch.no_grad()
def greedy_log_probs(model, texts, max_len=dates.TARGET_LENGTH + 1):
    """Per text, the log-probability per token of its greedy translation (its tokens up to the first
    EOS, included): what `beam_translate` with a beam of one scores it. Texts of one length are
    decoded together (padding would change what the encoder's backward direction reads)."""
    by_length = {}
    for i, text in enumerate(texts):
        by_length.setdefault(len(text), []).append(i)
    scores = [None] * len(texts)
    for rows in by_length.values():
        for i, score in zip(rows, _greedy_log_probs(model, [texts[i] for i in rows], max_len)):
            scores[i] = score
    return scores


def _greedy_log_probs(model, texts, max_len):
    src, mask = dates.pad_sources(texts)
    memory, state = _memory(model, src, mask)
    prev = torch.full((len(texts),), dates.BOS, dtype=torch.long)
    total, length = torch.zeros(len(texts)), torch.zeros(len(texts), dtype=torch.long)
    alive = torch.ones(len(texts), dtype=torch.bool)  # no EOS yet
    for _ in range(max_len):
        logits, state, _ = decoder_step(model, prev, state, memory)
        best, prev = torch.log_softmax(logits, dim=-1).max(dim=-1)
        total = torch.where(alive, total + best, total)
        length += alive
        alive &= prev != dates.EOS
    return [score / n for score, n in zip(total.tolist(), length.tolist())]


@torch.no_grad()
def beam_translate(model, text, beam_width=3, max_len=dates.TARGET_LENGTH + 1):
    """Beam search for one string. Returns [(ISO string, log-probability, ids)], best first.

    The beam is a tensor of beam_width rows; hypotheses that emit EOS leave it (the beam
    shrinks) and are ranked at the end by log-probability per emitted token, EOS included.
    """
    src, mask = dates.pad_sources([text])
    memory, state = _memory(model, src, mask)
    rows = lambda m, n: tuple(x.expand(n, *x.shape[1:]) for x in m)  # noqa: E731
    alive_ids = torch.empty(1, 0, dtype=torch.long)
    alive_scores = torch.zeros(1)
    prev = torch.full((1,), dates.BOS, dtype=torch.long)
    done = []
    for _ in range(max_len):
        n = len(prev)
        logits, state, _ = decoder_step(model, prev, state, rows(memory, n))
        total = alive_scores[:, None] + torch.log_softmax(logits, dim=-1)  # (n, V)
        k = min(beam_width - len(done), total.numel())
        if k <= 0:
            break
        best, flat = total.flatten().topk(k)
        origin, token = flat // total.shape[1], flat % total.shape[1]
        ids = torch.cat([alive_ids[origin], token[:, None]], dim=1)
        ended = token == dates.EOS
        done += [(ids[i], float(best[i])) for i in torch.nonzero(ended).flatten()]
        keep = ~ended
        alive_ids, alive_scores = ids[keep], best[keep]
        prev, state = token[keep], state[origin[keep]]
        if len(prev) == 0:
            break
    done += [(alive_ids[i], float(alive_scores[i])) for i in range(len(alive_ids))]
    done.sort(key=lambda h: h[1] / h[0].numel(), reverse=True)
    return [(dates.decode_target(ids.tolist()), score, ids.tolist()) for ids, score in done]


def exact_match(model, pairs, batch_size=500):
    """Share of (source, ISO target) pairs translated exactly right by greedy decoding."""
    right = 0
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i:i + batch_size]
        guesses, _ = greedy_translate(model, [s for s, _ in chunk])
        right += sum(g == t for g, (_, t) in zip(guesses, chunk))
    return right / len(pairs)


def fit(model, steps, batch_size=64, lr=0.01, seed=0, eval_pairs=(), eval_every=0, description="training",
        stop_at=None):
    """Train with Adam and teacher forcing on fresh seeded batches of training dates.

    Every `eval_every` steps (and at the end) the greedy exact match on `eval_pairs` is
    recorded. With `stop_at`, training stops at the first evaluation that reaches it (`steps` is
    then a cap). Returns the history: a dict of lists "step", "seconds" (training time only,
    evaluation excluded) and "accuracy", and "loss" (one per step); see
    `course_utils.training.fit_and_evaluate`, the loop notebook 10's Transformer shares.

    Runs on one CPU thread (restored afterwards): for a model this small, more threads cost
    more in waking up than they save, badly so on a busy machine, and one thread gives the
    same numbers on every run.
    """
    eval_pairs = list(eval_pairs)
    with one_thread():
        torch.manual_seed(seed)
        return fit_and_evaluate(
            model, steps, dates.training_batches(batch_size, seed=seed), _teacher_forced_loss,
            optim.Adam(model.parameters(), lr=lr, fused=True),
            evaluate=(lambda trained: exact_match(trained, eval_pairs)) if eval_pairs else None,
            eval_every=eval_every, stop_at=stop_at, description=description)


def _teacher_forced_loss(model, src, mask, tgt):
    logits = teacher_forced_logits(model, src, mask, tgt)
    return nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten())


def steps_to(history, accuracy):
    """The first evaluated step at which the history's exact match reached `accuracy` (None if never)."""
    return next((step for step, value in zip(history["step"], history["accuracy"]) if value >= accuracy), None)


class ToyStep:
    """A small random recurrent 'language model' for testing decoders, seeded.

    Called as ``step(tokens (n,), states (n, d)) -> (log_probs (n, V), new_states (n, d))``:
    rows are independent, and the next distribution depends on the whole history through the
    state. `eos_bias` raises the log-odds of token `eos`, so hypotheses end at varied lengths;
    token `bos` is (almost) never emitted.
    """

    def __init__(self, vocab=6, d=4, bos=0, eos=1, eos_bias=0.0, sharpness=2.0, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.A = torch.randn(d, d, generator=g, dtype=torch.float64)
        self.E = torch.randn(vocab, d, generator=g, dtype=torch.float64)
        self.B = sharpness * torch.randn(d, vocab, generator=g, dtype=torch.float64)
        self.bias = torch.zeros(vocab, dtype=torch.float64)
        self.bias[eos] = eos_bias
        self.bias[bos] = -30.0
        self.initial = torch.randn(1, d, generator=g, dtype=torch.float64)

    def __call__(self, tokens, states):
        # The decoders it stands in for need one token per row of states: a 0-d token would
        # broadcast here and crash a real GRU decoder, so it is refused here too.
        if not (isinstance(tokens, torch.Tensor) and tokens.dim() == 1 and len(tokens) == len(states)):
            shape = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
            raise ValueError(f"step takes tokens of shape (n,) = ({len(states)},), one per row of states; "
                             f"it got {shape}")
        states = torch.tanh(states @ self.A + self.E[tokens])
        return torch.log_softmax(states @ self.B + self.bias, dim=-1), states
