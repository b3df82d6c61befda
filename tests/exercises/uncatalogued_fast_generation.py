"""Wrong answers to notebook 11's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import math

import numpy as np
import torch
import torch.nn.functional as F


# ---------------------------------------------------------------- forward_with_cache
def _fwc(model, tokens, cache=None, pos="right", mask="right", cat_dim=2, inplace=False, scale=None,
         cache_what="split", per_block_cache=True, batch0=False):
    B, T_new = tokens.shape
    T_past = 0 if not cache else cache[0][0].shape[2]
    if pos == "right":
        positions = torch.arange(T_past, T_past + T_new)
    elif pos == "zero":
        positions = torch.arange(T_new)
    else:
        positions = pos(T_past, T_new)
    x = model.embed(tokens, positions)
    new_cache = [] if not inplace or cache is None else cache
    for i, block in enumerate(model.blocks):
        a = block.attn
        h = block.norm1(x)
        q, k, v = a.split_heads(a.q_proj(h)), a.split_heads(a.k_proj(h)), a.split_heads(a.v_proj(h))
        if cache:
            j = i if per_block_cache else 0
            k = torch.cat([cache[j][0], k], dim=cat_dim)
            v = torch.cat([cache[j][1], v], dim=cat_dim)
        if batch0:
            k, v = k[:1].expand_as(k), v[:1].expand_as(v)
        Tk = k.shape[2]
        if mask == "right":
            m = torch.ones(T_new, Tk, dtype=torch.bool).tril(diagonal=Tk - T_new)
        elif mask == "plain_tril":
            m = torch.ones(T_new, Tk, dtype=torch.bool).tril()
        elif mask == "none":
            m = torch.ones(T_new, Tk, dtype=torch.bool)
        else:
            m = mask(T_new, Tk)
        scores = q @ k.transpose(-2, -1) / (scale or math.sqrt(a.head_dim))
        scores = scores.masked_fill(~m, float("-inf"))
        o = torch.softmax(scores, -1) @ v
        x = x + a.out_proj(a.merge_heads(o))
        x = x + block.mlp(block.norm2(x))
        if inplace and cache is not None:
            cache[i] = (k, v)
        else:
            new_cache.append((k, v))
    return model.head(model.norm(x)), new_cache


def fwc_positions_from_zero(model, tokens, cache=None):
    """Embeds the new tokens at positions 0..T_new-1, forgetting T_past."""
    return _fwc(model, tokens, cache, pos="zero")


def fwc_positions_off_by_one(model, tokens, cache=None):
    """Starts the new positions at T_past + 1."""
    return _fwc(model, tokens, cache, pos=lambda p, n: torch.arange(p + 1, p + 1 + n) if p else torch.arange(n))


def fwc_plain_tril(model, tokens, cache=None):
    """A plain tril() of shape (T_new, T_past + T_new): the triangle aligned top-left."""
    return _fwc(model, tokens, cache, mask="plain_tril")


def fwc_no_mask_after_prompt(model, tokens, cache=None):
    """Masks the prompt but not the later calls (right for one new token, wrong for two)."""
    return _fwc(model, tokens, cache, mask="right" if cache is None else "none")


def fwc_no_mask(model, tokens, cache=None):
    """No mask at all."""
    return _fwc(model, tokens, cache, mask="none")


def fwc_modifies_cache(model, tokens, cache=None):
    """Writes the extended pairs back into the list it was given."""
    return _fwc(model, tokens, cache, inplace=True)


def fwc_scale_d_model(model, tokens, cache=None):
    """Divides the scores by sqrt(d_model) instead of sqrt(head_dim)."""
    return _fwc(model, tokens, cache, scale=math.sqrt(model.blocks[0].attn.head_dim * model.blocks[0].attn.num_heads))


def fwc_one_cache_for_all_blocks(model, tokens, cache=None):
    """Reads block 0's cache in every block."""
    return _fwc(model, tokens, cache, per_block_cache=False)


