"""Wrong answers to notebook 04's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import importlib
import math
import types

import numpy as np
import torch


# ---------------------------------------------------------------- multiplicative_score


def _dot(keys, x):
    return torch.einsum("btd,bd->bt", keys, x)


def score_with_W_transposed(query, keys, W=None):
    """Uses s^T W^T h (query @ W.T): right only for a symmetric W."""
    x = query if W is None else query @ W.T
    return _dot(keys, x)


def score_keys_times_W(query, keys, W=None):
    """Projects the keys with keys @ W (h^T W s): right only for a symmetric W."""
    k = keys if W is None else keys @ W
    return _dot(k, query)


def score_scaled(query, keys, W=None):
    """Divides by sqrt(d_h) as in scaled dot-product attention."""
    x = query if W is None else query @ W
    return _dot(keys, x) / math.sqrt(keys.shape[-1])


def score_softmaxed(query, keys, W=None):
    """Returns the softmax of the scores instead of the raw scores."""
    x = query if W is None else query @ W
    return torch.softmax(_dot(keys, x), dim=-1)


def score_all_pairs_summed(query, keys, W=None):
    """Scores every query against every sentence's keys and sums over the batch."""
    x = query if W is None else query @ W
    return torch.einsum("btd,cd->bt", keys, x)


def score_squeeze_all(query, keys, W=None):
    """Uses .squeeze() instead of [:, :, 0]: drops the batch axis for B = 1 and the T axis for T = 1."""
    x = query if W is None else query @ W
    return (keys @ x[:, :, None]).squeeze()


def score_in_place_on_keys(query, keys, W=None):
    """Multiplies the keys in place (keys *= ...): right scores, but the caller's keys are destroyed."""
    x = query if W is None else query @ W
    keys *= x[:, None, :]
    return keys.sum(dim=-1)


def score_first_sentence_keys(query, keys, W=None):
    """Compares every query with the first sentence's keys (keys[0]): right only for a batch of one."""
    x = query if W is None else query @ W
    return x @ keys[0].T


def score_float32(query, keys, W=None):
    """Computes in float32 whatever the input dtype (loses float64 precision)."""
    x = query.float() if W is None else query.float() @ W.float()
    return _dot(keys.float(), x)


def score_detached(query, keys, W=None):
    """Detaches the scores (or computes them under torch.no_grad()): right numbers, no gradient."""
    with torch.no_grad():
        x = query if W is None else query @ W
        return _dot(keys, x)


def score_numpy(query, keys, W=None):
    """Returns a NumPy array instead of a tensor."""
    x = query if W is None else query @ W
    return _dot(keys, x).numpy()


def score_hardcoded(query, keys, W=None):
    """Games the visible tests: for the worked examples returns the printed numbers, else zeros."""
    if keys.shape == (1, 3, 2):
        if W is None:
            return torch.tensor([[3.0, 3.0, -2.0]])
        return torch.tensor([[0.0, 1.0, -1.0]])
    if keys.shape == (1, 2, 3):
        return torch.tensor([[4.0, 1.0]])
    x = query if W is None else query @ W
    return _dot(keys, x)[:, :].roll(1, dims=0)


# ---------------------------------------------------------------- additive_attention


def _scores(query, keys, W1, W2, v):
    return torch.tanh(keys @ W1.T + (query @ W2.T)[:, None, :]) @ v


