"""Second correct implementations of notebook 04's exercises, written differently from the
reference (course_utils/reference/bahdanau_attention.py): the exercise's tests
must pass them too (tests/exercises/test_mutations.py)."""
import heapq
import math

import numpy as np
import torch


def multiplicative_score_matmul(query, keys, W=None):
    """bmm of the keys with the projected query as a column."""
    s = query if W is None else torch.matmul(query, W)
    return torch.bmm(keys, s.unsqueeze(-1)).squeeze(-1)


def multiplicative_score_loop(query, keys, W=None):
    """One sentence and one position at a time: s^T (W h_i)."""
    B, T, _ = keys.shape
    out = torch.empty(B, T, dtype=keys.dtype)
    for b in range(B):
        for i in range(T):
            h = keys[b, i] if W is None else W @ keys[b, i]
            out[b, i] = query[b] @ h
    return out


def additive_attention_einsum(query, keys, W1, W2, v, mask=None):
    """einsum projections, torch.where for the mask, a hand-written stable softmax."""
    energy = torch.tanh(torch.einsum("ad,btd->bta", W1, keys) + torch.einsum("as,bs->ba", W2, query)[:, None])
    scores = torch.einsum("bta,a->bt", energy, v)
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(-math.inf, dtype=scores.dtype))
    e = torch.exp(scores - scores.max(dim=1, keepdim=True).values)
    weights = e / e.sum(dim=1, keepdim=True)
    return torch.bmm(weights.unsqueeze(1), keys).squeeze(1), weights


def additive_attention_per_position(query, keys, W1, W2, v, mask=None):
    """A loop over the positions, as in the formula; padding removed by a mask after exp."""
    B, T, _ = keys.shape
    scores = torch.stack([torch.tanh(keys[:, i] @ W1.T + query @ W2.T) @ v for i in range(T)], dim=1)
    e = torch.exp(scores - scores.max(dim=1, keepdim=True).values)
    if mask is not None:
        e = e * mask
    weights = e / e.sum(dim=1, keepdim=True)
    context = sum(weights[:, i:i + 1] * keys[:, i] for i in range(T))
    return context, weights


def decoder_step_functional(decoder, prev_token, state, keys, mask=None):
    """The GRU cell and output layer called through torch.nn.functional-style weights."""
    energy = torch.tanh(keys @ decoder.W1.T + (state @ decoder.W2.T).unsqueeze(1))
    scores = energy @ decoder.v
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -math.inf)
    weights = scores.softmax(dim=1)
    context = torch.einsum("bt,btd->bd", weights, keys)
    x = torch.cat((decoder.embedding.weight[prev_token], context), dim=1)
    # the GRU cell's equations with its own weights (PyTorch's gate order: reset, update, new)
    cell = decoder.cell
    i_r, i_z, i_n = torch.nn.functional.linear(x, cell.weight_ih, cell.bias_ih).chunk(3, dim=1)
    h_r, h_z, h_n = torch.nn.functional.linear(state, cell.weight_hh, cell.bias_hh).chunk(3, dim=1)
    reset, update = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    candidate = torch.tanh(i_n + reset * h_n)
    new_state = (1 - update) * candidate + update * state
    logits = torch.nn.functional.linear(torch.cat((new_state, context), dim=1), decoder.out.weight, decoder.out.bias)
    return logits, new_state, weights


def greedy_decode_while(step, state, bos, eos, max_len):
    """A while loop and max() over the log-probabilities."""
    tokens, logps, prev = [], [], bos
    while len(tokens) < max_len and (not tokens or tokens[-1] != eos):
        log_probs, state = step(torch.tensor([prev]), state)
        value, index = log_probs[0].max(dim=0)
        tokens.append(int(index))
        logps.append(float(value))
        prev = tokens[-1]
    return tokens, math.fsum(logps)


def beam_search_heapq(step, state, bos, eos, max_len, beam_width):
    """Python lists and heapq.nlargest; one step call per step, states gathered with index_select."""
    live, finished = [((), 0.0)], []
    for _ in range(max_len):
        room = beam_width - len(finished)
        if room <= 0 or not live:
            break
        last = torch.tensor([t[-1] if t else bos for t, _ in live], dtype=torch.long)
        log_probs, new_states = step(last, state)
        table = log_probs.tolist()
        pool = ((score + lp, r, w) for r, (_, score) in enumerate(live) for w, lp in enumerate(table[r]))
        chosen = heapq.nlargest(room, pool, key=lambda c: c[0])
        keep = []
        live_next = []
        for score, r, w in chosen:
            if w == eos:
                finished.append((list(live[r][0]) + [w], score))
            else:
                live_next.append((live[r][0] + (w,), score))
                keep.append(r)
        live = live_next
        if keep:
            state = new_states.index_select(0, torch.tensor(keep))
    finished += [(list(t), s) for t, s in live]
    finished.sort(key=lambda h: -h[1] / len(h[0]))
    return finished


ALTERNATIVES = {
    # a count computed with NumPy (np.prod of the axes) is a NumPy integer
    "bahdanau_attention_weights_count": [242, 242.0, 22 * 11, np.prod([22, 11]), np.float64(242.0)],
    "bahdanau_attention_multiplicative_score": [multiplicative_score_matmul, multiplicative_score_loop],
    "bahdanau_attention_additive_attention": [additive_attention_einsum, additive_attention_per_position],
    "bahdanau_attention_decoder_step": [decoder_step_functional],
    "bahdanau_attention_greedy_decode": [greedy_decode_while],
    "bahdanau_attention_beam_search": [beam_search_heapq],
}