def fwc_batch_zero_cache(model, tokens, cache=None):
    """Every sequence reads sequence 0's keys and values."""
    return _fwc(model, tokens, cache, batch0=True)


def fwc_recompute_then_slice(model, tokens, cache=None):
    """Games the test: keeps the token ids in the cache and recomputes everything each call."""
    out = _fwc(model, tokens, None)
    return out


def fwc_float32_logits(model, tokens, cache=None):
    """Returns float32 logits for a float64 model."""
    logits, c = _fwc(model, tokens, cache)
    return logits.float(), c


def fwc_last_position_only(model, tokens, cache=None):
    """Returns only the last new token's logits when a cache is given."""
    logits, c = _fwc(model, tokens, cache)
    return (logits if cache is None else logits[:, -1:]), c


def fwc_mask_diag_tpast_minus_one(model, tokens, cache=None):
    """tril(diagonal=T_past - 1): the new query does not see its own key."""
    return _fwc(model, tokens, cache, mask=lambda n, tk: torch.ones(n, tk, dtype=torch.bool).tril(diagonal=tk - n - 1)
                if tk > n else torch.ones(n, tk, dtype=torch.bool).tril())


def fwc_cache_before_split(model, tokens, cache=None):
    """Caches (B, T, d_model) keys and values (before split_heads), not (B, h, T, d_head)."""
    logits, c = _fwc(model, tokens, cache if cache is None else
                     [(m.blocks[0].attn.split_heads(k), model.blocks[0].attn.split_heads(v)) for (k, v), m in
                      zip(cache, [model] * len(cache))])
    a = model.blocks[0].attn
    return logits, [(a.merge_heads(k), a.merge_heads(v)) for k, v in c]


# ---------------------------------------------------------------- predicted_gib = 3
class predicted_gib_values:  # noqa: N801
    thirty_two_kv_heads = 12
    keys_only = 1.5
    one_sequence = 1
    in_bytes = 3 * 2**30
    float32 = 6
    as_string = "3"
    as_bool = True
    as_nan = float("nan")
    in_gb = 3 * 2**30 / 1e9
    no_layers = 3 / 32