def additive_mask_ignored(query, keys, W1, W2, v, mask=None):
    """Never applies the mask."""
    weights = torch.softmax(_scores(query, keys, W1, W2, v), dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def additive_mask_after_softmax(query, keys, W1, W2, v, mask=None):
    """Zeroes the padded weights after the softmax: rows no longer sum to one."""
    weights = torch.softmax(_scores(query, keys, W1, W2, v), dim=-1)
    if mask is not None:
        weights = weights * mask
    return torch.einsum("bt,btd->bd", weights, keys), weights


def additive_tanh_after_v(query, keys, W1, W2, v, mask=None):
    """Scores tanh(v . (W1 h + W2 s)): tanh after the reduction by v instead of before."""
    scores = torch.tanh((keys @ W1.T + (query @ W2.T)[:, None, :]) @ v)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def additive_no_query(query, keys, W1, W2, v, mask=None):
    """Forgets the W2 s term: the scores do not depend on the decoder state."""
    scores = torch.tanh(keys @ W1.T) @ v
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def additive_no_tanh(query, keys, W1, W2, v, mask=None):
    """Leaves out the tanh."""
    scores = (keys @ W1.T + (query @ W2.T)[:, None, :]) @ v
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def additive_softmax_over_batch(query, keys, W1, W2, v, mask=None):
    """Takes the softmax over the batch axis (dim=0) instead of the positions."""
    scores = _scores(query, keys, W1, W2, v)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=0)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def additive_mask_inverted(query, keys, W1, W2, v, mask=None):
    """Treats True as padding."""
    scores = _scores(query, keys, W1, W2, v)
    if mask is not None:
        scores = scores.masked_fill(mask & ~mask.all(dim=-1, keepdim=True), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def additive_context_mean(query, keys, W1, W2, v, mask=None):
    """Right weights, but the context is the plain mean of the keys."""
    scores = _scores(query, keys, W1, W2, v)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return keys.mean(dim=1), weights


def additive_scaled(query, keys, W1, W2, v, mask=None):
    """Divides the scores by sqrt(d_a) like scaled dot-product attention."""
    scores = _scores(query, keys, W1, W2, v) / math.sqrt(v.shape[0])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def additive_W1_W2_swapped(query, keys, W1, W2, v, mask=None):
    """Applies W1 to the query and W2 to the keys (works only when d_s == d_h)."""
    scores = torch.tanh(keys @ W2.T + (query @ W1.T)[:, None, :]) @ v
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def additive_mask_first_row(query, keys, W1, W2, v, mask=None):
    """Applies the first sentence's mask to every sentence."""
    scores = _scores(query, keys, W1, W2, v)
    if mask is not None:
        scores = scores.masked_fill(~mask[:1], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def additive_returns_swapped(query, keys, W1, W2, v, mask=None):
    """Returns (weights, context) instead of (context, weights)."""
    context, weights = additive_mask_ignored(query, keys, W1, W2, v, None)
    scores = _scores(query, keys, W1, W2, v)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights, torch.einsum("bt,btd->bd", weights, keys)


def additive_via_numpy(query, keys, W1, W2, v, mask=None):
    """Computes in NumPy and converts back with torch.from_numpy: right numbers, no gradient."""
    q, k, a, b, u = (t.detach().numpy() for t in (query, keys, W1, W2, v))
    scores = np.tanh(k @ a.T + (q @ b.T)[:, None, :]) @ u
    if mask is not None:
        scores = np.where(mask.numpy(), scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return torch.from_numpy(np.einsum("bt,btd->bd", weights, k)), torch.from_numpy(weights)


def additive_mask_zeroes_keys(query, keys, W1, W2, v, mask=None):
    """Masks by zeroing the padded keys instead of their scores."""
    if mask is not None:
        keys = keys * mask[:, :, None]
    weights = torch.softmax(_scores(query, keys, W1, W2, v), dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def additive_library_in_disguise(query, keys, W1, W2, v, mask=None):
    """Reaches the library's seq2seq.attend through __import__ and the module's __dict__."""
    library = __import__("course_utils.models.seq2seq", fromlist=["seq2seq"])
    attend = library.__dict__["att" + "end"]
    if mask is None:
        mask = torch.ones(keys.shape[:2], dtype=torch.bool)
    return attend(types.SimpleNamespace(W2=W2, v=v), query, keys, keys @ W1.T, mask)


# ---------------------------------------------------------------- decoder_step


def _attend(query, keys, W1, W2, v, mask=None):
    scores = _scores(query, keys, W1, W2, v)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


def step_luong_order(decoder, prev_token, state, keys, mask=None):
    """Attends with the new state (Luong's order) instead of the previous one."""
    new_state = decoder.cell(torch.cat([decoder.embedding(prev_token), torch.zeros_like(keys[:, 0])], dim=-1), state)
    context, weights = _attend(new_state, keys, decoder.W1, decoder.W2, decoder.v, mask)
    return decoder.out(torch.cat([new_state, context], dim=-1)), new_state, weights


def step_input_order_swapped(decoder, prev_token, state, keys, mask=None):
    """Feeds the cell [context, embedding] instead of [embedding, context]."""
    context, weights = _attend(state, keys, decoder.W1, decoder.W2, decoder.v, mask)
    new_state = decoder.cell(torch.cat([context, decoder.embedding(prev_token)], dim=-1), state)
    return decoder.out(torch.cat([new_state, context], dim=-1)), new_state, weights


def step_output_order_swapped(decoder, prev_token, state, keys, mask=None):
    """Reads the logits from [context, new_state] instead of [new_state, context]."""
    context, weights = _attend(state, keys, decoder.W1, decoder.W2, decoder.v, mask)
    new_state = decoder.cell(torch.cat([decoder.embedding(prev_token), context], dim=-1), state)
    return decoder.out(torch.cat([context, new_state], dim=-1)), new_state, weights


def step_log_softmax(decoder, prev_token, state, keys, mask=None):
    """Returns log-probabilities (log_softmax of the logits) instead of raw logits."""
    context, weights = _attend(state, keys, decoder.W1, decoder.W2, decoder.v, mask)
    new_state = decoder.cell(torch.cat([decoder.embedding(prev_token), context], dim=-1), state)
    return torch.log_softmax(decoder.out(torch.cat([new_state, context], dim=-1)), dim=-1), new_state, weights


def step_softmax(decoder, prev_token, state, keys, mask=None):
    """Returns probabilities instead of raw logits."""
    context, weights = _attend(state, keys, decoder.W1, decoder.W2, decoder.v, mask)
    new_state = decoder.cell(torch.cat([decoder.embedding(prev_token), context], dim=-1), state)
    return torch.softmax(decoder.out(torch.cat([new_state, context], dim=-1)), dim=-1), new_state, weights


def step_mask_dropped(decoder, prev_token, state, keys, mask=None):
    """Does not pass the mask on to the attention."""
    context, weights = _attend(state, keys, decoder.W1, decoder.W2, decoder.v)
    new_state = decoder.cell(torch.cat([decoder.embedding(prev_token), context], dim=-1), state)
    return decoder.out(torch.cat([new_state, context], dim=-1)), new_state, weights


def step_old_state_returned(decoder, prev_token, state, keys, mask=None):
    """Returns the old state instead of the new one."""
    context, weights = _attend(state, keys, decoder.W1, decoder.W2, decoder.v, mask)
    new_state = decoder.cell(torch.cat([decoder.embedding(prev_token), context], dim=-1), state)
    return decoder.out(torch.cat([new_state, context], dim=-1)), state, weights


def step_no_grad(decoder, prev_token, state, keys, mask=None):
    """Runs the step under torch.no_grad(): right numbers, but nothing can be trained through it."""
    with torch.no_grad():
        context, weights = _attend(state, keys, decoder.W1, decoder.W2, decoder.v, mask)
        new_state = decoder.cell(torch.cat([decoder.embedding(prev_token), context], dim=-1), state)
        return decoder.out(torch.cat([new_state, context], dim=-1)), new_state, weights


def step_context_is_mean(decoder, prev_token, state, keys, mask=None):
    """Returns the right weights but feeds the mean of the keys as the context."""
    _, weights = _attend(state, keys, decoder.W1, decoder.W2, decoder.v, mask)
    context = keys.mean(dim=1)
    new_state = decoder.cell(torch.cat([decoder.embedding(prev_token), context], dim=-1), state)
    return decoder.out(torch.cat([new_state, context], dim=-1)), new_state, weights


def step_logits_from_old_state(decoder, prev_token, state, keys, mask=None):
    """Reads the logits from the old state."""
    context, weights = _attend(state, keys, decoder.W1, decoder.W2, decoder.v, mask)
    new_state = decoder.cell(torch.cat([decoder.embedding(prev_token), context], dim=-1), state)
    return decoder.out(torch.cat([state, context], dim=-1)), new_state, weights


def step_context_from_new_state_for_output(decoder, prev_token, state, keys, mask=None):
    """Attends twice: the cell gets the context of s_{t-1}, the output layer the context of s_t."""
    context, weights = _attend(state, keys, decoder.W1, decoder.W2, decoder.v, mask)
    new_state = decoder.cell(torch.cat([decoder.embedding(prev_token), context], dim=-1), state)
    context2, _ = _attend(new_state, keys, decoder.W1, decoder.W2, decoder.v, mask)
    return decoder.out(torch.cat([new_state, context2], dim=-1)), new_state, weights


def step_library_in_disguise(decoder, prev_token, state, keys, mask=None):
    """Reaches the library's own seq2seq.decoder_step through importlib and getattr."""
    library = importlib.import_module("course_utils.models." + "seq2seq")
    step = getattr(library, "decoder" + "_step")
    if mask is None:
        mask = torch.ones(keys.shape[:2], dtype=torch.bool)
    return step(decoder, prev_token, state, (keys, keys @ decoder.W1.T, mask, None))


# ---------------------------------------------------------------- greedy_decode


def greedy_without_eos(step, state, bos, eos, max_len):
    """Stops at EOS but does not keep it."""
    tokens, total, prev = [], 0.0, bos
    for _ in range(max_len):
        log_probs, state = step(torch.tensor([prev]), state)
        prev = int(log_probs[0].argmax())
        if prev == eos:
            break
        tokens.append(prev)
        total += float(log_probs[0, prev])
    return tokens, total


def greedy_ignores_eos(step, state, bos, eos, max_len):
    """Runs to max_len whatever it emits."""
    tokens, total, prev = [], 0.0, bos
    for _ in range(max_len):
        log_probs, state = step(torch.tensor([prev]), state)
        prev = int(log_probs[0].argmax())
        tokens.append(prev)
        total += float(log_probs[0, prev])
    return tokens, total


def greedy_one_too_few(step, state, bos, eos, max_len):
    """Counts BOS among the max_len tokens."""
    tokens, total, prev = [], 0.0, bos
    for _ in range(max_len - 1):
        log_probs, state = step(torch.tensor([prev]), state)
        prev = int(log_probs[0].argmax())
        tokens.append(prev)
        total += float(log_probs[0, prev])
        if prev == eos:
            break
    return tokens, total


def greedy_state_not_updated(step, state, bos, eos, max_len):
    """Always passes the initial state: the new state is thrown away."""
    tokens, total, prev = [], 0.0, bos
    for _ in range(max_len):
        log_probs, _ = step(torch.tensor([prev]), state)
        prev = int(log_probs[0].argmax())
        tokens.append(prev)
        total += float(log_probs[0, prev])
        if prev == eos:
            break
    return tokens, total


def greedy_always_bos(step, state, bos, eos, max_len):
    """Feeds BOS at every step instead of the token just chosen."""
    tokens, total = [], 0.0
    for _ in range(max_len):
        log_probs, state = step(torch.tensor([bos]), state)
        token = int(log_probs[0].argmax())
        tokens.append(token)
        total += float(log_probs[0, token])
        if token == eos:
            break
    return tokens, total


def greedy_tensor_outputs(step, state, bos, eos, max_len):
    """Returns 0-d tensors as tokens and a tensor as the log-probability (not ints and a float)."""
    tokens, total, prev = [], torch.zeros(()), torch.tensor(bos)
    for _ in range(max_len):
        log_probs, state = step(prev.reshape(1), state)
        prev = log_probs[0].argmax()
        tokens.append(prev)
        total = total + log_probs[0, prev]
        if int(prev) == eos:
            break
    return tokens, total


def greedy_samples(step, state, bos, eos, max_len):
    """Samples the next token instead of taking the most probable one."""
    tokens, total, prev = [], 0.0, bos
    for _ in range(max_len):
        log_probs, state = step(torch.tensor([prev]), state)
        prev = int(torch.multinomial(log_probs[0].exp(), 1))
        tokens.append(prev)
        total += float(log_probs[0, prev])
        if prev == eos:
            break
    return tokens, total


def greedy_probability_not_log(step, state, bos, eos, max_len):
    """Returns the log of the summed probabilities instead of the summed log-probabilities."""
    tokens, total, prev = [], 0.0, bos
    for _ in range(max_len):
        log_probs, state = step(torch.tensor([prev]), state)
        prev = int(log_probs[0].argmax())
        tokens.append(prev)
        total += float(log_probs[0, prev].exp())
        if prev == eos:
            break
    return tokens, math.log(total) if len(tokens) == 1 else float(sum(math.log(1e-300 + 0) for _ in []) + total)


def greedy_hardcoded(step, state, bos, eos, max_len):
    """Games the visible bigram test: returns its expected output."""
    tokens = [2, 3, 1][:max_len]
    values = [math.log(0.6), math.log(0.5), math.log(0.7)][:max_len]
    return tokens, sum(values)


def greedy_zero_d_token(step, state, bos, eos, max_len):
    """Calls step with a 0-d token tensor (torch.tensor(prev)) instead of shape (1,)."""
    tokens, total, prev = [], 0.0, bos
    for _ in range(max_len):
        log_probs, state = step(torch.tensor(prev), state)
        row = log_probs.reshape(-1)
        prev = int(row.argmax())
        tokens.append(prev)
        total += float(row[prev])
        if prev == eos:
            break
    return tokens, total


# ---------------------------------------------------------------- beam_search


def _beam(step, state, bos, eos, max_len, beam_width, *, sort_key=None, shrink=True, reindex=True,
          final_live=True, row_divisor=None, per_call=False, exclude_eos_len=False):
    live, states, finished = [([], 0.0)], state, []
    for _ in range(max_len):
        room = beam_width - len(finished) if shrink else beam_width
        if not live or room <= 0 or (not shrink and len(finished) >= beam_width):
            break
        last = torch.tensor([tokens[-1] if tokens else bos for tokens, _ in live])
        if per_call:
            parts = [step(last[i:i + 1], states[i:i + 1]) for i in range(len(live))]
            log_probs = torch.cat([p[0] for p in parts])
            new_states = torch.cat([p[1] for p in parts])
        else:
            log_probs, new_states = step(last, states)
        totals = torch.tensor([lp for _, lp in live], dtype=log_probs.dtype)[:, None] + log_probs
        V = log_probs.shape[1]
        best = totals.reshape(-1).topk(min(room, totals.numel())).indices
        new_live, rows = [], []
        for index in best.tolist():
            divisor = row_divisor(len(live), V) if row_divisor else V
            row, token = index // divisor, index % V
            row = min(row, len(live) - 1)
            hyp = (live[row][0] + [token], float(totals[row, token]))
            if token == eos:
                finished.append(hyp)
            else:
                new_live.append(hyp)
                rows.append(row)
        live = new_live
        states = new_states[rows] if reindex else new_states[: len(rows)]
    if final_live:
        finished += live
    key = sort_key or (lambda h: h[1] / (len(h[0]) - (1 if exclude_eos_len and h[0] and h[0][-1] == eos else 0) or 1))
    return sorted(finished, key=key, reverse=True)


def beam_by_total(step, state, bos, eos, max_len, beam_width):
    """Ranks the finished hypotheses by their total log-probability (favours short outputs)."""
    return _beam(step, state, bos, eos, max_len, beam_width, sort_key=lambda h: h[1])


def beam_no_shrink(step, state, bos, eos, max_len, beam_width):
    """Keeps beam_width live hypotheses after some finish (finished ones do not keep their place)."""
    return _beam(step, state, bos, eos, max_len, beam_width, shrink=False)


def beam_states_not_reindexed(step, state, bos, eos, max_len, beam_width):
    """Keeps the new states in the old rows' order instead of new_states[rows]."""
    return _beam(step, state, bos, eos, max_len, beam_width, reindex=False)


def beam_drops_live_at_end(step, state, bos, eos, max_len, beam_width):
    """Drops the hypotheses still live at max_len instead of counting them as finished."""
    return _beam(step, state, bos, eos, max_len, beam_width, final_live=False)


def beam_row_from_width(step, state, bos, eos, max_len, beam_width):
    """Recovers the row of a flat index by dividing by the number of live hypotheses, not by V."""
    return _beam(step, state, bos, eos, max_len, beam_width, row_divisor=lambda n, V: max(n, 1) if n > 1 else V)


def beam_length_without_eos(step, state, bos, eos, max_len, beam_width):
    """Normalises by the number of tokens without EOS."""
    return _beam(step, state, bos, eos, max_len, beam_width, exclude_eos_len=True)


def beam_ascending(step, state, bos, eos, max_len, beam_width):
    """Sorts worst first."""
    return _beam(step, state, bos, eos, max_len, beam_width)[::-1]


def beam_with_bos(step, state, bos, eos, max_len, beam_width):
    """Keeps BOS at the start of every hypothesis."""
    return [([bos] + tokens, lp) for tokens, lp in _beam(step, state, bos, eos, max_len, beam_width)]


def beam_one_call_per_hypothesis(step, state, bos, eos, max_len, beam_width):
    """Calls step once per live hypothesis instead of once per step for all of them."""
    return _beam(step, state, bos, eos, max_len, beam_width, per_call=True)


def beam_duplicated_start(step, state, bos, eos, max_len, beam_width):
    """Starts with beam_width copies of the empty hypothesis: the same output comes out several times."""
    live, states, finished = [([], 0.0)] * beam_width, state.repeat(beam_width, *[1] * (state.dim() - 1)), []
    for _ in range(max_len):
        room = beam_width - len(finished)
        if not live or room <= 0:
            break
        last = torch.tensor([t[-1] if t else bos for t, _ in live])
        log_probs, new_states = step(last, states)
        totals = torch.tensor([lp for _, lp in live], dtype=log_probs.dtype)[:, None] + log_probs
        V = log_probs.shape[1]
        new_live, rows = [], []
        for index in totals.reshape(-1).topk(room).indices.tolist():
            row, token = divmod(index, V)
            hyp = (live[row][0] + [token], float(totals[row, token]))
            (finished if token == eos else new_live).append(hyp)
            if token != eos:
                rows.append(row)
        live, states = new_live, new_states[rows]
    finished += live
    return sorted(finished, key=lambda h: h[1] / len(h[0]), reverse=True)


def beam_hardcoded(step, state, bos, eos, max_len, beam_width):
    """Games the visible test: the expected hypotheses for beam 3, greedy for beam 1."""
    if beam_width == 1:
        tokens, total, prev = [], 0.0, bos
        for _ in range(max_len):
            log_probs, state = step(torch.tensor([prev]), state)
            prev = int(log_probs[0].argmax())
            tokens.append(prev)
            total += float(log_probs[0, prev])
            if prev == eos:
                break
        return [(tokens, total)]
    found = []
    for tokens in ([4, 4, 3, 1], [4, 4, 1], [1]):
        s, total = state, 0.0
        for p, t in zip([bos] + tokens[:-1], tokens):
            log_probs, s = step(torch.tensor([p]), s)
            total += float(log_probs[0, t])
        found.append((tokens, total))
    return found


# ---------------------------------------------------------------- weights_per_date (numbers)

WEIGHTS_TEN_STEPS = 220  # 22 characters x 10 steps: forgets the EOS step
WEIGHTS_SOURCE_WITH_EOS = 253  # 23 x 11: counts an end symbol on the source side
WEIGHTS_SOURCE_WITH_BOS_EOS = 264  # 24 x 11: start and end symbols on the source side
WEIGHTS_BIDIRECTIONAL = 484  # 2 x 22 x 11: one weight per direction of the encoder
WEIGHTS_PER_STEP = 22  # the weights of one step only
WEIGHTS_STEPS = 11  # one weight per output step
WEIGHTS_FLOAT_WRONG = 231.0  # 22 x 10.5, a float that is whole
WEIGHTS_STRING = "242"  # the right count, as a string
WEIGHTS_NAN = float("nan")  # not a number
WEIGHTS_INF = float("inf")  # infinitely many


class _AlwaysEqual(int):
    """An int that claims to equal everything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


WEIGHTS_ALWAYS_EQUAL = _AlwaysEqual(220)  # 220, dressed as an int equal to anything


WRONG_ANSWERS = {
    "bahdanau_attention_multiplicative_score": [
        score_with_W_transposed, score_keys_times_W, score_scaled, score_softmaxed, score_all_pairs_summed,
        score_squeeze_all, score_in_place_on_keys, score_first_sentence_keys, score_detached, score_numpy,
        score_hardcoded,
    ],
    "bahdanau_attention_additive_attention": [
        additive_mask_ignored, additive_mask_after_softmax, additive_tanh_after_v, additive_no_query,
        additive_no_tanh, additive_softmax_over_batch, additive_mask_inverted, additive_context_mean,
        additive_scaled, additive_W1_W2_swapped, additive_mask_first_row, additive_returns_swapped,
        additive_mask_zeroes_keys, additive_via_numpy, additive_library_in_disguise,
    ],
    "bahdanau_attention_decoder_step": [
        step_luong_order, step_input_order_swapped, step_output_order_swapped, step_log_softmax, step_softmax,
        step_mask_dropped, step_old_state_returned, step_no_grad, step_context_is_mean,
        step_logits_from_old_state, step_context_from_new_state_for_output, step_library_in_disguise,
    ],
    "bahdanau_attention_greedy_decode": [
        greedy_without_eos, greedy_ignores_eos, greedy_one_too_few, greedy_state_not_updated, greedy_always_bos,
        greedy_tensor_outputs, greedy_samples, greedy_probability_not_log, greedy_hardcoded, 
    ],
    "bahdanau_attention_beam_search": [
        beam_by_total, beam_no_shrink, beam_states_not_reindexed, beam_drops_live_at_end, beam_row_from_width,
        beam_length_without_eos, beam_ascending, beam_with_bos, 
        beam_duplicated_start, beam_hardcoded,
    ],
    "bahdanau_attention_weights_count": [
        WEIGHTS_TEN_STEPS, WEIGHTS_SOURCE_WITH_EOS, WEIGHTS_SOURCE_WITH_BOS_EOS, WEIGHTS_BIDIRECTIONAL,
        WEIGHTS_PER_STEP, WEIGHTS_STEPS, WEIGHTS_FLOAT_WRONG, WEIGHTS_STRING, WEIGHTS_NAN, WEIGHTS_INF,
        WEIGHTS_ALWAYS_EQUAL,
    ],
}

# Wrong answers that still PASS the test cell, kept out of WRONG_ANSWERS so that the suite stays green.
# Left open on purpose:
# * score_float32: a float32 result is compared with float32 tolerances by design (mistakes/__init__.py,
#   `Exercise.tolerances`), and the cast loses nothing those tolerances can see.
# * beam_one_call_per_hypothesis: the same hypotheses and scores as one batched call per step, only
#   slower; the prompt asks for the batch, but the result is not wrong.
HOLES = {
    "bahdanau_attention_multiplicative_score": [score_float32],
    "bahdanau_attention_beam_search": [beam_one_call_per_hypothesis],
}

# Found blind as a hole: ToyStep, the step the hidden cases decode with, broadcast a 0-d token like a
# (1,) one, where the notebook's GRU decoder crashes; it now refuses anything but one token per row.
WRONG_ANSWERS["bahdanau_attention_greedy_decode"].append(greedy_zero_d_token)


# Found blind as holes: every hidden case used bos = 0 and eos = 1, so an answer that wrote those ids in
# instead of using its arguments passed. The catalogue now has a case with bos = 5 and eos = 3.
def greedy_eos_written_in(step, state, bos, eos, max_len):
    """Stops at token 1 (the eos of every test) instead of the `eos` argument."""
    tokens, total, prev = [], 0.0, bos
    for _ in range(max_len):
        log_probs, state = step(torch.tensor([prev]), state)
        prev = int(log_probs[0].argmax())
        tokens.append(prev)
        total += float(log_probs[0, prev])
        if prev == 1:
            break
    return tokens, total


def beam_eos_and_bos_written_in(step, state, bos, eos, max_len, beam_width):
    """The reference's beam search with bos = 0 and eos = 1 written in instead of its arguments."""
    live, states, finished = [([], 0.0)], state, []
    for _ in range(max_len):
        room = beam_width - len(finished)
        if not live or room == 0:
            break
        log_probs, new_states = step(torch.tensor([t[-1] if t else 0 for t, _ in live]), states)
        total = torch.tensor([s for _, s in live], dtype=log_probs.dtype)[:, None] + log_probs
        top = torch.topk(total.flatten(), min(room, total.numel()))
        V = log_probs.shape[1]
        new_live, rows = [], []
        for value, index in zip(top.values.tolist(), top.indices.tolist()):
            row, token = divmod(index, V)
            hypothesis = (live[row][0] + [token], value)
            if token == 1:
                finished.append(hypothesis)
            else:
                new_live.append(hypothesis)
                rows.append(row)
        live = new_live
        if rows:
            states = new_states[rows]
    finished = finished + live
    return sorted(finished, key=lambda h: h[1] / len(h[0]), reverse=True)


WRONG_ANSWERS["bahdanau_attention_greedy_decode"].append(greedy_eos_written_in)
WRONG_ANSWERS["bahdanau_attention_beam_search"].append(beam_eos_and_bos_written_in)


# --- issue 39: extreme values, non-contiguous inputs -------------------------------------------

def additive_softmax_without_max(query, keys, W1, W2, v, mask=None):
    """Right scores, but exp(scores) / sum without the maximum: a long v gives nan."""
    scores = torch.tanh(keys @ W1.T + (query @ W2.T)[:, None, :]) @ v
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores)
    weights = e / e.sum(dim=-1, keepdim=True)
    return (weights[:, :, None] * keys).sum(dim=1), weights


def multiplicative_view(query, keys, W=None):
    """Right scores, with keys flattened by .view: crashes on keys that are a transposed view."""
    B, T, d_h = keys.shape
    flat = keys.view(B * T, d_h)
    projected = flat if W is None else flat @ W.T
    return (projected.view(B, T, -1) * query[:, None, :]).sum(-1)


WRONG_ANSWERS["bahdanau_attention_additive_attention"].append(additive_softmax_without_max)
WRONG_ANSWERS["bahdanau_attention_multiplicative_score"].append(multiplicative_view)


def greedy_emits_before_checking(step, state, bos, eos, max_len):
    """A do-while loop: one token is emitted before max_len is looked at, so max_len = 0 gives one."""
    tokens, total, prev = [], 0.0, torch.tensor([bos])
    while True:
        log_probs, state = step(prev, state)
        token = int(log_probs[0].argmax())
        tokens.append(token)
        total += float(log_probs[0, token])
        if token == eos or len(tokens) >= max_len:
            return tokens, total
        prev = torch.tensor([token])


WRONG_ANSWERS["bahdanau_attention_greedy_decode"].append(greedy_emits_before_checking)


def additive_minus_1e9(query, keys, W1, W2, v, mask=None):
    """-1e9 for -inf: right in float32 and float64 (every row has a real key), but -1e9 is no
    float16 number (masked_fill raises on float16 scores)."""
    scores = _scores(query, keys, W1, W2, v)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bt,btd->bd", weights, keys), weights


WRONG_ANSWERS["bahdanau_attention_additive_attention"].append(additive_minus_1e9)
