"""Mistake catalogue of notebook 11 (fast generation).

Instructor side, as secret as the reference. The hidden tests call `check(grade_id, answer)`.

* `fast_generation_kv_cache` grades `forward_with_cache(model, tokens, cache)` by a protocol,
  not one call: a random float64 `DecoderLM` reads a prompt of several tokens (cache None),
  then one token, another, two at once, one more, each time fed the cache the student's
  function returned the step before. The outputs compared are all the logits (equal to full
  recomputation `model(all tokens)`), the final cache stacked as (layers, 2, B, heads, T,
  head_dim), and whether every cache passed in came back untouched. Batches hold different
  prompts (a cache shared across the batch differs), position embeddings are random N(0, 1)
  (positions restarted at 0 differ), and after the prompt every query is one token behind
  several cached keys (a top-left causal mask hides them).
* `fast_generation_cache_bytes`: integers, compared exactly; bytes per value 4 and 1 as well
  as 2 (so forgetting the factor 2 and forgetting the bytes differ), kv heads < heads; one count
  (exercise 2's Mistral, 3 GiB) above 2^31, so a product in 32-bit integers shows.
* `fast_generation_predict_cache`: a number (GiB) the student predicts; its config is chosen
  so that every catalogued slip gives a different number.
* `fast_generation_top_k` and `fast_generation_top_p`: exact probabilities on rows with ties at
  the boundary, k larger than the vocabulary, p reached exactly (uniform rows: 0.25 and 0.5 are
  exact in binary, so every correct way of summing agrees), temperature 0 with a tied maximum,
  1-D, 2-D and 3-D logits, and rows of 20 and 32 equal logits (torch.sort without stable=True
  keeps up to 16 equal values in index order on the CPU, not more: only long ties show it).
  Rows of a batch differ, so that ranking over dim 0 or over the flattened batch shows. Their probabilities must be floating-point (an integer one-hot at
  temperature 0 fails, `DtypeKindExercise`), of either floating dtype: the course's policy is that
  a floating result may be float32 or float64 whatever the inputs' dtype, and a float32 one is
  compared at float32's tolerances (`Exercise.tolerances`; tests/exercises/test_categories.py
  tests both ways).

Every `compute` is a closure defined here (its module is the catalogue), so the forbidden-API
guard lets it use PyTorch freely, as a student may in this notebook.
"""
import copy
import dataclasses
import math

import torch

from course_utils.models.decoder_lm import DecoderLM
from course_utils.grading import GradingError
from course_utils.reference import fast_generation as reference
from course_utils.reference import mistakes as framework
from course_utils.reference.mistakes import DtypeKindExercise, Exercise, Mistake, ValueExercise

__all__ = ["EXERCISES", "HIDDEN_ONLY", "check", "diagnose"]

# The prediction question's visible test can only check that the answer is a positive number:
# the number itself is the question.
HIDDEN_ONLY = {"predict_no_factor_2_or_bytes", "predict_query_heads", "predict_no_batch",
               "predict_no_layers", "predict_gb", "predict_mib", "predict_query_heads_no_batch",
               # the visible ties are at most 5 tokens long, which the CPU's unstable sort keeps in order
               "unstable_sort"}



# --------------------------------------------------------------------------- 1. kv_cache

@dataclasses.dataclass(frozen=True)
class CacheExercise(Exercise):
    """forward_with_cache, graded over a whole decoding: prompt, then steps fed their own cache.

    A case is a dict: the model's config and state_dict, the prompt (B, P) and the chunks
    [(B, n), ...] that follow. Outputs (probe.run_decoding): all logits (B, P + sum n, V), the
    final cache stacked as (layers, 2, B, heads, T, head_dim), and a 0-d tensor that is 1.0
    when no cache passed in was modified."""

    runner: str = "decoding"


def kv_cache_cases(seed):
    with torch.random.fork_rng():  # leave the global random state of the student's notebook alone
        return _kv_cache_cases(seed)


