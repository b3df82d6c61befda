"""Second correct implementations of notebook 12's exercises, written differently from the
reference (course_utils/reference/long_context.py): the exercise's tests must pass them too
(tests/exercises/test_mutations.py)."""
import itertools
import math

import torch


def rope_complex(x, positions=None):
    """Each neighbouring pair as a complex number, times e^{i pos theta} (torch.polar)."""
    T, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(T)
    theta = torch.pow(10000.0, -torch.arange(d // 2, dtype=torch.float64) * 2 / d)
    turn = torch.polar(torch.ones(T, d // 2, dtype=torch.float64),
                       torch.outer(positions.to(torch.float64), theta))
    pairs = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).reshape(x.shape).to(x.dtype)


def rope_matrix(x, positions=None):
    """A block-diagonal 2 x 2 rotation matrix per position, applied with einsum (row vectors:
    out = R x, written as x @ R^T)."""
    T, d = x.shape[-2], x.shape[-1]
    positions = torch.arange(T) if positions is None else positions
    rotations = torch.zeros(T, d, d, dtype=torch.float64)
    for i in range(d // 2):
        angle = positions.double() * 10000.0 ** (-2.0 * i / d)
        c, s = torch.cos(angle), torch.sin(angle)
        rotations[:, 2 * i, 2 * i], rotations[:, 2 * i, 2 * i + 1] = c, -s
        rotations[:, 2 * i + 1, 2 * i], rotations[:, 2 * i + 1, 2 * i + 1] = s, c
    return torch.einsum("tij,...tj->...ti", rotations, x.double()).to(x.dtype)


def rope_rotate_pairs_float32(x, positions=None):
    """In x's own dtype throughout, with a stacked "rotate the pair" (-x_2i+1, x_2i)."""
    T, d = x.shape[-2], x.shape[-1]
    positions = torch.arange(T) if positions is None else positions
    theta = 1.0 / 10000.0 ** (torch.arange(0, d, 2, dtype=x.dtype) / d)
    angles = (positions.to(x.dtype)[:, None] * theta).repeat_interleave(2, dim=-1)  # (T, d)
    rotated = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return x * torch.cos(angles) + rotated * torch.sin(angles)


def weights_bytes_numel(T, num_heads, batch_size=1, bytes_per_number=4):
    """Counted from the shape, as PyTorch would."""
    return math.prod((batch_size, num_heads, T, T)) * bytes_per_number


def blocked_loop_per_query(q, k, v, mask=None, block_size=4):
    """Scalar bookkeeping per query row (Python loops over rows and blocks): the textbook
    online softmax, written for one query at a time."""
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    Tq, Tk = q.shape[-2], k.shape[-2]
    q, k, v = q.expand(*lead, *q.shape[-2:]), k.expand(*lead, *k.shape[-2:]), v.expand(*lead, *v.shape[-2:])
    full_mask = None if mask is None else mask.expand(*lead, Tq, Tk)
    out = torch.zeros(*lead, Tq, v.shape[-1], dtype=q.dtype)
    for index in itertools.product(*[range(n) for n in lead]):
        for i in range(Tq):
            m, total, acc = -math.inf, 0.0, torch.zeros(v.shape[-1], dtype=q.dtype)
            for start in range(0, Tk, block_size):
                keys = k[index][start:start + block_size]
                s = keys @ q[index][i] / math.sqrt(q.shape[-1])
                if full_mask is not None:
                    s = torch.where(full_mask[index][i, start:start + block_size], s,
                                    torch.tensor(-math.inf, dtype=s.dtype))
                block_max = s.max().item()
                new_m = max(m, block_max)
                if new_m == -math.inf:
                    continue  # nothing allowed yet
                p = torch.exp(s - new_m)
                scale = math.exp(m - new_m)
                total = total * scale + p.sum().item()
                acc = acc * scale + p @ v[index][start:start + block_size]
                m = new_m
            if total > 0:
                out[index][i] = acc / total
    return out


def blocked_normalised_running(q, k, v, mask=None, block_size=4):
    """Keeps the output normalised after every block (o = a / l), renormalising with the old
    sum: o <- (o * l * e^{m - m'} + p v) / l'. Also correct; a log-sum-exp instead of (m, l)."""
    d = q.shape[-1]
    Tk = k.shape[-2]
    out = None
    lse = None  # running log-sum-exp of the scores seen so far
    for start in range(0, Tk, block_size):
        s = torch.einsum("...qd,...kd->...qk", q, k[..., start:start + block_size, :]) / math.sqrt(d)
        if mask is not None:
            s = torch.where(mask[..., start:start + block_size], s, torch.tensor(-math.inf, dtype=s.dtype))
        block_lse = torch.logsumexp(s, dim=-1, keepdim=True)
        block_weights = torch.exp(s - torch.where(torch.isinf(block_lse), torch.zeros_like(block_lse), block_lse))
        block_out = block_weights @ v[..., start:start + block_size, :]
        if out is None:
            out, lse = block_out, block_lse
            continue
        new_lse = torch.logaddexp(lse, block_lse)
        safe = torch.where(torch.isinf(new_lse), torch.zeros_like(new_lse), new_lse)
        out = out * torch.exp(lse - safe) + block_out * torch.exp(block_lse - safe)
        lse = new_lse
    return out


ALTERNATIVES = {
    "long_context_rope": [rope_complex, rope_matrix, rope_rotate_pairs_float32],
    "long_context_weights_guess": [64, 64.0, 2**36 / 2**30, 16 * 32768**2 * 4 / 1024**3, 64.05],
    "long_context_weights_bytes": [weights_bytes_numel],
    "long_context_blocked_attention": [blocked_loop_per_query, blocked_normalised_running],
}
