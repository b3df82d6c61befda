"""Reference answers of notebook 15 (linear attention as a recurrence). Instructor side only.

Why: softmax attention must keep every past key and value (the KV cache of notebook 11) because
exp(q . k) does not factor. Replace it with a product of features, phi(q) . phi(k), and the sum
over the past can be carried forward as one (d_k x d_v) matrix: attention becomes a recurrent
network again, with a state of fixed size. These are the pieces the student writes, each in its
plainest correct form (loops where a loop says it best), checked in tests/test_linear_attention.py
against each other and against naive loops.

* `elu_feature_map(x)`: elu(x) + 1, a positive feature map (Katharopoulos et al. 2020).
* `causal_linear_attention(q, k, v)`: the parallel form, o_t = sum_{s<=t} (phi(q_t).phi(k_s)) v_s
  divided by sum_{s<=t} phi(q_t).phi(k_s): a (T x T) matrix of weights, as in softmax attention.
* `recurrent_linear_attention(q, k, v)`: the same outputs token by token from a state
  S_t = S_{t-1} + phi(k_t) v_t^T (d_k x d_v) and a normaliser z_t = z_{t-1} + phi(k_t) (d_k).
* `delta_rule_recurrent(q, k, v, beta)`: the delta rule (Schlag et al. 2021, Yang et al. 2024):
  instead of adding v_t, write the correction beta_t (v_t - S_{t-1}^T k_t) under k_t, so a key
  written twice is overwritten rather than summed; o_t = S_t^T q_t.

Shapes: q, k (..., T, d_k); v (..., T, d_v); beta (..., T) in [0, 1]; outputs (..., T, d_v).
States are (..., d_k, d_v) with rows indexed by key features, so S^T q reads the values out.
"""
import torch
import torch.nn.functional as F

__all__ = ["elu_feature_map", "causal_linear_attention", "recurrent_linear_attention",
           "delta_rule_recurrent"]


def elu_feature_map(x):
    """elu(x) + 1: positive everywhere (so the normaliser never vanishes), close to 1 + x near 0."""
    return F.elu(x) + 1


def causal_linear_attention(q, k, v, feature_map=elu_feature_map, eps=1e-6):
    """Linear attention over a causal prefix, all positions at once.

    weights[t, s] = phi(q_t) . phi(k_s) for s <= t, 0 above the diagonal; each row divided by its
    sum (plus `eps`), then applied to v. Returns (..., T, d_v)."""
    scores = feature_map(q) @ feature_map(k).transpose(-2, -1)  # (..., T, T), all positive
    scores = scores.tril()
    return (scores @ v) / (scores.sum(-1, keepdim=True) + eps)


def recurrent_linear_attention(q, k, v, feature_map=elu_feature_map, eps=1e-6, state=None):
    """The same as `causal_linear_attention`, one token at a time from a fixed-size state.

    state: (S (..., d_k, d_v), z (..., d_k)) carried in from earlier tokens, zeros if None.
    Returns (outputs (..., T, d_v), (S, z) after the last token)."""
    phi_q, phi_k = feature_map(q), feature_map(k)
    if state is None:
        S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1]))
        z = q.new_zeros(q.shape[:-2] + (q.shape[-1],))
    else:
        S, z = state
    outputs = []
    for t in range(q.shape[-2]):
        S = S + phi_k[..., t, :, None] * v[..., t, None, :]  # add the outer product phi(k_t) v_t^T
        z = z + phi_k[..., t, :]
        numerator = (phi_q[..., t, :, None] * S).sum(-2)  # S^T phi(q_t): (..., d_v)
        denominator = (phi_q[..., t, :] * z).sum(-1, keepdim=True)
        outputs.append(numerator / (denominator + eps))
    return torch.stack(outputs, dim=-2), (S, z)


def delta_rule_recurrent(q, k, v, beta, state=None):
    """The delta rule, token by token: S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T and
    o_t = S_t^T q_t. With unit-length keys and beta_t = 1, reading k_t back from S_t gives exactly
    v_t, whatever was stored under k_t before.

    state: S (..., d_k, d_v) carried in, zeros if None. Returns (outputs (..., T, d_v), S)."""
    S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1])) if state is None else state
    outputs = []
    for t in range(q.shape[-2]):
        k_t = k[..., t, :]
        stored = (k_t[..., :, None] * S).sum(-2)  # S^T k_t: what k_t reads back now
        correction = beta[..., t, None] * (v[..., t, :] - stored)
        S = S + k_t[..., :, None] * correction[..., None, :]
        outputs.append((q[..., t, :, None] * S).sum(-2))
    return torch.stack(outputs, dim=-2), S