def _kv_cache_cases(seed):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for config, batch, prompt, chunks in [
        (dict(vocab_size=11, context=32, d_model=12, num_heads=3, num_layers=2, d_ff=20), 2, 3, [1, 1, 2, 1]),
        (dict(vocab_size=7, context=32, d_model=8, num_heads=2, num_layers=1, d_ff=16), 3, 4, [1, 1, 1]),
        (dict(vocab_size=9, context=32, d_model=8, num_heads=1, num_layers=3, d_ff=8), 2, 2, [3, 1]),
    ]:
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=g)))
        model = DecoderLM(**config).double()
        with torch.no_grad():  # larger weights than at initialisation: every mistake shows clearly
            for parameter in model.parameters():
                parameter.add_(0.3 * torch.randn(parameter.shape, generator=g, dtype=torch.float64))
        tokens = torch.randint(0, config["vocab_size"], (batch, prompt + sum(chunks)), generator=g)
        pieces, start = [], prompt
        for n in chunks:
            pieces.append(tokens[:, start:start + n])
            start += n
        cases.append({"config": config, "state": copy.deepcopy(model.state_dict()),
                      "prompt": tokens[:, :prompt], "chunks": pieces})
    return cases


def _forward_variant(kind):
    """forward_with_cache with one catalogued mistake."""

    def compute(model, tokens, cache=None):
        B, T_new = tokens.shape
        past = 0 if cache is None else cache[0][0].shape[2]
        start = 0 if kind == "positions_from_zero" else past
        if kind == "positions_plus_one" and cache is not None:
            start = past + 1
        x = model.embed(tokens, torch.arange(start, start + T_new))
        if kind == "cache_not_used":
            keys_seen = T_new
            allowed = torch.ones(T_new, T_new, dtype=torch.bool).tril()
        else:
            keys_seen = past + T_new
            offset = 0 if kind == "top_left_mask" else past
            if kind == "mask_hides_self":
                offset -= 1
            allowed = torch.ones(T_new, keys_seen, dtype=torch.bool).tril(diagonal=offset)
            if kind == "no_mask" or (kind == "no_mask_after_prompt" and cache is not None):
                allowed = torch.ones(T_new, keys_seen, dtype=torch.bool)
        new_cache = [] if kind != "in_place" or cache is None else cache
        for layer, block in enumerate(model.blocks):
            attn = block.attn
            h = x if kind in ("no_block_norm", "no_attention_norm") else block.norm1(x)
            q = attn.split_heads(attn.q_proj(h))
            k_new = attn.split_heads(attn.k_proj(h))
            v_new = attn.split_heads(attn.v_proj(h))
            if cache is None:
                k, v = k_new, v_new
            else:
                k_past, v_past = cache[layer]
                if kind == "shared_across_batch":
                    k_past, v_past = k_past[:1].expand_as(k_past), v_past[:1].expand_as(v_past)
                k, v = torch.cat([k_past, k_new], dim=2), torch.cat([v_past, v_new], dim=2)
            attend_k, attend_v = (k_new, v_new) if kind == "cache_not_used" else (k, v)
            d_scale = {"scale_d_model": attn.head_dim * attn.num_heads, "no_scale": 1}.get(kind, attn.head_dim)
            scores = q @ attend_k.transpose(-2, -1) / d_scale ** 0.5
            weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
            x = x + attn.out_proj(attn.merge_heads(weights @ attend_v))
            x = x + block.mlp(x if kind == "no_block_norm" else block.norm2(x))
            if kind == "appended_twice":
                k, v = torch.cat([k, k_new], dim=2), torch.cat([v, v_new], dim=2)
            if kind == "in_place" and cache is not None:
                new_cache[layer] = (k, v)
            else:
                new_cache.append((k, v))
        return model.head(x if kind == "no_final_norm" else model.norm(x)), new_cache

    return compute


