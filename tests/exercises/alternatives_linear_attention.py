"""Second correct implementations of notebook 15's exercises, written differently from the
reference (course_utils/reference/linear_attention.py): the exercise's tests must pass them too
(tests/exercises/test_mutations.py)."""
import torch
import torch.nn.functional as F


def _phi_by_where(x):
    """elu(x) + 1 written out: x + 1 where x > 0, exp(x) elsewhere."""
    return torch.where(x > 0, x + 1, torch.exp(torch.clamp(x, max=0)))


# ---------------------------------------------------------------- causal_linear_attention
def parallel_with_einsum(q, k, v):
    """einsum for the weights and the mix, the mask built by comparing indices, no eps."""
    T = q.shape[-2]
    weights = torch.einsum("...td,...sd->...ts", _phi_by_where(q), _phi_by_where(k))
    weights = weights * (torch.arange(T)[:, None] >= torch.arange(T)[None, :])
    return torch.einsum("...ts,...se->...te", weights / weights.sum(-1, keepdim=True), v)


def parallel_by_cumsum(q, k, v):
    """Prefix sums of phi(k_s) v_s^T and of phi(k_s) (the state at every t, all at once)."""
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    states = torch.cumsum(phi_k[..., :, None] * v[..., None, :], dim=-3)  # (..., T, d_k, d_v)
    norms = torch.cumsum(phi_k, dim=-2)
    return (phi_q[..., None, :] @ states).squeeze(-2) / (phi_q * norms).sum(-1, keepdim=True)


# ---------------------------------------------------------------- recurrent_linear_attention
def recurrent_with_matmul(q, k, v, S=None, z=None):
    """An explicit loop with torch.outer-like products by matmul on unsqueezed vectors."""
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    if S is None:
        S = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1], dtype=q.dtype)
        z = torch.zeros(*q.shape[:-2], q.shape[-1], dtype=q.dtype)
    outputs = []
    for t in range(q.shape[-2]):
        S = S + phi_k[..., t, :].unsqueeze(-1) @ v[..., t, :].unsqueeze(-2)
        z = z + phi_k[..., t, :]
        read = (phi_q[..., t, :].unsqueeze(-2) @ S).squeeze(-2)
        outputs.append(read / (phi_q[..., t, :] * z).sum(-1, keepdim=True))
    return torch.stack(outputs, dim=-2), S, z


def recurrent_with_einsum(q, k, v, S=None, z=None):
    """einsum everywhere; the state cloned so the caller's is never changed."""
    phi_q, phi_k = _phi_by_where(q), _phi_by_where(k)
    S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1])) if S is None else S.clone()
    z = q.new_zeros(q.shape[:-2] + (q.shape[-1],)) if z is None else z.clone()
    outputs = torch.empty(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for t in range(q.shape[-2]):
        S += torch.einsum("...i,...j->...ij", phi_k[..., t, :], v[..., t, :])
        z += phi_k[..., t, :]
        outputs[..., t, :] = (torch.einsum("...i,...ij->...j", phi_q[..., t, :], S)
                              / (torch.einsum("...i,...i->...", phi_q[..., t, :], z)[..., None] + 1e-6))
    return outputs, S, z


# ---------------------------------------------------------------- delta_rule
def delta_with_matmul(q, k, v, beta, S=None):
    """S^T k and S^T q by matmul, the update written as S (I - beta k k^T) + beta k v^T."""
    d_k = q.shape[-1]
    S = torch.zeros(*q.shape[:-2], d_k, v.shape[-1], dtype=q.dtype) if S is None else S
    outputs = []
    for t in range(q.shape[-2]):
        k_t = k[..., t, :].unsqueeze(-1)  # (..., d_k, 1)
        b = beta[..., t, None, None]
        erase = torch.eye(d_k, dtype=q.dtype) - b * (k_t @ k_t.transpose(-2, -1))
        S = erase @ S + b * (k_t @ v[..., t, :].unsqueeze(-2))
        outputs.append((q[..., t, :].unsqueeze(-2) @ S).squeeze(-2))
    return torch.stack(outputs, dim=-2), S


def delta_with_einsum(q, k, v, beta, S=None):
    """einsum for every product, the outputs written into a preallocated tensor."""
    S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1])) if S is None else S
    outputs = torch.empty(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for t in range(q.shape[-2]):
        stored = torch.einsum("...i,...ij->...j", k[..., t, :], S)
        S = S + torch.einsum("...i,...j->...ij", k[..., t, :], beta[..., t, None] * (v[..., t, :] - stored))
        outputs[..., t, :] = torch.einsum("...i,...ij->...j", q[..., t, :], S)
    return outputs, S


ALTERNATIVES = {
    "linear_attention_parallel": [parallel_with_einsum, parallel_by_cumsum],
    "linear_attention_recurrent": [recurrent_with_matmul, recurrent_with_einsum],
    # the example's numbers: T = 4,096 tokens, d = 64: 2 * 4096 / 64 = 128
    "linear_attention_cache_ratio": [128, 128.0],
    "linear_attention_delta": [delta_with_matmul, delta_with_einsum],
}