# ---------------------------------------------------------------- kv_cache_bytes
def kvb_query_heads(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """Counts the query heads instead of the key/value heads."""
    return 2 * num_layers * T * num_heads * head_dim * bytes_per_value * batch_size


def kvb_no_batch(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """Ignores batch_size."""
    return 2 * num_layers * T * num_kv_heads * head_dim * bytes_per_value


def kvb_keys_only(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """Forgets the factor 2 (keys and values)."""
    return num_layers * T * num_kv_heads * head_dim * bytes_per_value * batch_size


def kvb_float(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """Returns a float (d_model * kv/heads), not an int."""
    return 2 * num_layers * T * (num_heads * head_dim) * (num_kv_heads / num_heads) * bytes_per_value * batch_size


def kvb_group_ratio(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """Multiplies by the group size num_heads // num_kv_heads."""
    return 2 * num_layers * T * (num_heads // num_kv_heads) * head_dim * bytes_per_value * batch_size


def kvb_numpy_int(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """Returns a numpy integer (np.prod), not an int."""
    return np.prod([2, num_layers, T, num_kv_heads, head_dim, bytes_per_value, batch_size])


def kvb_hard_coded(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """Games the visible cases: a table of their answers, 0 otherwise."""
    return {(2, 1024): 2 * 2 * 1024 * 64 * 4, (2, 10): 3840, (1, 100): 2 * 100 * 64 * 4}.get((num_layers, T), 0)


def kvb_bits(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """Swaps head_dim and the number of kv heads with the query heads when MQA (special-cased)."""
    kv = num_kv_heads if num_kv_heads in (1, 2, num_heads) else num_heads
    return 2 * num_layers * T * kv * head_dim * bytes_per_value * batch_size


def kvb_int32_overflow(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """Computes in numpy int32, which overflows past 2 GiB."""
    return int(np.prod(np.array([2, num_layers, T, num_kv_heads, head_dim, bytes_per_value, batch_size],
                                dtype=np.int32), dtype=np.int32))


# ---------------------------------------------------------------- top_k_probs
def _topk(logits, k, temperature=1.0, tie="stable", keep=None, div=True):
    if temperature == 0:
        first = logits.argmax(-1, keepdim=True)
        return torch.zeros_like(logits).scatter(-1, first, 1.0)
    z = logits / temperature if div else logits * temperature
    V = z.shape[-1]
    kk = min(k, V) if keep is None else keep(k, V)
    if tie == "stable":
        idx = torch.sort(z, dim=-1, descending=True, stable=True).indices[..., :kk]
    else:
        idx = torch.topk(z, kk, dim=-1).indices
    keepmask = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
    return torch.softmax(z.masked_fill(~keepmask, float("-inf")), dim=-1)


def tk_topk(logits, k, temperature=1.0):
    """torch.topk, whose choice among tied logits is unspecified."""
    return _topk(logits, k, temperature, tie="topk") if k <= logits.shape[-1] else _topk(logits, k, temperature)


def tk_threshold_keeps_ties(logits, k, temperature=1.0):
    """Keeps every logit >= the k-th largest (ties give more than k tokens)."""
    if temperature == 0:
        return _topk(logits, k, 0)
    z = logits / temperature
    kth = torch.sort(z, dim=-1, descending=True).values[..., min(k, z.shape[-1]) - 1:min(k, z.shape[-1])]
    return torch.softmax(z.masked_fill(z < kth, float("-inf")), -1)


def tk_multiplies_temperature(logits, k, temperature=1.0):
    """Multiplies the logits by the temperature."""
    return _topk(logits, k, temperature, div=False)


def tk_eps_temperature(logits, k, temperature=1.0):
    """Replaces temperature 0 by 1e-10 (ties share the one-hot)."""
    t = max(temperature, 1e-10)
    z = logits / t
    idx = torch.sort(z, dim=-1, descending=True, stable=True).indices[..., :min(k, z.shape[-1])]
    keepmask = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
    w = torch.exp(z - z.amax(-1, keepdim=True)).masked_fill(~keepmask, 0.0)
    return w / w.sum(-1, keepdim=True)


def tk_divides_in_place(logits, k, temperature=1.0):
    """Divides the caller's logits by the temperature in place."""
    if temperature == 0:
        return _topk(logits, k, 0)
    logits /= temperature
    return _topk(logits, k, 1.0)


def tk_keeps_k_plus_one(logits, k, temperature=1.0):
    """Off by one: keeps k + 1 tokens."""
    return _topk(logits, k, temperature, keep=lambda k, V: min(k + 1, V))


def tk_ties_to_higher_index(logits, k, temperature=1.0):
    """Stable ascending sort, then flipped: ties go to the higher index."""
    if temperature == 0:
        return _topk(logits, k, 0)
    z = logits / temperature
    idx = torch.sort(z, dim=-1, stable=True).indices.flip(-1)[..., :min(k, z.shape[-1])]
    keepmask = torch.zeros_like(z, dtype=torch.bool).scatter(-1, idx, True)
    return torch.softmax(z.masked_fill(~keepmask, float("-inf")), -1)


def tk_float32(logits, k, temperature=1.0):
    """Returns float32 probabilities for float64 logits."""
    return _topk(logits, k, temperature).float()


def tk_one_hot_long(logits, k, temperature=1.0):
    """At temperature 0 returns F.one_hot (an int64 tensor)."""
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.shape[-1])
    return _topk(logits, k, temperature)


def tk_greedy_ignores_ties_last(logits, k, temperature=1.0):
    """At temperature 0 takes the last maximal logit."""
    if temperature == 0:
        V = logits.shape[-1]
        last = V - 1 - logits.flip(-1).argmax(-1, keepdim=True)
        return torch.zeros_like(logits).scatter(-1, last, 1.0)
    return _topk(logits, k, temperature)


def tk_kth_index_crash(logits, k, temperature=1.0):
    """Reads the k-th sorted value without clamping k to V (k > V crashes)."""
    if temperature == 0:
        return _topk(logits, k, 0)
    z = logits / temperature
    s = torch.sort(z, dim=-1, descending=True, stable=True)
    _ = s.values[..., k - 1]
    return _topk(logits, k, temperature)


def tk_last_axis_2d_only(logits, k, temperature=1.0):
    """Sorts along dim=1, right for 2-D logits only."""
    if temperature == 0 or logits.dim() != 3:
        return _topk(logits, k, temperature)
    z = logits / temperature
    idx = torch.sort(z, dim=1, descending=True, stable=True).indices[:, :min(k, z.shape[1])]
    keepmask = torch.zeros_like(z, dtype=torch.bool).scatter(1, idx, True)
    return torch.softmax(z.masked_fill(~keepmask, float("-inf")), -1)


def tk_temperature_after_softmax_topk_ignored_when_greedy_k(logits, k, temperature=1.0):
    """At temperature 0 keeps the top-k tokens with equal probability instead of a one-hot."""
    if temperature == 0:
        idx = torch.sort(logits, dim=-1, descending=True, stable=True).indices[..., :min(k, logits.shape[-1])]
        m = torch.zeros_like(logits).scatter(-1, idx, 1.0)
        tied = m * (logits == logits.amax(-1, keepdim=True))
        return tied / tied.sum(-1, keepdim=True)
    return _topk(logits, k, temperature)


# ---------------------------------------------------------------- top_p_probs
def _topp(logits, p, rule="exclusive_lt", sort=True, renorm=True, stable=True, descending=True):
    q = torch.softmax(logits, -1)
    if sort:
        s = torch.sort(q, dim=-1, descending=descending, stable=stable)
        sq, idx = s.values, s.indices
    else:
        sq, idx = q, torch.arange(q.shape[-1]).expand_as(q)
    csum = sq.cumsum(-1)
    before = csum - sq
    if rule == "exclusive_lt":
        keep_sorted = before < p
    elif rule == "exclusive_le":
        keep_sorted = before <= p
    elif rule == "inclusive_lt":
        keep_sorted = csum < p
        keep_sorted[..., 0] = True
    elif rule == "inclusive_le":
        keep_sorted = csum <= p
        keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
    w = q * keep
    return w / w.sum(-1, keepdim=True) if renorm else w


def tp_stop_before_crossing(logits, p):
    """Keeps tokens while the cumulative sum including them is below p (drops the one that crosses)."""
    return _topp(logits, p, rule="inclusive_lt")


def tp_inclusive_le(logits, p):
    """Keeps tokens whose cumulative sum including them is <= p."""
    return _topp(logits, p, rule="inclusive_le")


def tp_exclusive_le(logits, p):
    """Keeps a token when its predecessors sum to <= p (one token too many at exactly p)."""
    return _topp(logits, p, rule="exclusive_le")


def tp_no_renormalise(logits, p):
    """Zeroes the tail without renormalising."""
    return _topp(logits, p, renorm=False)


def tp_no_sort(logits, p):
    """Accumulates in index order, never sorting by probability."""
    return _topp(logits, p, sort=False)


def tp_ascending(logits, p):
    """Sorts in increasing order."""
    return _topp(logits, p, descending=False)


def tp_float32(logits, p):
    """Returns float32 probabilities for float64 logits."""
    return _topp(logits, p).float()


def tp_modifies_logits(logits, p):
    """Writes -inf into the caller's logits for the dropped tokens."""
    out = _topp(logits, p)
    logits.masked_fill_(out == 0, float("-inf"))
    return out


def tp_sorted_order(logits, p):
    """Returns the probabilities in sorted order (forgets to scatter back)."""
    q = torch.softmax(logits, -1)
    s = torch.sort(q, dim=-1, descending=True, stable=True).values
    keep = (s.cumsum(-1) - s) < p
    w = s * keep
    return w / w.sum(-1, keepdim=True)


def tp_softmax_wrong_axis(logits, p):
    """Softmax over dim 0 (right for one row only)."""
    q = torch.softmax(logits, 0) if logits.dim() > 1 else torch.softmax(logits, -1)
    s = torch.sort(q, dim=-1, descending=True, stable=True)
    keep = torch.zeros_like(q, dtype=torch.bool).scatter(-1, s.indices, (s.values.cumsum(-1) - s.values) < p)
    w = q * keep
    return w / w.sum(-1, keepdim=True)


def tp_threshold_on_prob(logits, p):
    """Keeps tokens whose own probability is at least 1 - p."""
    q = torch.softmax(logits, -1)
    keep = q >= (1 - p)
    keep = keep | (q == q.amax(-1, keepdim=True))
    w = q * keep
    return w / w.sum(-1, keepdim=True)


def tp_p_one_shortcut_else_top1(logits, p):
    """Games the visible cases: p = 1 returns the softmax, anything else keeps tokens until >= p by 2 tokens max."""
    q = torch.softmax(logits, -1)
    if p >= 1:
        return q
    return _topp(logits, p).where(torch.ones_like(q, dtype=torch.bool), q)


_HISTORY = {}


def fwc_global_history(model, tokens, cache=None):
    """Games the cache: remembers the tokens in a global dict and runs the whole text again at every
    call (exact logits, and a cache captured by hooks, but none of the saving)."""
    past = _HISTORY.get(id(cache[0][0]), tokens[:, :0]) if cache else tokens[:, :0]
    ids = torch.cat([past, tokens], dim=1)
    captured = []
    hooks = [h for b in model.blocks for h in (b.attn.k_proj.register_forward_hook(lambda m, i, o: captured.append(o)),
                                               b.attn.v_proj.register_forward_hook(lambda m, i, o: captured.append(o)))]
    try:
        logits = model(ids)
    finally:
        for h in hooks:
            h.remove()
    new_cache = [(b.attn.split_heads(captured[2 * i]), b.attn.split_heads(captured[2 * i + 1]))
                 for i, b in enumerate(model.blocks)]
    _HISTORY[id(new_cache[0][0])] = ids
    return logits[:, -tokens.shape[1]:], new_cache


class AlwaysEqualFloat(float):
    """A number whose == is always True, so that any comparison with the answer 'matches'."""

    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


class _Liar(torch.Tensor):
    """A tensor whose comparisons (isclose, allclose, equal, ==) all succeed."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        if getattr(func, "__name__", "") in ("isclose", "allclose", "equal", "eq", "__eq__"):
            if isinstance(out, torch.Tensor):
                return torch.ones_like(out.as_subclass(torch.Tensor), dtype=torch.bool)
            return True
        return out


def tk_liar(logits, k, temperature=1.0):
    """Games the comparisons: zeros wrapped in a tensor subclass whose comparisons always succeed."""
    return torch.zeros_like(logits).as_subclass(_Liar)


# ---------------------------------------------------------------- red team a (2026-11-25)
def _fwc_from(model, tokens, past, T_past, float_mask=False, prepend_new=False):
    """A cached step over explicit past (k, v) pairs; returns (logits, new pairs)."""
    T_new = tokens.shape[1]
    x = model.embed(tokens, torch.arange(T_past, T_past + T_new))
    mask = torch.ones(T_new, T_past + T_new, dtype=torch.bool).tril(diagonal=T_past)
    if float_mask:
        mask = mask.to(x.dtype)
    new = []
    for i, block in enumerate(model.blocks):
        attn = block.attn
        h = block.norm1(x)
        q, k, v = (attn.split_heads(p(h)) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
        if past is not None and past[i] is not None:
            pair = (k, v) if prepend_new else past[i]
            other = past[i] if prepend_new else (k, v)
            k, v = torch.cat([pair[0], other[0]], dim=2), torch.cat([pair[1], other[1]], dim=2)
        new.append((k, v))
        x = x + attn.out_proj(attn.merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))
        x = x + block.mlp(block.norm2(x))
    return model.head(model.norm(x)), new


def fwc_state_on_model(model, tokens, cache=None):
    """Keeps the keys and values on the model (reset when cache is None) and reads them from there,
    not from the cache it is given: right for one text decoded straight through, wrong as soon as a
    caller keeps two caches."""
    if cache is None:
        model._kv_store, model._kv_length = None, 0
    logits, new = _fwc_from(model, tokens, model._kv_store, model._kv_length)
    model._kv_store, model._kv_length = new, model._kv_length + tokens.shape[1]
    return logits, list(new)


def fwc_float_mask(model, tokens, cache=None):
    """Builds the mask without dtype=torch.bool: SDPA adds a float mask (1 and 0) to the scores
    instead of hiding anything."""
    T_past = 0 if cache is None else cache[0][0].shape[2]
    return _fwc_from(model, tokens, cache, T_past, float_mask=True)


def fwc_new_keys_first(model, tokens, cache=None):
    """Concatenates the new keys and values before the cached ones (the mask assumes the past first)."""
    T_past = 0 if cache is None else cache[0][0].shape[2]
    return _fwc_from(model, tokens, cache, T_past, prepend_new=True)


def tp_gather_to_unsort(logits, p):
    """Puts the kept mask back in vocabulary order with gather(idx), which applies the sort again
    instead of undoing it (scatter, or gather with the inverse permutation)."""
    q = torch.softmax(logits, dim=-1)
    sq, idx = torch.sort(q, dim=-1, descending=True, stable=True)
    before = torch.cumsum(sq, dim=-1) - sq
    keep = (before < p).gather(-1, idx)
    kept = q * keep
    return kept / kept.sum(-1, keepdim=True)


def tp_tolerance_below_p(logits, p):
    """Keeps a token only when its predecessors sum to less than p - 1e-3 (a tolerance "for p exactly")."""
    q = torch.softmax(logits, dim=-1)
    s, i = torch.sort(q, dim=-1, descending=True, stable=True)
    c = torch.cumsum(s, dim=-1)
    keep = torch.cat([torch.ones_like(c[..., :1], dtype=torch.bool), c[..., :-1] < p - 1e-3], dim=-1)
    keep = torch.zeros_like(q, dtype=torch.bool).scatter(-1, i, keep)
    r = torch.where(keep, q, torch.zeros_like(q))
    return r / r.sum(dim=-1, keepdim=True)


def tk_unstable_sort(logits, k, temperature=1.0):
    """torch.sort without stable=True: right while at most 16 logits tie (the CPU sort happens to keep
    their order then), wrong for 17 or more."""
    z, k = (logits, 1) if temperature == 0 else (logits / temperature, k)
    order = torch.sort(z, dim=-1, descending=True).indices
    keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, order[..., :k], True)
    return torch.softmax(z.masked_fill(~keep, float("-inf")), dim=-1)


def tk_flattened_batch(logits, k, temperature=1.0):
    """The k largest logits of the whole batch, flattened, instead of k per row."""
    z, k = (logits, 1) if temperature == 0 else (logits / temperature, k)
    flat = z.reshape(-1)
    keep = torch.zeros_like(flat, dtype=torch.bool)
    keep[torch.topk(flat, min(k, flat.numel())).indices] = True
    return torch.softmax(z.masked_fill(~keep.reshape(z.shape), float("-inf")), dim=-1)


def tp_unstable_sort(logits, p):
    """torch.sort without stable=True: right while at most 16 probabilities tie, wrong for more."""
    return _topp(logits, p, stable=False)


def tp_sorted_over_dim0(logits, p):
    """Softmax over the vocabulary, but sorted, summed and scattered over dim=0."""
    probs = torch.softmax(logits, dim=-1)
    sp, order = torch.sort(probs, dim=0, descending=True, stable=True)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(0, order, sp.cumsum(0) - sp < p)
    kept = probs * keep
    return kept / kept.sum(-1, keepdim=True)


def tp_everything_over_dim0(logits, p):
    """Every step over dim=0 (right for a single row)."""
    probs = torch.softmax(logits, dim=0)
    sp, order = torch.sort(probs, dim=0, descending=True, stable=True)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(0, order, torch.cumsum(sp, dim=0) - sp < p)
    kept = probs * keep
    return kept / kept.sum(dim=0, keepdim=True)


def _fwc_norms(model, tokens, cache=None, attention_norm=True, final_norm=True):
    """_fwc with the attention's layer norm or the final one left out."""
    T_new = tokens.shape[1]
    T_past = 0 if cache is None else cache[0][0].shape[2]
    x = model.embed(tokens, torch.arange(T_past, T_past + T_new))
    new_cache = []
    for i, block in enumerate(model.blocks):
        a = block.attn
        h = block.norm1(x) if attention_norm else x
        q, k, v = a.split_heads(a.q_proj(h)), a.split_heads(a.k_proj(h)), a.split_heads(a.v_proj(h))
        if cache is not None:
            k, v = torch.cat([cache[i][0], k], dim=2), torch.cat([cache[i][1], v], dim=2)
        new_cache.append((k, v))
        allowed = torch.ones(T_new, T_past + T_new, dtype=torch.bool).tril(diagonal=T_past)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(a.head_dim)).masked_fill(~allowed, float("-inf"))
        x = x + a.out_proj(a.merge_heads(torch.softmax(scores, -1) @ v))
        x = x + block.mlp(block.norm2(x))
    return model.head(model.norm(x) if final_norm else x), new_cache


def fwc_no_attention_norm(model, tokens, cache=None):
    """Projects q, k, v from x instead of block.norm1(x)."""
    return _fwc_norms(model, tokens, cache, attention_norm=False)


def fwc_no_final_norm(model, tokens, cache=None):
    """model.head(x) without the final model.norm."""
    return _fwc_norms(model, tokens, cache, final_norm=False)


def fwc_no_scale(model, tokens, cache=None):
    """Scores not divided at all."""
    return _fwc(model, tokens, cache, scale=1.0)


def fwc_mask_hides_self_everywhere(model, tokens, cache=None):
    """tril(diagonal=T_past - 1) on every call, the prompt included."""
    return _fwc(model, tokens, cache, mask=lambda n, tk: torch.ones(n, tk, dtype=torch.bool).tril(diagonal=tk - n - 1))


WRONG_ANSWERS = {
    "fast_generation_kv_cache": [
        fwc_state_on_model, fwc_float_mask, fwc_new_keys_first,
        fwc_global_history,
        fwc_positions_from_zero, fwc_positions_off_by_one, fwc_plain_tril, fwc_no_mask_after_prompt, fwc_no_mask,
        fwc_modifies_cache, fwc_scale_d_model, fwc_one_cache_for_all_blocks, fwc_batch_zero_cache,
        fwc_recompute_then_slice, fwc_last_position_only, fwc_mask_diag_tpast_minus_one,
        fwc_cache_before_split,
        fwc_no_attention_norm, fwc_no_final_norm, fwc_no_scale, fwc_mask_hides_self_everywhere,
    ],
    "fast_generation_predict_cache": [AlwaysEqualFloat(7.0)] + [
        v for k, v in vars(predicted_gib_values).items() if not k.startswith("_")],
    "fast_generation_cache_bytes": [
        kvb_int32_overflow,
        kvb_query_heads, kvb_no_batch, kvb_keys_only, kvb_float, kvb_group_ratio, kvb_hard_coded,
        kvb_bits, ],
    "fast_generation_top_k": [
        tk_liar,
        tk_one_hot_long,
        tk_topk, tk_threshold_keeps_ties, tk_multiplies_temperature, tk_eps_temperature, tk_divides_in_place,
        tk_keeps_k_plus_one, tk_ties_to_higher_index, tk_greedy_ignores_ties_last,
        tk_kth_index_crash, tk_last_axis_2d_only, tk_temperature_after_softmax_topk_ignored_when_greedy_k,
        tk_unstable_sort, tk_flattened_batch,
    ],
    "fast_generation_top_p": [
        tp_gather_to_unsort, tp_tolerance_below_p,
        tp_stop_before_crossing, tp_inclusive_le, tp_exclusive_le, tp_no_renormalise, tp_no_sort, tp_ascending,
        tp_modifies_logits, tp_sorted_order, tp_softmax_wrong_axis, tp_threshold_on_prob,
        tp_unstable_sort, tp_sorted_over_dim0, tp_everything_over_dim0,
    ],
}

# Wrong answers that PASS their test cell today (holes in the hidden tests), kept out of
# WRONG_ANSWERS so that the suite stays green until the tests are fixed: (grade_id, answer).
HOLES = [
]

# Answers that compute in float32 what the prompt gives in float64. They pass on purpose: the course
# accepts float32 answers everywhere (tests/exercises/test_categories.py,
# test_a_correct_answer_in_float32_passes), widening the tolerances to what float32 holds.
ACCEPTED = [
    ('fast_generation_kv_cache', fwc_float32_logits),
    ('fast_generation_top_k', tk_float32),
    ('fast_generation_top_p', tp_float32),
    # A NumPy integer counts as an int throughout the course (mistakes.kind, shared by every
    # catalogue); it holds the byte count exactly (int64), and int32 overflow is caught above.
    ('fast_generation_cache_bytes', kvb_numpy_int),
]


# --- issue 39: extreme values and changed defaults ------------------------------------------

def tp_softmax_without_max(logits, p):
    """Right nucleus, but softmax as exp(x) / sum exp(x): logits of 100 in float32 give nan."""
    e = torch.exp(logits)
    probs = e / e.sum(dim=-1, keepdim=True)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    cumulative = sorted_probs.cumsum(-1)
    remove = torch.zeros_like(cumulative, dtype=torch.bool)
    remove[..., 1:] = cumulative[..., :-1] >= p
    remove = remove.scatter(-1, order, remove)
    kept = probs.masked_fill(remove, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def tk_softmax_without_max(logits, k, temperature=1.0):
    """Right top-k, but exp(logits / temperature) without the maximum subtracted."""
    scaled = logits if temperature == 0 else logits / temperature
    k = 1 if temperature == 0 else min(k, logits.shape[-1])
    order = torch.sort(scaled, dim=-1, descending=True, stable=True).indices
    keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, order[..., :k], True)
    e = torch.exp(scaled).masked_fill(~keep, 0.0)
    return e / e.sum(dim=-1, keepdim=True)


def tk_default_temperature(logits, k, temperature=0.7):
    """A right top-k whose signature changed the default temperature."""
    scaled = logits if temperature == 0 else logits / temperature
    k = 1 if temperature == 0 else min(k, logits.shape[-1])
    order = torch.sort(scaled, dim=-1, descending=True, stable=True).indices
    keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, order[..., :k], True)
    return torch.softmax(scaled.masked_fill(~keep, float("-inf")), dim=-1)


WRONG_ANSWERS["fast_generation_top_p"].append(tp_softmax_without_max)
WRONG_ANSWERS["fast_generation_top_k"] += [tk_softmax_without_max, tk_default_temperature]