KV_CACHE_MISTAKES = (
    Mistake("positions_from_zero",
            "the new tokens got positions 0, 1, ... again: a token that continues a sequence of "
            "T_past cached tokens sits at position T_past (positions = torch.arange(T_past, T_past + T_new)).",
            _forward_variant("positions_from_zero")),
    Mistake("positions_plus_one",
            "your new tokens start at position T_past + 1: the cached tokens sit at positions "
            "0 .. T_past - 1, so the first new token is at T_past (positions = torch.arange(T_past, T_past + T_new)).",
            _forward_variant("positions_plus_one")),
    Mistake("top_left_mask",
            "your causal mask hides the cached keys: with T_past keys in the cache, new query i sits at "
            "position T_past + i and may see keys 0 .. T_past + i, so the mask of shape (T_new, T_past + T_new) "
            "is torch.ones(...).tril(diagonal=T_past); a plain tril (or is_causal=True) lets a one-token "
            "query see only the first key and hides the newest.",
            _forward_variant("top_left_mask")),
    Mistake("no_mask",
            "your attention has no causal mask, so a token sees the tokens after it (in the prompt, and "
            "among several new tokens): before the softmax, fill with -inf the scores outside "
            "torch.ones(T_new, T_past + T_new, dtype=torch.bool).tril(diagonal=T_past).",
            _forward_variant("no_mask")),
    Mistake("no_mask_after_prompt",
            "you masked the prompt but not the calls that come with a cache: one new token may see every "
            "key, but when several new tokens come at once new token i must not see the ones after it; "
            "use torch.ones(T_new, T_past + T_new, dtype=torch.bool).tril(diagonal=T_past) on every call.",
            _forward_variant("no_mask_after_prompt")),
    Mistake("mask_hides_self",
            "your mask hides each token's own key (its diagonal is one too low): new query i sits at "
            "position T_past + i and sees keys 0 .. T_past + i, itself included, so use tril(diagonal=T_past), "
            "not T_past - 1 (the first token of the prompt otherwise sees nothing and gives nan).",
            _forward_variant("mask_hides_self")),
    Mistake("scale_d_model",
            "you divided the scores by sqrt(d_model): each head divides its scores by the square root of "
            "its own key size, attn.head_dim (d_model / num_heads).",
            _forward_variant("scale_d_model")),
    Mistake("no_scale",
            "your scores are not divided by sqrt(head_dim): scores = q @ k.transpose(-2, -1) / "
            "attn.head_dim ** 0.5, as in the model's own attention.",
            _forward_variant("no_scale")),
    Mistake("no_block_norm",
            "your blocks skip their layer norms: the blocks are pre-norm, so the queries, keys and values "
            "are projections of h = block.norm1(x), and the MLP reads block.norm2(x); the residual adds "
            "to x itself.",
            _forward_variant("no_block_norm")),
    Mistake("no_attention_norm",
            "your attention reads x itself, not h = block.norm1(x): the blocks are pre-norm, so the "
            "queries, keys and values are projections of the normalised h (the residual adds to x).",
            _forward_variant("no_attention_norm")),
    Mistake("no_final_norm",
            "your logits skip the final layer norm: logits = model.head(model.norm(x)), as in the "
            "model's own forward.",
            _forward_variant("no_final_norm")),
    Mistake("cache_not_used",
            "your new tokens attend only to each other: the keys and values of the earlier tokens come "
            "from the cache, concatenated before the new ones (torch.cat([k_past, k_new], dim=2)).",
            _forward_variant("cache_not_used")),
    Mistake("shared_across_batch",
            "every sequence of the batch reads the cache of the first one: each row b has its own "
            "keys and values, cache[layer][0][b].",
            _forward_variant("shared_across_batch")),
    Mistake("appended_twice",
            "your cache grows by twice the number of new tokens: the new keys and values are appended "
            "once, and the concatenation you attend over is the new cache.",
            _forward_variant("appended_twice")),
    Mistake("in_place",
            "your function modified the cache it was given: build and return a new list, so that the "
            "caller's cache stays as it was (and can be reused, e.g. to try several continuations).",
            _forward_variant("in_place")),
)


# --------------------------------------------------------------------------- 2. cache_bytes

