"""Reference answers of notebook 04 (Bahdanau attention) beyond `reference/bahdanau.py`.

Instructor side: the hidden tests of `solutions/04_bahdanau_attention/bahdanau_attention.ipynb`
compare a student's functions with these (through the mistake catalogue).

* `multiplicative_score(query, keys, W=None)`: s^T W h_i, and the dot score s^T h_i when W is None.
* `decoder_step(decoder, prev_token, state, keys, mask=None)`: one step of a Bahdanau decoder.
* `greedy_decode(step, state, bos, eos, max_len)` and `beam_search(step, state, bos, eos,
  max_len, beam_width)`: decoding with any step function
  ``step(tokens (n,), states (n, ...)) -> (log_probs (n, V), new_states (n, ...))``.
"""
import torch

from course_utils.reference.bahdanau import additive_attention

__all__ = ["multiplicative_score", "decoder_step", "greedy_decode", "beam_search"]


def multiplicative_score(query, keys, W=None):
    """Scores s^T W h_i for every position i; W=None gives the dot score s^T h_i.

    Shape of query: (B, d_s); keys: (B, T, d_h); W: (d_s, d_h) (d_s == d_h when W is None).
    Returns (B, T).
    """
    projected = query if W is None else query @ W  # (B, d_h): the row vector s^T W
    return (keys @ projected[:, :, None])[:, :, 0]


def decoder_step(decoder, prev_token, state, keys, mask=None):
    """One decoder step with Bahdanau attention.

    decoder: has `embedding` (nn.Embedding), `W1` (d_a, d_h), `W2` (d_a, d_s), `v` (d_a,),
    `cell` (nn.GRUCell with input size e + d_h) and `out` (nn.Linear from d_s + d_h to V).
    Shape of prev_token: (B,) long; state (s_{t-1}): (B, d_s); keys: (B, T, d_h); mask: (B, T).
    Returns (logits (B, V), new_state (B, d_s), weights (B, T)).
    """
    context, weights = additive_attention(state, keys, decoder.W1, decoder.W2, decoder.v, mask)
    x = torch.cat([decoder.embedding(prev_token), context], dim=-1)
    new_state = decoder.cell(x, state)
    logits = decoder.out(torch.cat([new_state, context], dim=-1))
    return logits, new_state, weights


def greedy_decode(step, state, bos, eos, max_len):
    """Pick the most probable token at every step, until EOS or max_len tokens.

    state: the initial state of one sequence, first axis of size 1.
    Returns (tokens, log_prob): the list of emitted token ids (EOS included if emitted) and the
    sum of their log-probabilities (a float).
    """
    tokens, total = [], 0.0
    prev = torch.tensor([bos])
    for _ in range(max_len):
        log_probs, state = step(prev, state)
        token = int(log_probs[0].argmax())
        tokens.append(token)
        total += float(log_probs[0, token])
        if token == eos:
            break
        prev = torch.tensor([token])
    return tokens, total


def beam_search(step, state, bos, eos, max_len, beam_width):
    """Beam search; a hypothesis that emits EOS is finished and leaves the beam.

    At every step, every live hypothesis is extended by every token; of all these candidates
    the best (beam_width - number finished so far) by total log-probability are kept. Those
    that end in EOS are finished; the others are the new beam. The search stops when nothing is
    left alive or after max_len steps (live hypotheses then count as finished).
    Returns [(tokens, log_prob), ...] for every finished hypothesis, sorted best first by the
    length-normalised score log_prob / len(tokens) (EOS counts as a token).
    """
    beams = [([], 0.0)]  # live hypotheses: (tokens, total log-probability)
    states = state
    finished = []
    for _ in range(max_len):
        room = beam_width - len(finished)
        if not beams or room <= 0:
            break
        prev = torch.tensor([tokens[-1] if tokens else bos for tokens, _ in beams])
        log_probs, new_states = step(prev, states)
        candidates = [
            (score + float(log_probs[row, token]), row, token)
            for row, (_, score) in enumerate(beams)
            for token in range(log_probs.shape[1])
        ]
        candidates.sort(key=lambda c: c[0], reverse=True)
        next_beams, rows = [], []
        for score, row, token in candidates[:room]:
            hypothesis = (beams[row][0] + [token], score)
            if token == eos:
                finished.append(hypothesis)
            else:
                next_beams.append(hypothesis)
                rows.append(row)
        beams = next_beams
        states = new_states[torch.tensor(rows, dtype=torch.long)] if rows else None
    finished.extend(beams)
    return sorted(finished, key=lambda h: h[1] / len(h[0]), reverse=True)
