"""Wrong answers to notebook 15's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import torch
import torch.nn.functional as F


def _phi(x):
    return F.elu(x) + 1


# ---------------------------------------------------------------- causal_linear_attention
def par_softmax_attention(q, k, v):
    """Causal softmax attention: right shapes, wrong kind of attention."""
    T = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, -1) @ v


def par_running_mean_of_values(q, k, v):
    """The mean of the values so far: every weight equal."""
    counts = torch.arange(1, q.shape[-2] + 1, dtype=v.dtype)[:, None]
    return torch.cumsum(v, -2) / counts


def par_feature_map_on_keys_only(q, k, v):
    """phi applied to the keys, the raw queries."""
    scores = (q @ _phi(k).transpose(-2, -1)).tril()
    return (scores @ v) / (scores.sum(-1, keepdim=True) + 1e-6)


def par_sigmoid_feature_map(q, k, v):
    """A positive map, but not the one asked for."""
    scores = (torch.sigmoid(q) @ torch.sigmoid(k).transpose(-2, -1)).tril()
    return (scores @ v) / scores.sum(-1, keepdim=True)


# ---------------------------------------------------------------- recurrent_linear_attention
def rec_returns_parallel_and_zeros(q, k, v, S=None, z=None):
    """Right outputs from a fresh start, a state of zeros."""
    phi_q, phi_k = _phi(q), _phi(k)
    scores = (phi_q @ phi_k.transpose(-2, -1)).tril()
    out = (scores @ v) / (scores.sum(-1, keepdim=True) + 1e-6)
    return out, q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1])), q.new_zeros(q.shape[:-2] + (q.shape[-1],))


def rec_decaying_state(q, k, v, S=None, z=None):
    """A state that forgets a tenth of itself every step."""
    phi_q, phi_k = _phi(q), _phi(k)
    S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1])) if S is None else S
    z = q.new_zeros(q.shape[:-2] + (q.shape[-1],)) if z is None else z
    outputs = []
    for t in range(q.shape[-2]):
        S = 0.9 * S + phi_k[..., t, :, None] * v[..., t, None, :]
        z = 0.9 * z + phi_k[..., t, :]
        outputs.append((phi_q[..., t, :, None] * S).sum(-2) / (phi_q[..., t, :] * z).sum(-1, keepdim=True))
    return torch.stack(outputs, -2), S, z


def rec_state_transposed(q, k, v, S=None, z=None):
    """The state kept as (d_v, d_k): v phi(k)^T, returned that way round."""
    phi_q, phi_k = _phi(q), _phi(k)
    S = q.new_zeros(q.shape[:-2] + (v.shape[-1], q.shape[-1])) if S is None else S.transpose(-2, -1)
    z = q.new_zeros(q.shape[:-2] + (q.shape[-1],)) if z is None else z
    outputs = []
    for t in range(q.shape[-2]):
        S = S + v[..., t, :, None] * phi_k[..., t, None, :]
        z = z + phi_k[..., t, :]
        outputs.append((S @ phi_q[..., t, :, None])[..., 0] / (phi_q[..., t, :] * z).sum(-1, keepdim=True))
    return torch.stack(outputs, -2), S, z


# ---------------------------------------------------------------- delta_rule
def delta_normalises_keys(q, k, v, beta, S=None):
    """Makes every key unit length first (right only when the keys already are)."""
    k = F.normalize(k, dim=-1)
    S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1])) if S is None else S
    outputs = []
    for t in range(q.shape[-2]):
        stored = (k[..., t, :, None] * S).sum(-2)
        S = S + k[..., t, :, None] * (beta[..., t, None] * (v[..., t, :] - stored))[..., None, :]
        outputs.append((q[..., t, :, None] * S).sum(-2))
    return torch.stack(outputs, -2), S


def delta_beta_one(q, k, v, beta, S=None):
    """beta taken as 1 whatever is passed, and the outputs those of the last state."""
    S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1])) if S is None else S
    for t in range(q.shape[-2]):
        stored = (k[..., t, :, None] * S).sum(-2)
        S = S + k[..., t, :, None] * (v[..., t, :] - stored)[..., None, :]
    return q @ S, S


def delta_erases_whole_state(q, k, v, beta, S=None):
    """Decays the whole state by (1 - beta) instead of only what k_t reads."""
    S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1])) if S is None else S
    outputs = []
    for t in range(q.shape[-2]):
        b = beta[..., t, None, None]
        S = (1 - b) * S + b * k[..., t, :, None] * v[..., t, None, :]
        outputs.append((q[..., t, :, None] * S).sum(-2))
    return torch.stack(outputs, -2), S


UNCATALOGUED = {
    "linear_attention_parallel": [par_softmax_attention, par_running_mean_of_values, par_feature_map_on_keys_only,
                                  par_sigmoid_feature_map],
    "linear_attention_recurrent": [rec_returns_parallel_and_zeros, rec_decaying_state, rec_state_transposed],
    # 128 is right for the example (T = 4,096, d = 64): off by one, rounded, a string
    "linear_attention_cache_ratio": [127, 130, 4096, "128"],
    "linear_attention_delta": [delta_normalises_keys, delta_beta_one, delta_erases_whole_state],
}
WRONG_ANSWERS = UNCATALOGUED

# Wrong answers that PASS their test cell today (holes in the hidden tests): (grade_id, answer).
HOLES = []