def _bytes_variant(kind):
    def compute(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
        factor, layers, heads, size, batch = 2, num_layers, num_kv_heads, bytes_per_value, batch_size
        if kind == "no_factor_2":
            factor = 1
        elif kind == "query_heads":
            heads = num_heads
        elif kind == "no_bytes":
            size = 1
        elif kind == "no_batch":
            batch = 1
        elif kind == "no_layers":
            layers = 1
        elif kind == "bits":
            size = 8 * bytes_per_value
        return factor * layers * T * heads * head_dim * size * batch
    return compute


def cache_bytes_cases(seed):
    return [
        ((3, 10, 8, 2, 16, 4), {"batch_size": 5}),
        ((2, 7, 4, 4, 8, 2), {"batch_size": 3}),   # multi-head attention: kv heads = heads
        ((5, 6, 6, 1, 4, 1), {}),                   # multi-query, 1 byte per value, default batch 1
        ((32, 4096, 32, 8, 128, 2), {"batch_size": 1}),
        # Exercise 2's Mistral: 3 GiB, more than a 32-bit integer holds (an int32 product overflows).
        ((32, 8192, 32, 8, 128, 2), {"batch_size": 3}),
    ]


CACHE_BYTES_MISTAKES = (
    Mistake("no_factor_2", "you counted the keys only: the cache holds keys AND values, a factor 2.",
            _bytes_variant("no_factor_2")),
    Mistake("query_heads", "you counted the query heads: only the key/value heads are cached "
            "(num_kv_heads; with grouped-query attention several query heads share one).",
            _bytes_variant("query_heads")),
    Mistake("no_bytes", "you counted values, not bytes: multiply by bytes_per_value.",
            _bytes_variant("no_bytes")),
    Mistake("bits", "you multiplied by the bits per value (8 per byte): the result is in bytes.",
            _bytes_variant("bits")),
    Mistake("no_batch", "you left out the batch: every sequence of the batch has its own cache.",
            _bytes_variant("no_batch")),
    Mistake("no_layers", "you left out the layers: every block caches its own keys and values.",
            _bytes_variant("no_layers")),
)


# --------------------------------------------------------------------------- 3. predict_cache

def _predicted(kind):
    c = dict(reference.PREDICT_CONFIG)
    if kind in ("no_factor_2_or_bytes",):
        c["bytes_per_value"] = 1
    if kind in ("query_heads", "query_heads_no_batch"):
        c["num_kv_heads"] = c["num_heads"]
    if kind in ("no_batch", "query_heads_no_batch"):
        c["batch_size"] = 1
    if kind == "no_layers":
        c["num_layers"] = 1
    total = reference.kv_cache_bytes(**c)
    return {"gb": total / 1e9, "mib": total / 2**20}.get(kind, total / 2**30)


PREDICT_MISTAKES = tuple(
    Mistake(f"predict_{kind}", message, _predicted(kind))
    for kind, message in [
        ("no_factor_2_or_bytes", "you left out a factor: the cache holds a key AND a value per token, "
                                 "and each float16 value takes more than one byte."),
        ("query_heads", "you counted the query heads; with grouped-query attention only the "
                        "key/value heads are cached."),
        ("query_heads_no_batch", "you counted the query heads instead of the key/value heads, "
                                 "and one sequence instead of the whole batch."),
        ("no_batch", "that is one sequence: every sequence of the batch has its own cache."),
        ("no_layers", "that is one layer: every block caches its own keys and values."),
        ("gb", "that is in GB (powers of ten): the question asks for GiB, powers of two."),
        ("mib", "that is in MiB: the question asks for GiB."),
    ]
)


# --------------------------------------------------------------------------- 4. top_k

def _rank(scaled):
    order = torch.sort(scaled, dim=-1, descending=True, stable=True).indices
    return torch.empty_like(order).scatter_(-1, order, torch.arange(scaled.shape[-1]).expand_as(order))


def _top_k_variant(kind):
    def compute(logits, k, temperature=1.0):
        V = logits.shape[-1]
        if kind == "whole_batch":  # the k largest logits of the flattened batch, not of each row
            scaled, k = (logits, 1) if temperature == 0 else (logits / temperature, k)
            flat = scaled.reshape(-1)
            keep = torch.zeros_like(flat, dtype=torch.bool)
            keep[torch.sort(flat, descending=True, stable=True).indices[:k]] = True
            return torch.softmax(scaled.masked_fill(~keep.reshape(scaled.shape), float("-inf")), dim=-1)
        if temperature == 0 and kind == "zero_ties_split":
            top = (logits == logits.max(dim=-1, keepdim=True).values).to(logits.dtype)
            return top / top.sum(dim=-1, keepdim=True)
        if temperature == 0 and kind != "zero_not_handled":
            k, scaled = 1, logits
        elif kind == "times_temperature":
            scaled = logits * temperature
        elif kind == "temperature_after_softmax":
            scaled = logits
        else:
            scaled = logits / temperature
        if kind == "keeps_ties":
            kth = scaled.sort(dim=-1, descending=True).values[..., min(k, V) - 1:min(k, V)]
            keep = scaled >= kth
        elif kind == "smallest":
            keep = _rank(-scaled) < min(k, V)
        elif kind == "ties_last":
            keep = _rank(scaled.flip(-1)).flip(-1) < min(k, V)
        elif kind == "unstable_sort":  # the CPU's sort keeps up to 16 equal values in order, not more
            order = torch.sort(scaled, dim=-1, descending=True).indices[..., :min(k, V)]
            keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, order, True)
        elif kind == "k_plus_one":
            keep = _rank(scaled) <= min(k, V)
        else:
            keep = _rank(scaled) < min(k, V)
        if kind == "not_renormalised":
            return torch.softmax(scaled, dim=-1) * keep
        probs = torch.softmax(scaled.masked_fill(~keep, float("-inf")), dim=-1)
        if kind == "temperature_after_softmax" and temperature != 0:
            probs = probs / temperature
            probs = probs / probs.sum(dim=-1, keepdim=True)
        return probs
    return compute


