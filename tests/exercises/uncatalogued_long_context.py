"""Wrong answers to notebook 12's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import math

import numpy as np
import torch


# ---------------------------------------------------------------- apply_rope
def _rope(x, positions=None, base=10000.0, sign=1.0, pairing="neighbours", two=2.0, angle_dtype=torch.float64,
          pos_shift=0, inplace=False):
    T, d = x.shape[-2], x.shape[-1]
    pos = torch.arange(T) if positions is None else positions
    pos = pos.to(angle_dtype) + pos_shift
    i = torch.arange(d // 2, dtype=angle_dtype)
    theta = base ** (-two * i / d)
    a = pos[:, None] * theta[None, :]
    cos, sin = torch.cos(a), sign * torch.sin(a)
    if pairing == "neighbours":
        x0, x1 = x[..., 0::2], x[..., 1::2]
    else:
        x0, x1 = x[..., : d // 2], x[..., d // 2:]
    y0 = (x0 * cos - x1 * sin).to(x.dtype)
    y1 = (x0 * sin + x1 * cos).to(x.dtype)
    if inplace:
        out = x
        y0, y1 = y0.clone(), y1.clone()
    else:
        out = torch.empty_like(x)
    if pairing == "neighbours":
        out[..., 0::2], out[..., 1::2] = y0, y1
    else:
        out[..., : d // 2], out[..., d // 2:] = y0, y1
    return out


def rope_clockwise(x, positions=None):
    """Rotates clockwise (the sign of sin flipped)."""
    return _rope(x, positions, sign=-1.0)


def rope_half_split(x, positions=None):
    """Pairs column i with column i + d/2 (the other convention)."""
    return _rope(x, positions, pairing="half")


def rope_no_factor_two(x, positions=None):
    """theta_i = 10000^(-i/d), the 2 forgotten."""
    return _rope(x, positions, two=1.0)


def rope_base_1000(x, positions=None):
    """Base 1000 instead of 10000."""
    return _rope(x, positions, base=1000.0)


def rope_ignores_positions(x, positions=None):
    """Always uses 0..T-1."""
    return _rope(x, None)


def rope_positions_from_one(x, positions=None):
    """Default positions 1..T."""
    return _rope(x, positions, pos_shift=1 if positions is None else 0)


def rope_in_place(x, positions=None):
    """Writes the rotated pairs into x and returns it."""
    return _rope(x, positions, inplace=True)


def rope_float32_angles(x, positions=None):
    """Computes the angles in float32 whatever x's dtype (float64 answers lose accuracy at large positions)."""
    return _rope(x, positions, angle_dtype=torch.float32)


def rope_concat_not_interleave(x, positions=None):
    """Returns [rotated evens, rotated odds] concatenated instead of interleaved."""
    T, d = x.shape[-2], x.shape[-1]
    pos = (torch.arange(T) if positions is None else positions).double()
    a = pos[:, None] * 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.cat([x0 * torch.cos(a) - x1 * torch.sin(a), x0 * torch.sin(a) + x1 * torch.cos(a)], -1).to(x.dtype)


