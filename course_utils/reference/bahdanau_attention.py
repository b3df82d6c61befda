"""Attention in a seq2seq decoder: additive (Bahdanau), dot and multiplicative (Luong) scores.

Ground truth for notebook 04 (Bahdanau attention): the scores, one decoder step, and greedy and
beam-search decoding with any step function
``step(tokens (n,), states (n, ...)) -> (log_probs (n, V), new_states (n, ...))``.

At each decoder step, the decoder state s scores every encoder state h_i; a softmax over the
source positions turns the scores into weights a_i; the context vector is sum_i a_i h_i.
The three scores differ only in how s and h_i are compared:

    additive:        score_i = v^T tanh(W1 h_i + W2 s)      (s and h_i may differ in size)
    dot:             score_i = s^T h_i                       (needs d_s == d_h)
    multiplicative:  score_i = s^T W h_i                     (W of shape (d_s, d_h))
"""

import torch

__all__ = ["attention_weights_per_translation", "additive_score", "additive_attention", "dot_score", "multiplicative_score", "decoder_step",
           "greedy_decode", "beam_search"]


def additive_score(query, keys, W1, W2, v):
    """Bahdanau's scores v^T tanh(W1 h_i + W2 s) for every encoder position i.

    Shape of query (decoder state s): (batch_size, d_s)
    Shape of keys (encoder states h_i): (batch_size, T, d_h)
    Shape of W1: (d_a, d_h); W2: (d_a, d_s); v: (d_a,)
    Returns scores of shape (batch_size, T).
    """
    if W1.shape[-1] != keys.shape[-1] or W2.shape[-1] != query.shape[-1]:
        raise ValueError(
            f"W1 {tuple(W1.shape)} must be (d_a, d_h={keys.shape[-1]}) and "
            f"W2 {tuple(W2.shape)} must be (d_a, d_s={query.shape[-1]})"
        )
    # Row vectors, so W h becomes h @ W.T. Shape: (batch_size, T, d_a)
    projected_keys = keys @ W1.T
    # The same projected query is added at every position. Shape: (batch_size, 1, d_a)
    projected_query = (query @ W2.T)[:, None, :]
    # Shape: (batch_size, T, d_a) @ (d_a,) -> (batch_size, T)
    return torch.tanh(projected_keys + projected_query) @ v


def additive_attention(query, keys, W1, W2, v, mask=None):
    """Bahdanau attention: additive scores, softmax over source positions, weighted sum.

    Shape of query (decoder state s): (batch_size, d_s)
    Shape of keys (encoder states h_i, also the values): (batch_size, T, d_h)
    Shape of W1: (d_a, d_h); W2: (d_a, d_s); v: (d_a,)
    Shape of mask (optional, boolean): (batch_size, T), True = real position (not padding)

    Returns ``(context, weights)``:
    Shape of context: (batch_size, d_h), context = sum_i a_i h_i
    Shape of weights: (batch_size, T), summing to one over T.

    Masked positions get weight exactly zero. A fully masked sequence (no real position) gets
    all-zero weights and a zero context, without NaN.
    """
    scores = additive_score(query, keys, W1, W2, v)
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be boolean (True = real position), got {mask.dtype}")
        has_real = mask.any(dim=-1, keepdim=True)  # Shape: (batch_size, 1)
        # -inf gives padding zero weight; rows with nothing real are zeroed after the softmax
        # instead (all -inf would give 0 / 0 = NaN).
        scores = scores.masked_fill(~(mask | ~has_real), float("-inf"))
        weights = torch.softmax(scores, dim=-1) * has_real.to(scores.dtype)
    # Shape: (batch_size, 1, T) @ (batch_size, T, d_h) -> (batch_size, d_h)
    context = (weights[:, None, :] @ keys)[:, 0, :]
    return context, weights


def dot_score(query, keys):
    """Dot-product scores s^T h_i.

    Shape of query: (batch_size, d); keys: (batch_size, T, d). Returns (batch_size, T).
    """
    if query.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"dot scores need equal sizes: query has {query.shape[-1]}, keys have {keys.shape[-1]}"
        )
    # Shape: (batch_size, T, d) @ (batch_size, d, 1) -> (batch_size, T)
    return (keys @ query[:, :, None])[:, :, 0]


def multiplicative_score(query, keys, W=None):
    """Multiplicative (Luong "general") scores s^T W h_i; W=None gives the dot score s^T h_i.

    Shape of query: (batch_size, d_s); keys: (batch_size, T, d_h); W: (d_s, d_h) (d_s == d_h
    when W is None). Returns (batch_size, T).
    """
    if W is None:
        return dot_score(query, keys)
    if W.shape != (query.shape[-1], keys.shape[-1]):
        raise ValueError(
            f"W must have shape (d_s, d_h) = ({query.shape[-1]}, {keys.shape[-1]}), "
            f"got {tuple(W.shape)}"
        )
    # s^T W is a row vector of size d_h; then a dot score with each h_i.
    return dot_score(query @ W, keys)


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


def attention_weights_per_translation(source_length, target_length=10):
    """Weights alpha_{t,i} computed to translate one source greedily: one weight per source
    position at each decoder step, the steps being the target characters and the end symbol."""
    return (target_length + 1) * source_length