def top_k_cases(seed):
    g = torch.Generator().manual_seed(seed)
    d = torch.float64
    return [
        ((2.0 * torch.randn(3, 7, generator=g, dtype=d), 3), {"temperature": 0.7}),
        ((torch.tensor([[2.0, 1.0, 1.0, 1.0, 0.0, -1.0], [0.5, 0.5, 0.5, 3.0, -2.0, 0.5]], dtype=d), 2), {}),
        ((torch.tensor([[1.0, 3.0, 0.0, 3.0], [0.2, -1.0, 0.1, 0.0]], dtype=d), 2), {"temperature": 0.0}),
        ((1.5 * torch.randn(5, generator=g, dtype=d), 10), {"temperature": 1.3}),
        ((torch.randn(2, 3, 6, generator=g, dtype=d), 4), {"temperature": 2.0}),
        # 20 equal logits: torch.sort without stable=True orders 17 or more equal values in no
        # particular order on the CPU (fewer happen to come out in index order), so only a row this
        # long shows an unstable sort; the first 3 indices are kept.
        ((torch.zeros(2, 20, dtype=d), 3), {"temperature": 0.5}),
    ] + _extreme_logit_cases(g, lambda logits: (3,), {"temperature": 0.5}) + [
        ((torch.randn(3, 1, generator=g, dtype=d), 1), {}),                  # a one-token vocabulary
        ((2.0 * torch.randn(2, 6, generator=g, dtype=d), 6), {"temperature": 1e-3}),  # k = V, temperature near 0
    ]


def _extreme_logit_cases(g, extra_args, kwargs):
    """Logits where exp overflows unless the maximum is subtracted first (issue 39, item 1):
    float64 near 1000 (exp(710) is inf) and float32 near 100 (exp(89) is inf in float32, and
    logits come out of the course's models in float32). Distinct multiples of 0.5, so that float32
    holds them exactly and no two tie."""
    out = []
    for level, dtype in ((1000.0, torch.float64), (100.0, torch.float32)):
        steps = torch.stack([torch.randperm(8, generator=g) for _ in range(2)]).to(torch.float64)
        logits = (level + 0.5 * steps).to(dtype)
        out.append(((logits, *extra_args(logits)), dict(kwargs)))
    return out