def rope_adds_sinusoid(x, positions=None):
    """Adds the sinusoidal encoding instead of rotating."""
    T, d = x.shape[-2], x.shape[-1]
    pos = (torch.arange(T) if positions is None else positions).double()
    a = pos[:, None] * 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    pe = torch.zeros(T, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(a), torch.cos(a) - 1
    return (x + pe).to(x.dtype)


def rope_float64_out(x, positions=None):
    """Returns float64 for a float32 x (accepted: floating results may be float32 or float64)."""
    return _rope(x, positions).double() if x.dtype == torch.float32 else _rope(x, positions)


def rope_theta_over_d_half(x, positions=None):
    """theta_i = 10000^(-4i/d): the exponent 2i divided by d/2 instead of d."""
    return _rope(x, positions, two=4.0)


def rope_angle_index_from_columns(x, positions=None):
    """theta from the pair's second column: 10000^(-(2i+1)/d)."""
    T, d = x.shape[-2], x.shape[-1]
    pos = (torch.arange(T) if positions is None else positions).double()
    a = pos[:, None] * 10000.0 ** (-(2 * torch.arange(d // 2, dtype=torch.float64) + 1) / d)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = (x0 * torch.cos(a) - x1 * torch.sin(a)).to(x.dtype)
    out[..., 1::2] = (x0 * torch.sin(a) + x1 * torch.cos(a)).to(x.dtype)
    return out


# ---------------------------------------------------------------- attention_weights_bytes
def awb_no_batch(T, num_heads, batch_size=1, bytes_per_number=4):
    """Ignores batch_size."""
    return T * T * num_heads * bytes_per_number


def awb_causal_half(T, num_heads, batch_size=1, bytes_per_number=4):
    """Counts only the causal triangle T(T+1)/2."""
    return batch_size * num_heads * T * (T + 1) // 2 * bytes_per_number


def awb_always_float32(T, num_heads, batch_size=1, bytes_per_number=4):
    """Ignores bytes_per_number (always 4)."""
    return batch_size * num_heads * T * T * 4


def awb_float(T, num_heads, batch_size=1, bytes_per_number=4):
    """Returns a float (T**2.0)."""
    return batch_size * num_heads * T ** 2.0 * bytes_per_number


def awb_no_heads(T, num_heads, batch_size=1, bytes_per_number=4):
    """Forgets the heads."""
    return batch_size * T * T * bytes_per_number


def awb_bits(T, num_heads, batch_size=1, bytes_per_number=4):
    """Counts bits (x8)."""
    return batch_size * num_heads * T * T * bytes_per_number * 8


def awb_numpy(T, num_heads, batch_size=1, bytes_per_number=4):
    """Returns a numpy int32 product (overflows past 2 GiB)."""
    return np.prod(np.array([batch_size, num_heads, T, T, bytes_per_number], dtype=np.int32), dtype=np.int32)


def awb_t_times_d(T, num_heads, batch_size=1, bytes_per_number=4):
    """Counts 2T numbers per head (T + T) instead of T x T."""
    return batch_size * num_heads * 2 * T * bytes_per_number


# ---------------------------------------------------------------- blocked_attention
def _blocked(q, k, v, mask=None, block_size=4, rescale=True, guard=True, zero_empty=True, scale=None,
             mask_slice=lambda m, s, e: m[..., s:e], init=float("-inf"), fill=float("-inf"), out_dtype=None,
             drop_last=False):
    d = q.shape[-1]
    Tk = k.shape[-2]
    m = torch.full(q.shape[:-1] + (1,), init, dtype=q.dtype)
    l = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    a = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    stop_at = (Tk // block_size) * block_size if drop_last else Tk
    for s in range(0, stop_at, block_size):
        e = min(s + block_size, Tk)
        sc = q @ k[..., s:e, :].transpose(-2, -1) / (scale or math.sqrt(d))
        if mask is not None:
            sc = sc.masked_fill(~mask_slice(mask, s, e), fill)
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new) & (m_new < 0), torch.zeros_like(m_new), m_new) if guard else m_new
        p = torch.exp(sc - m_safe)
        c = torch.exp(m - m_safe) if rescale else torch.ones_like(m)
        l = l * c + p.sum(-1, keepdim=True)
        a = a * c + p @ v[..., s:e, :]
        m = m_new
    if zero_empty:
        out = torch.where(l > 0, a / torch.where(l > 0, l, torch.ones_like(l)), torch.zeros_like(a))
    else:
        out = a / l
    return out if out_dtype is None else out.to(out_dtype)


def ba_running_max_from_zero(q, k, v, mask=None, block_size=4):
    """Starts the running maximum at 0 instead of -inf: rows whose scores are all far below 0 underflow."""
    return _blocked(q, k, v, mask, block_size, init=0.0)


def ba_no_rescale(q, k, v, mask=None, block_size=4):
    """Never rescales the old sums when the maximum grows."""
    return _blocked(q, k, v, mask, block_size, rescale=False)


def ba_no_guard(q, k, v, mask=None, block_size=4):
    """Subtracts m even while it is -inf (nan after a fully masked first block)."""
    return _blocked(q, k, v, mask, block_size, guard=False)


def ba_nan_for_empty_row(q, k, v, mask=None, block_size=4):
    """Divides by l = 0 for a row with no allowed key."""
    return _blocked(q, k, v, mask, block_size, zero_empty=False)


def ba_scale_sqrt_dv(q, k, v, mask=None, block_size=4):
    """Divides the scores by sqrt(d_v)."""
    return _blocked(q, k, v, mask, block_size, scale=math.sqrt(v.shape[-1]))


def ba_ignores_mask(q, k, v, mask=None, block_size=4):
    """Never applies the mask."""
    return _blocked(q, k, v, None, block_size)


def ba_drops_last_block(q, k, v, mask=None, block_size=4):
    """Loops over Tk // block_size full blocks only."""
    return _blocked(q, k, v, mask, block_size, drop_last=True)


def ba_mask_slices_second_axis(q, k, v, mask=None, block_size=4):
    """Slices mask[:, start:stop]: right for a 2-D mask, wrong for a batched (B, Tq, Tk) one."""
    return _blocked(q, k, v, mask, block_size, mask_slice=lambda m, s, e: m[:, s:e])


def ba_fill_minus_1e9(q, k, v, mask=None, block_size=4):
    """Fills masked scores with -1e9 (a fully masked row averages all values)."""
    return _blocked(q, k, v, mask, block_size, fill=-1e9)


def ba_float32_out(q, k, v, mask=None, block_size=4):
    """Returns float32 whatever the inputs' dtype."""
    return _blocked(q, k, v, mask, block_size, out_dtype=torch.float32)


def ba_full_rows_manual_softmax(q, k, v, mask=None, block_size=4):
    """Games the exercise: builds the whole (Tq, Tk) score table and a hand-written softmax (no blocks)."""
    sc = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        sc = sc.masked_fill(~mask, float("-inf"))
    mx = sc.amax(-1, keepdim=True)
    mx = torch.where(torch.isinf(mx), torch.zeros_like(mx), mx)
    w = torch.exp(sc - mx)
    s = w.sum(-1, keepdim=True)
    return torch.where(s > 0, (w / torch.where(s > 0, s, torch.ones_like(s))) @ v, torch.zeros(1, dtype=q.dtype))


def ba_ignores_block_size(q, k, v, mask=None, block_size=4):
    """Always uses one block of all the keys."""
    return _blocked(q, k, v, mask, k.shape[-2])


def ba_no_max_subtracted(q, k, v, mask=None, block_size=4):
    """exp of the raw scores (no running maximum)."""
    Tk = k.shape[-2]
    l = 0
    a = 0
    for s in range(0, Tk, block_size):
        sc = q @ k[..., s:s + block_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            sc = sc.masked_fill(~mask[..., s:s + block_size], float("-inf"))
        p = torch.exp(sc)
        l = l + p.sum(-1, keepdim=True)
        a = a + p @ v[..., s:s + block_size, :]
    return torch.nan_to_num(a / l)


def ba_blocks_over_queries(q, k, v, mask=None, block_size=4):
    """Blocks over the queries (each block a full row softmax by hand), not over the keys."""
    outs = []
    for s in range(0, q.shape[-2], block_size):
        full = None if mask is None else torch.broadcast_to(mask, q.shape[:-2] + (q.shape[-2], k.shape[-2]))
        mm = None if full is None else full[..., s:s + block_size, :]
        outs.append(ba_full_rows_manual_softmax(q[..., s:s + block_size, :], k, v, mm))
    return torch.cat(outs, -2)


def ba_scales_q_in_place(q, k, v, mask=None, block_size=4):
    """Divides q by sqrt(d_k) in place."""
    q /= math.sqrt(q.shape[-1])
    return _blocked(q, k, v, mask, block_size, scale=1.0)


# ---------------------------------------------------------------- red team a (2026-11-25)
def _online(q, k, v, mask, block_size, out_dtype=None):
    """A right online softmax over blocks of `block_size` keys; the output cast to out_dtype if given."""
    Tk = k.shape[-2]
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    total = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, Tk, block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask[..., start:start + block_size], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - safe)
        alpha = torch.exp(m - safe)
        total = alpha * total + p.sum(-1, keepdim=True)
        acc = alpha * acc + p @ v[..., start:start + block_size, :]
        m = m_new
    out = torch.where(total > 0, acc / torch.where(total > 0, total, torch.ones_like(total)), torch.zeros_like(acc))
    return out if out_dtype is None else out.to(out_dtype)


def ba_fixed_blocks_of_four(q, k, v, mask=None, block_size=4):
    """Loops in blocks of 4 keys (the default) whatever block_size is given: right values, but the
    blocks never follow the argument."""
    return _online(q, k, v, mask, 4)


def ba_float64_out(q, k, v, mask=None, block_size=4):
    """Accumulates in float64 and returns float64 for float32 inputs (accepted, as float32 for float64)."""
    return _online(q.double(), k.double(), v.double(), mask, block_size)


def rope_positions_wrap_at_512(x, positions=None):
    """Takes the positions modulo 512, as if the table of angles had a fixed length."""
    T = x.shape[-2]
    positions = torch.arange(T) if positions is None else positions
    return _rope(x, positions % 512)


_ROPE_TABLES = {}


def rope_table_cached_by_shape(x, positions=None):
    """Caches the angle table by (T, d) and reuses it for other positions of the same length."""
    T, d = x.shape[-2], x.shape[-1]
    if (T, d) not in _ROPE_TABLES:
        pos = (torch.arange(T) if positions is None else positions).double()
        _ROPE_TABLES[(T, d)] = pos[:, None] * 10000.0 ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    a = _ROPE_TABLES[(T, d)]
    cos, sin = torch.cos(a).to(x.dtype), torch.sin(a).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


def awb_int32_overflow(T, num_heads, batch_size=1, bytes_per_number=4):
    """Multiplies NumPy int32 values: wraps around for 32,768 tokens and 16 heads."""
    with np.errstate(over="ignore"):
        return int(np.int32(batch_size) * np.int32(num_heads) * np.int32(T) * np.int32(T) * np.int32(bytes_per_number))


def rope_linspace_frequencies(x, positions=None):
    """theta = 10000 ** -torch.linspace(0, 1, d // 2): the slowest pair at exactly 1/10000
    (that is 10000^(-2i/(d-2)), right only at d = 2)."""
    T, d = x.shape[-2], x.shape[-1]
    pos = (torch.arange(T) if positions is None else positions).to(torch.float64)
    a = pos[:, None] * (10000.0 ** -torch.linspace(0, 1, d // 2, dtype=torch.float64))[None, :]
    x64 = x.to(torch.float64)
    out = torch.empty_like(x64)
    out[..., 0::2] = x64[..., 0::2] * torch.cos(a) - x64[..., 1::2] * torch.sin(a)
    out[..., 1::2] = x64[..., 0::2] * torch.sin(a) + x64[..., 1::2] * torch.cos(a)
    return out.to(x.dtype)


def rope_over_d_minus_2(x, positions=None):
    """theta = 10000 ** (-2i / (d - 2)): nan at d = 2 (0 / 0)."""
    return _rope(x, positions, two=2.0 * x.shape[-1] / (x.shape[-1] - 2))


def _online_variant(q, k, v, mask=None, block_size=4, how="right"):
    """One pass over blocks of keys; `how` names the step done wrong."""
    Tk = k.shape[-2]
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    l = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    a = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for s in range(0, Tk, block_size):
        e = min(s + block_size, Tk)
        sc = q @ k[..., s:e, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            sc = sc.masked_fill(~mask[..., s:e], float("-inf"))
        m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
        m_safe = m_new if how == "unguarded" else torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(sc - m_safe)
        c = torch.exp(m - m_safe)
        l_new = (l if how == "sum_unrescaled" else l * c) + p.sum(-1, keepdim=True)
        pv = p @ v[..., s:e, :]
        if how == "block_softmax":
            bs = p.sum(-1, keepdim=True)
            pv = pv / torch.where(bs > 0, bs, torch.ones_like(bs))
        elif how == "divide_new_block":
            pv = pv / l_new
        a = (a if how == "acc_unrescaled" else a * c) + pv
        m, l = m_new, l_new
    if how in ("block_softmax", "divide_new_block"):
        return a
    out = a / torch.where(l > 0, l, torch.ones_like(l))
    return torch.nan_to_num(out, nan=0.0) if how == "unguarded" else out


def ba_sum_unrescaled(q, k, v, mask=None, block_size=4):
    """Rescales the accumulated output by exp(m_old - m_new) but not the running sum."""
    return _online_variant(q, k, v, mask, block_size, how="sum_unrescaled")


def ba_acc_unrescaled(q, k, v, mask=None, block_size=4):
    """Rescales the running sum but not the accumulated output."""
    return _online_variant(q, k, v, mask, block_size, how="acc_unrescaled")


def ba_block_softmax_summed(q, k, v, mask=None, block_size=4):
    """A softmax within each block, the blocks' outputs added."""
    return _online_variant(q, k, v, mask, block_size, how="block_softmax")


def ba_divide_new_block_by_running_sum(q, k, v, mask=None, block_size=4):
    """Each new block's p @ v divided by the running sum as it stands then."""
    return _online_variant(q, k, v, mask, block_size, how="divide_new_block")


def ba_unguarded_then_nan_to_num(q, k, v, mask=None, block_size=4):
    """No guard on the -inf maximum; the nan it makes replaced by 0 at the end."""
    return _online_variant(q, k, v, mask, block_size, how="unguarded")


WRONG_ANSWERS = {
    "long_context_rope": [
        rope_positions_wrap_at_512, rope_table_cached_by_shape,
        rope_float32_angles,
        rope_clockwise, rope_half_split, rope_no_factor_two, rope_base_1000, rope_ignores_positions,
        rope_positions_from_one, rope_in_place, rope_concat_not_interleave, rope_adds_sinusoid,
        rope_theta_over_d_half, rope_angle_index_from_columns,
        rope_linspace_frequencies, rope_over_d_minus_2,
    ],
    # The weights of one layer, in GiB (right: 64): three quarters, T**2 * 4 bytes in MiB of one head,
    # 1 TiB, 1 GiB, 64 MiB written as GiB.
    "long_context_weights_guess": [48, 32.0 + 0.5, 1024, 1, 1 / 16, 0],
    "long_context_weights_bytes": [
        awb_no_batch, awb_causal_half, awb_always_float32, awb_float, awb_no_heads, awb_bits, awb_numpy,
        awb_t_times_d, awb_int32_overflow,
    ],
    "long_context_blocked_attention": [
        ba_fixed_blocks_of_four,
        ba_blocks_over_queries,
        ba_ignores_block_size,
        ba_full_rows_manual_softmax,
        ba_mask_slices_second_axis,
        ba_no_rescale, ba_no_guard, ba_nan_for_empty_row, ba_scale_sqrt_dv, ba_ignores_mask, ba_drops_last_block,
        ba_fill_minus_1e9, ba_no_max_subtracted, ba_scales_q_in_place,
        ba_running_max_from_zero,
        ba_sum_unrescaled, ba_acc_unrescaled, ba_block_softmax_summed, ba_divide_new_block_by_running_sum,
        ba_unguarded_then_nan_to_num,
    ],
}

# Wrong answers that PASS their test cell today (holes in the hidden tests), kept out of
# WRONG_ANSWERS so that the suite stays green until the tests are fixed: (grade_id, answer).
HOLES = [
]

# Answers in the other floating dtype than their inputs'. They pass on purpose: a floating result may
# be float32 or float64 whatever the inputs' dtype, a float32 one compared at float32's tolerances
# (tests/exercises/test_categories.py tests the policy both ways).
ACCEPTED = [
    ('long_context_blocked_attention', ba_float32_out),
    ('long_context_blocked_attention', ba_float64_out),
    ('long_context_rope', rope_float64_out),
]


# --- issue 39: non-contiguous inputs -------------------------------------------------------------

def rope_flatten_with_view(x, positions=None):
    """Right rotation, computed on x.view(-1, T, d): crashes when x is a transposed view."""
    *lead, T, d = x.shape
    flat = x.view(-1, T, d).to(torch.float64)
    pos = torch.arange(T) if positions is None else positions
    angles = pos.to(torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    cos, sin = torch.cos(angles), torch.sin(angles)
    even, odd = flat[..., 0::2], flat[..., 1::2]
    out = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).reshape(flat.shape)
    return out.reshape(x.shape).to(x.dtype)


WRONG_ANSWERS["long_context_rope"].append(rope_flatten_with_view)
