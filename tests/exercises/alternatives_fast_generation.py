"""Second correct implementations of notebook 11's exercises, written differently from the
reference (course_utils/reference/fast_generation.py): the exercise's tests must pass them too
(tests/exercises/test_mutations.py)."""
import math

import numpy as np
import torch
import torch.nn.functional as F


def forward_with_cache_sdpa(model, tokens, cache=None):
    """PyTorch's attention with a mask made by comparing positions; the cache as a tuple."""
    T_new = tokens.shape[1]
    past = 0 if cache is None else cache[0][0].shape[-2]
    positions = past + torch.arange(T_new)
    x = model.token(tokens) + model.position(positions)
    mask = torch.arange(past + T_new)[None, :] <= positions[:, None]
    out_cache = []
    for i, block in enumerate(model.blocks):
        a = block.attn
        h = block.norm1(x)
        k, v = a.split_heads(a.k_proj(h)), a.split_heads(a.v_proj(h))
        if cache:
            k, v = torch.cat((cache[i][0], k), dim=-2), torch.cat((cache[i][1], v), dim=-2)
        out_cache.append((k, v))
        y = F.scaled_dot_product_attention(a.split_heads(a.q_proj(h)), k, v, attn_mask=mask)
        x = x + a.out_proj(a.merge_heads(y))
        x = x + block.mlp(block.norm2(x))
    return model.head(model.norm(x)), tuple(out_cache)


def forward_with_cache_token_by_token(model, tokens, cache=None):
    """One new token at a time: a single query sees every cached key, so it needs no mask."""
    cache = [] if cache is None else list(cache)
    logits = []
    for t in range(tokens.shape[1]):
        past = cache[0][0].shape[2] if cache else 0
        x = model.embed(tokens[:, t:t + 1], torch.tensor([past]))
        grown = []
        for i, block in enumerate(model.blocks):
            a = block.attn
            h = block.norm1(x)
            q, k, v = (a.split_heads(proj(h)) for proj in (a.q_proj, a.k_proj, a.v_proj))
            if cache:
                k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
            grown.append((k, v))
            weights = torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(a.head_dim), dim=-1)
            x = x + a.out_proj(a.merge_heads(weights @ v))
            x = x + block.mlp(block.norm2(x))
        cache = grown
        logits.append(model.head(model.norm(x)))
    return torch.cat(logits, dim=1), cache


def kv_cache_bytes_prod(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """Per token: keys and values of every kv head in every layer; then tokens and sequences."""
    per_token = math.prod([2, num_layers, num_kv_heads, head_dim, bytes_per_value])
    return per_token * T * batch_size


def kv_cache_bytes_by_groups(num_layers, T, num_heads, num_kv_heads, head_dim, bytes_per_value, batch_size=1):
    """MHA's cache divided by the group size h / h_kv (exact: computed in integers)."""
    mha = 2 * num_layers * T * num_heads * head_dim * bytes_per_value * batch_size
    return mha * num_kv_heads // num_heads


def top_k_probs_loop(logits, k, temperature=1.0):
    """Pick the maximum k times (argmax returns the first of equal values), masking each pick."""
    scaled = logits.clone() if temperature == 0 else logits / temperature
    k = 1 if temperature == 0 else min(k, logits.shape[-1])
    remaining = scaled.clone()
    keep = torch.zeros(scaled.shape, dtype=torch.bool)
    for _ in range(k):
        best = remaining.argmax(dim=-1, keepdim=True)
        keep.scatter_(-1, best, True)
        remaining = remaining.scatter(-1, best, float("-inf"))
    e = torch.where(keep, torch.exp(scaled - scaled.amax(dim=-1, keepdim=True)), torch.zeros_like(scaled))
    return e / e.sum(dim=-1, keepdim=True)


def top_k_probs_rank(logits, k, temperature=1.0):
    """Rank of a token = how many logits beat it, plus the equal ones at lower indices."""
    z = logits if temperature == 0 else logits / temperature
    k = 1 if temperature == 0 else k
    V = z.shape[-1]
    index = torch.arange(V)
    bigger = (z[..., None, :] > z[..., :, None]).sum(-1)
    equal_before = ((z[..., None, :] == z[..., :, None]) & (index[None, :] < index[:, None])).sum(-1)
    keep = bigger + equal_before < k
    return torch.softmax(torch.where(keep, z, torch.full_like(z, float("-inf"))), dim=-1)


def top_p_probs_loop(logits, p):
    """Row by row in Python: add tokens in order until the kept mass reaches p."""
    probs = torch.softmax(logits, dim=-1)
    flat, out = probs.reshape(-1, probs.shape[-1]), torch.zeros_like(probs).reshape(-1, probs.shape[-1])
    for row, (q, target) in enumerate(zip(flat, out)):
        mass = 0.0
        for i in sorted(range(len(q)), key=lambda j: (-float(q[j]), j)):
            if mass >= p:
                break
            target[i] = q[i]
            mass += float(q[i])
        out[row] = target / target.sum()
    return out.reshape(probs.shape)


def top_p_probs_shifted(logits, p):
    """Remove a token when the mass strictly before it already reaches p (cumsum shifted right)."""
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    cumulative = sorted_probs.cumsum(-1)
    remove = torch.zeros_like(cumulative, dtype=torch.bool)
    remove[..., 1:] = cumulative[..., :-1] >= p
    remove = remove.scatter(-1, order, remove)
    kept = probs.masked_fill(remove, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def top_k_probs_argsort(logits, k, temperature=1.0):
    """A stable ascending argsort of the negated logits: equal logits keep their index order at any
    row length (many tied logits included)."""
    z, k = (logits, 1) if temperature == 0 else (logits / temperature, k)
    order = torch.argsort(-z, dim=-1, stable=True)
    keep = torch.zeros_like(z, dtype=torch.bool).scatter(-1, order[..., :k], True)
    return torch.softmax(z.masked_fill(~keep, float("-inf")), dim=-1)


def top_p_probs_argsort(logits, p):
    """The same nucleus ranked by a stable ascending argsort of the negated probabilities."""
    probs = torch.softmax(logits, dim=-1)
    order = torch.argsort(-probs, dim=-1, stable=True)
    ranked = probs.gather(-1, order)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, ranked.cumsum(-1) - ranked < p)
    return torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1)


ALTERNATIVES = {
    "fast_generation_kv_cache": [forward_with_cache_sdpa, forward_with_cache_token_by_token],
    "fast_generation_cache_bytes": [kv_cache_bytes_prod, kv_cache_bytes_by_groups],
    # Worked out with NumPy: np.prod(...) / 2**30 is a NumPy float; np.float32 holds 3 exactly
    "fast_generation_predict_cache": [3, 3.0, 3 * 2**30 / 2**30, np.prod([2, 32, 8192, 8, 128, 2, 3]) / 2**30,
                                      np.float32(3.0)],
    "fast_generation_top_k": [top_k_probs_loop, top_k_probs_rank, top_k_probs_argsort],
    "fast_generation_top_p": [top_p_probs_loop, top_p_probs_shifted, top_p_probs_argsort],
}