TOP_K_MISTAKES = (
    Mistake("temperature_after_softmax",
            "you divided the probabilities by the temperature after the softmax, so renormalising "
            "undid it: divide the logits, softmax(logits / temperature).",
            _top_k_variant("temperature_after_softmax")),
    Mistake("times_temperature",
            "you multiplied the logits by the temperature: divide them, so that a low temperature "
            "sharpens the distribution.",
            _top_k_variant("times_temperature")),
    Mistake("zero_not_handled",
            "temperature 0 gives nan (logits / 0): treat it as the limit, a one-hot on the first "
            "maximal logit (greedy decoding).",
            _top_k_variant("zero_not_handled")),
    Mistake("zero_ties_split",
            "at temperature 0 you shared the probability between tied maximal logits; the "
            "convention here is greedy decoding: all of it on the first maximal logit (lowest index).",
            _top_k_variant("zero_ties_split")),
    Mistake("keeps_ties",
            "you kept every token whose logit equals the k-th largest, so ties give more than k "
            "tokens: keep exactly min(k, V), the lower index first among equal logits "
            "(torch.sort(..., descending=True, stable=True)).",
            _top_k_variant("keeps_ties")),
    Mistake("ties_last",
            "among equal logits you kept the higher index: the convention is the lower index first "
            "(a stable sort in descending order).",
            _top_k_variant("ties_last")),
    Mistake("unstable_sort",
            "your sort is not stable: torch.sort(..., descending=True) without stable=True may put "
            "equal logits in any order (PyTorch's CPU sort happens to keep up to 16 equal values in "
            "index order, but not the 20 of a hidden test), so a long tie keeps other tokens than the "
            "lowest indices; pass stable=True.",
            _top_k_variant("unstable_sort")),
    Mistake("smallest",
            "you kept the k smallest logits: sort in descending order to keep the k largest.",
            _top_k_variant("smallest")),
    Mistake("k_plus_one",
            "you kept k + 1 tokens (an off-by-one in the rank or the slice): keep ranks 0 .. k - 1.",
            _top_k_variant("k_plus_one")),
    Mistake("not_renormalised",
            "you set the other tokens to zero but did not renormalise: the kept probabilities must "
            "sum to one (softmax over the kept logits only).",
            _top_k_variant("not_renormalised")),
    Mistake("whole_batch",
            "you kept the k largest logits of the whole batch (the logits flattened), so some rows "
            "keep none (nan) and others more than k: every row is its own distribution, rank it "
            "along the last axis, torch.sort(scaled, dim=-1, descending=True, stable=True).",
            _top_k_variant("whole_batch")),
)


# --------------------------------------------------------------------------- 5. top_p

def _top_p_variant(kind):
    def compute(logits, p):
        if kind in ("ranked_first_axis", "all_first_axis"):  # sorted and summed down the batch, dim 0
            axis = 0 if kind == "all_first_axis" else -1
            probs = torch.softmax(logits, dim=axis)
            ranked = torch.sort(probs, dim=0, descending=True, stable=True)
            keep = torch.zeros_like(probs, dtype=torch.bool).scatter(
                0, ranked.indices, ranked.values.cumsum(0) - ranked.values < p)
            kept = probs * keep
            return kept / kept.sum(dim=axis, keepdim=True)
        if kind == "softmax_first_axis":  # softmax over dim 0; then the probabilities sorted and kept
            probs = torch.softmax(logits, dim=0)
            ranked = torch.sort(probs, dim=-1, descending=True, stable=True)
            keep = torch.zeros_like(probs, dtype=torch.bool).scatter(
                -1, ranked.indices, ranked.values.cumsum(-1) - ranked.values < p)
            kept = probs * keep
            return kept / kept.sum(dim=-1, keepdim=True)
        probs = torch.softmax(logits, dim=-1)
        order = torch.sort(logits, dim=-1, descending=kind != "ascending", stable=True).indices
        if kind == "unstable_sort":  # ranked by probability, equal ones in the CPU sort's order
            order = torch.sort(probs, dim=-1, descending=True).indices
        if kind == "ties_last":
            order = logits.shape[-1] - 1 - torch.sort(logits.flip(-1), dim=-1, descending=True,
                                                      stable=True).indices
        cumulative = torch.cumsum(probs.gather(-1, order), dim=-1)
        before = torch.cat([torch.zeros_like(cumulative[..., :1]), cumulative[..., :-1]], dim=-1)
        if kind == "excludes_crossing":
            keep_sorted = cumulative <= p
        elif kind == "inclusive_strict":
            keep_sorted = cumulative < p
        elif kind == "one_more_at_exact":
            keep_sorted = before <= p
        else:
            keep_sorted = before < p
        keep = torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)
        if kind == "not_renormalised":
            return probs * keep
        return torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1)
    return compute


