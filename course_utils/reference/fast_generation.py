"""Reference answers of notebook 11 (fast generation). Instructor side only.

* `forward_with_cache(model, tokens, cache=None)`: incremental decoding of a
  `course_utils.models.decoder_lm.DecoderLM` with a key/value cache; returns the logits of the new
  tokens and a new cache, leaving the cache passed in untouched.
* `kv_cache_bytes(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1)`.
* `top_k_probs(logits, k, temperature=1.0)` and `top_p_probs(logits, p)`: sampling
  distributions, with the tie and boundary conventions stated in the notebook:
  tokens are ranked by logit, ties broken by the lower index; top-k keeps exactly
  min(k, V) tokens; top-p keeps, in that order, every token whose preceding cumulative
  probability is < p (the token that reaches or crosses p is kept, the next is not);
  temperature 0 keeps the first maximal logit only (a one-hot).
"""
import torch

__all__ = ["forward_with_cache", "kv_cache_bytes", "top_k_probs", "top_p_probs",
           "PREDICT_CONFIG", "predicted_cache_gib"]


def forward_with_cache(model, tokens, cache=None):
    """tokens (B, T_new) continuing the sequence held in `cache` (None: nothing yet).

    cache: a list with one (k, v) pair per block, each (B, num_heads, T_past, head_dim).
    Returns (logits (B, T_new, vocab_size), new cache with T_past + T_new positions)."""
    T_new = tokens.shape[1]
    past = 0 if cache is None else cache[0][0].shape[2]
    positions = torch.arange(past, past + T_new, device=tokens.device)
    x = model.embed(tokens, positions)
    # query i sits at position past + i and may see keys 0 .. past + i
    allowed = torch.ones(T_new, past + T_new, dtype=torch.bool, device=tokens.device).tril(diagonal=past)
    new_cache = []
    for layer, block in enumerate(model.blocks):
        attn = block.attn
        h = block.norm1(x)
        q = attn.split_heads(attn.q_proj(h))
        k = attn.split_heads(attn.k_proj(h))
        v = attn.split_heads(attn.v_proj(h))
        if cache is not None:
            k = torch.cat([cache[layer][0], k], dim=2)
            v = torch.cat([cache[layer][1], v], dim=2)
        new_cache.append((k, v))
        scores = q @ k.transpose(-2, -1) / attn.head_dim ** 0.5
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        x = x + attn.out_proj(attn.merge_heads(weights @ v))
        x = x + block.mlp(block.norm2(x))
    return model.head(model.norm(x)), new_cache


def kv_cache_bytes(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """Bytes of the key/value cache: K and V, per layer, per cached token, per key/value head.
    num_heads (query heads) does not enter: only the key/value heads are cached."""
    return 2 * num_layers * T * num_kv_heads * head_dim * bytes_per_value * batch_size


# The "think before you run" question: a Mistral-7B-like configuration (grouped-query attention).
PREDICT_CONFIG = dict(num_layers=32, T=8192, num_heads=32, num_kv_heads=8, head_dim=128,
                      bytes_per_value=2, batch_size=3)


def predicted_cache_gib():
    return kv_cache_bytes(**PREDICT_CONFIG) / 2**30


def _ranked(logits):
    """Indices that sort each row by decreasing logit, ties by increasing index."""
    return torch.sort(logits, dim=-1, descending=True, stable=True).indices


def _keep(logits, keep):
    """Softmax over the kept tokens (keep: boolean like logits); the others get exactly 0."""
    masked = logits.masked_fill(~keep, float("-inf"))
    return torch.softmax(masked, dim=-1)


def top_k_probs(logits, k, temperature=1.0):
    """logits (..., V) -> probabilities (..., V): softmax(logits / temperature) restricted to
    the k highest logits (exactly min(k, V) of them; among equal logits the lower index first)
    and renormalised. temperature 0: a one-hot on the first maximal logit."""
    V = logits.shape[-1]
    if temperature == 0:
        k, scaled = 1, logits
    else:
        scaled = logits / temperature
    order = _ranked(scaled)
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(V).expand_as(order))
    return _keep(scaled, rank < min(k, V))


def top_p_probs(logits, p):
    """logits (..., V) -> probabilities (..., V): the nucleus of softmax(logits). Ranked by
    decreasing probability (ties: lower index first), a token is kept when the probability of
    the tokens ranked before it sums to less than p; the kept ones are renormalised."""
    probs = torch.softmax(logits, dim=-1)
    order = _ranked(logits)
    cumulative = torch.cumsum(probs.gather(-1, order), dim=-1)
    before = torch.cat([torch.zeros_like(cumulative[..., :1]), cumulative[..., :-1]], dim=-1)
    keep_sorted = before < p  # the first token always: nothing comes before it
    keep = torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)
    return _keep(logits, keep)