def top_p_cases(seed):
    g = torch.Generator().manual_seed(seed)
    d = torch.float64
    crossing = torch.tensor([[math.log(0.5), math.log(0.3), math.log(0.2)]], dtype=d)
    return [
        ((2.0 * torch.randn(3, 8, generator=g, dtype=d), 0.8), {}),
        ((crossing, 0.6), {}),
        ((torch.zeros(2, 4, dtype=d), 0.5), {}),                        # p reached exactly
        ((torch.tensor([0.0, 0.0, 0.0, 0.0, float("-inf")], dtype=d), 0.75), {}),
        ((torch.randn(2, 2, 5, generator=g, dtype=d), 0.3), {}),
        ((torch.tensor([[4.0, 0.0, -1.0, 0.5]], dtype=d), 0.5), {}),  # the first token alone crosses p
        ((torch.randn(2, 6, generator=g, dtype=d), 1.0), {}),
        # The tokens before the last sum to p - 1e-5, just below p: the last token is kept (an answer
        # that compares with p minus a tolerance, "to be safe at p exactly", drops it).
        ((torch.log(torch.tensor([[0.5, 0.29999, 0.20001]], dtype=d)), 0.8), {}),
        # 32 equal logits (each 1/32, exact): the first 7 are kept (6/32 < 0.2 <= 7/32). torch.sort
        # without stable=True orders 17 or more equal values in no particular order on the CPU (up
        # to 16 happen to come out in index order), so only a row this long shows an unstable sort.
        ((torch.zeros(2, 32, dtype=d), 0.2), {}),
    ] + _extreme_logit_cases(g, lambda logits: (0.9,), {}) + [
        ((torch.randn(3, 1, generator=g, dtype=d), 0.5), {}),                # a one-token vocabulary
        ((2.0 * torch.randn(2, 6, generator=g, dtype=d), 1e-9), {}),         # the smallest p: one token
    ]


TOP_P_MISTAKES = (
    Mistake("excludes_crossing",
            "you dropped the token that crosses p: keep tokens while the probability BEFORE them "
            "sums to less than p, so the nucleus holds at least p.",
            _top_p_variant("excludes_crossing")),
    Mistake("inclusive_strict",
            "you kept only the tokens whose cumulative probability, themselves included, stays below p: "
            "the token that reaches or crosses p belongs to the nucleus too.",
            _top_p_variant("inclusive_strict")),
    Mistake("one_more_at_exact",
            "when the cumulative probability reaches p exactly you kept one more token: stop as soon "
            "as the kept tokens hold at least p (keep while the sum before a token is < p).",
            _top_p_variant("one_more_at_exact")),
    Mistake("ascending",
            "you summed the probabilities from the least likely token up: rank them in decreasing "
            "order.",
            _top_p_variant("ascending")),
    Mistake("ties_last",
            "among equal probabilities you kept the higher index first: the convention is the lower "
            "index first (torch.sort(..., descending=True, stable=True)).",
            _top_p_variant("ties_last")),
    Mistake("unstable_sort",
            "your sort is not stable: torch.sort(..., descending=True) without stable=True may put "
            "equal probabilities in any order (PyTorch's CPU sort happens to keep up to 16 equal values in "
            "index order, but not the 32 of a hidden test), so a long tie keeps other tokens than the "
            "lowest indices; pass stable=True.",
            _top_p_variant("unstable_sort")),
    Mistake("not_renormalised",
            "you set the tokens outside the nucleus to zero but did not renormalise: the kept "
            "probabilities must sum to one.",
            _top_p_variant("not_renormalised")),
    Mistake("softmax_first_axis",
            "your softmax runs over the first axis (dim=0), across the rows of the batch: each row's "
            "distribution is over its own vocabulary, the last axis, torch.softmax(logits, dim=-1).",
            _top_p_variant("softmax_first_axis")),
    Mistake("ranked_first_axis",
            "you sorted and summed the probabilities over the first axis (dim=0), down the batch: "
            "each row is ranked and summed within its own vocabulary, the last axis "
            "(torch.sort(..., dim=-1, descending=True, stable=True), cumsum(dim=-1)).",
            _top_p_variant("ranked_first_axis")),
    Mistake("all_first_axis",
            "your softmax, sort, cumulative sum and renormalisation all run over the first axis "
            "(dim=0), down the batch: every row is its own distribution over the vocabulary, the last "
            "axis, so use dim=-1 throughout.",
            _top_p_variant("all_first_axis")),
)


# The demos must run before the student answers, so the shipped widget module computes the same
# things (a KV cache, the filtered distributions, cache sizes): calling it is using the answer.
_WIDGETS = "course_utils.widgets.fast_generation:"
WIDGET_CACHE = tuple(_WIDGETS + name for name in ("StaticCache", "static_forward", "generate_ids"))
WIDGET_SAMPLING = tuple(_WIDGETS + name for name in ("next_token_distribution", "next_token_probs", "sample_text"))
WIDGET_COUNTING = (_WIDGETS + "cache_table",)

EXERCISES = {exercise.grade_id: exercise for exercise in (
    CacheExercise(
        grade_id="fast_generation_kv_cache",
        function_name="forward_with_cache",
        reference=reference.forward_with_cache,
        make_cases=kv_cache_cases,
        mistakes=KV_CACHE_MISTAKES,
        output_names=("your logits", "your final cache", "whether the caches passed in stayed unchanged"),
        forbidden=WIDGET_CACHE,
        atol=1e-5, rtol=1e-5,
        crash_hint="tokens is (B, T_new); cache is None or a list with one (k, v) pair per block, "
                   "each (B, num_heads, T_past, head_dim); concatenate along dim=2",
    ),
    Exercise(
        grade_id="fast_generation_cache_bytes",
        function_name="kv_cache_bytes",
        reference=reference.kv_cache_bytes,
        make_cases=cache_bytes_cases,
        mistakes=CACHE_BYTES_MISTAKES,
        output_names=("your byte count",),
        forbidden=WIDGET_COUNTING,
        atol=0.0, rtol=0.0,
    ),
    ValueExercise(
        grade_id="fast_generation_predict_cache",
        function_name="predicted_gib",
        reference=reference.predicted_cache_gib(),
        make_cases=lambda seed: [((), {})],
        mistakes=PREDICT_MISTAKES,
        output_names=("your prediction (GiB)",),
        atol=0.0, rtol=2e-3,
    ),
    DtypeKindExercise(
        grade_id="fast_generation_top_k",
        function_name="top_k_probs",
        reference=reference.top_k_probs,
        make_cases=top_k_cases,
        mistakes=TOP_K_MISTAKES,
        output_names=("your probabilities",),
        forbidden=WIDGET_SAMPLING,
        atol=1e-6, rtol=1e-5,
        crash_hint="logits has any number of leading dimensions and the vocabulary last; k may be "
                   "larger than the vocabulary (then every token is kept); temperature may be 0",
    ),
    DtypeKindExercise(
        grade_id="fast_generation_top_p",
        function_name="top_p_probs",
        reference=reference.top_p_probs,
        make_cases=top_p_cases,
        mistakes=TOP_P_MISTAKES,
        output_names=("your probabilities",),
        forbidden=WIDGET_SAMPLING,
        atol=1e-6, rtol=1e-5,
        crash_hint="logits has any number of leading dimensions and the vocabulary last, and may "
                   "hold -inf (a token already ruled out)",
    ),
)}


def check(grade_id, answer):
    """The hidden test of one exercise: GradingError naming the mistake, or None when right."""
    return framework.check(EXERCISES, grade_id, answer)


def diagnose(grade_id, answer):
    """The first hidden block of a test cell: names a catalogued mistake (or a crash, a forbidden
    call, an input changed in place), and stays silent on an unexplained wrong answer so that the
    visible checks can give their hint before the closing `check` fails it."""
    return framework.diagnose(EXERCISES, grade_id, answer)
