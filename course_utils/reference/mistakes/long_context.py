"""Mistake catalogue of notebook 12 (long contexts).

Instructor side, as secret as the reference. Every mistake is a self-contained function with
the exercise's signature (only torch and math: the forbidden-API guard treats any other
function of `course_utils.reference` as the answer).

Why the cases look the way they do (every mistake must differ from the reference and from
every other mistake on them):

* rope: some cases use the default positions (0..T-1, so that positions counted from 1 show),
  some pass explicit, unordered positions (so that ignoring them shows); d >= 4 everywhere, so
  that pairing halves differs from pairing neighbours and 2i/d differs from i/d; 2-D, 3-D and
  4-D inputs; one float32 case with positions small enough that float32 angles are exact to
  the tolerance, and one float64 case at positions near 10^5, where angles computed in float32
  are not.
* weights_bytes: batch, heads, T and the bytes per number all differ from each other and from 1.
* blocked_attention: Tk not a multiple of the block size (a dropped tail block shows), a
  causal mask, a mask whose first key block is fully masked for some rows (an unguarded
  -inf - (-inf) = nan shows) together with a fully masked row (zero output, not nan), an
  inverted-mask-safe case, a case whose blocks' maxima differ by thousands (a maximum that
  is not carried overflows there), and batched masks (B, Tq, Tk) and (B, 1, Tk) (a mask sliced
  as mask[:, start:stop] cuts the wrong axis). That no (Tq, Tk) table is built is checked by the
  notebook's visible test (demo.peak_tensor_bytes).

rope and blocked_attention results may be float32 or float64 whatever the inputs' dtype (the
course's policy for floating results, tested both ways by tests/exercises/test_categories.py); a
float32 result is compared at float32's tolerances (`Exercise.tolerances`).
"""
import math

import torch

from course_utils.grading import ATTENTION_BUILTINS, SOFTMAX_BUILTINS
from course_utils.reference import long_context as reference
from course_utils.reference.mistakes import Exercise, Mistake, think_first
from course_utils.reference.mistakes import check as _check
from course_utils.reference.mistakes import diagnose as _diagnose

__all__ = ["EXERCISES", "HIDDEN_ONLY", "check", "diagnose"]

# Every catalogued mistake also fails a visible check.
# The think-first question's visible test can only check that the answer is a positive number:
# the number itself is the question.
HIDDEN_ONLY = {"one_head", "linear_in_T", "float64", "float16", "gb", "mib"}

DT = torch.float64


# --- long_context_rope: apply_rope(x, positions=None) --------------------------------------

def _rope_variant(x, positions=None, *, pairing="adjacent", exponent="2i/d", start=0,
                  direction=1.0, use_positions=True, rotate_half=True, swap_sin_cos=False):
    *_, T, d = x.shape
    if positions is None or not use_positions:
        positions = torch.arange(start, start + T)
    i = torch.arange(d // 2, dtype=DT)
    if exponent == "2i/(d-2)":  # the last pair at exactly 1/10000 (torch.linspace(0, 1, d // 2))
        theta = 10000.0 ** (-(2 * i) / (d - 2))
    else:
        theta = 10000.0 ** (-(2 * i if exponent == "2i/d" else i) / d)
    angles = torch.as_tensor(positions, dtype=DT)[:, None] * theta[None, :]
    cos, sin = torch.cos(angles), direction * torch.sin(angles)
    if swap_sin_cos:
        cos, sin = sin, cos
    x64 = x.to(DT)
    if pairing == "adjacent":
        first, second = x64[..., 0::2], x64[..., 1::2]
    else:
        first, second = x64[..., : d // 2], x64[..., d // 2:]
    if rotate_half:
        new_first, new_second = first * cos - second * sin, first * sin + second * cos
    else:
        new_first, new_second = first * cos + first * sin, second * cos + second * sin
    out = torch.empty_like(x64)
    if pairing == "adjacent":
        out[..., 0::2], out[..., 1::2] = new_first, new_second
    else:
        out[..., : d // 2], out[..., d // 2:] = new_first, new_second
    return out.to(x.dtype)


def rope_halves(x, positions=None):
    return _rope_variant(x, positions, pairing="halves")


def rope_exponent_i_over_d(x, positions=None):
    return _rope_variant(x, positions, exponent="i/d")


def rope_exponent_over_d_minus_2(x, positions=None):
    return _rope_variant(x, positions, exponent="2i/(d-2)")


def rope_positions_from_1(x, positions=None):
    return _rope_variant(x, positions, start=1)


def rope_wrong_direction(x, positions=None):
    return _rope_variant(x, positions, direction=-1.0)


def rope_sin_cos_swapped(x, positions=None):
    return _rope_variant(x, positions, swap_sin_cos=True)


def rope_no_rotate_half(x, positions=None):
    return _rope_variant(x, positions, rotate_half=False)


def rope_ignores_positions(x, positions=None):
    return _rope_variant(x, positions, use_positions=False)


def _rope_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, dtype=DT):
        return torch.randn(*shape, generator=g, dtype=DT).to(dtype)

    return [
        ((randn(2, 5, 8),), {}),
        ((randn(3, 6, 4),), {"positions": torch.tensor([7, 3, 0, 12, 5, 9])}),
        ((randn(2, 3, 4, 6),), {}),
        ((randn(7, 10),), {"positions": torch.arange(40, 47)}),
        ((randn(4, 9, 8, dtype=torch.float32),), {}),
        ((randn(2, 5, 12, dtype=torch.float32),), {"positions": torch.tensor([20, 2, 31, 9, 14])}),
        # Positions of a 128k-token context in float64: angles computed in float32 (whose spacing
        # is 0.008 near 10^5) are off by about 1e-3 radians there.
        ((randn(3, 4, 8),), {"positions": torch.tensor([65537, 100003, 131071, 30011])}),
    ]


ROPE = Exercise(
    grade_id="long_context_rope",
    function_name="apply_rope",
    reference=reference.apply_rope,
    make_cases=_rope_cases,
    output_names=("your rotated tensor",),
    # The demo model's own rotation ships with the widgets: calling it is using an answer.
    forbidden=tuple("course_utils.widgets.long_context:" + name for name in ("_turn", "_turns", "PositionModel")),
    atol=1e-5,
    rtol=1e-4,
    crash_hint="x is (..., T, d) with d even and positions (T,) integers (or None for 0..T-1); "
               "rotate x[..., 0::2] and x[..., 1::2] together",
    mistakes=(
        Mistake("halves",
                "you paired column i with column i + d/2 (the \"rotate half\" layout of some "
                "libraries); this course pairs neighbours: columns 2i and 2i+1 turn together.",
                rope_halves),
        Mistake("exponent_i_over_d",
                "your frequencies are base^(-i/d); pair i turns at theta_i = base^(-2i/d), so the "
                "slowest pair turns much more slowly than yours.",
                rope_exponent_i_over_d),
        Mistake("exponent_over_d_minus_2",
                "your frequencies are 10000^(-2i/(d-2)), so that the last pair turns at exactly "
                "1/10000 (as torch.linspace(0, 1, d // 2) gives): they are theta_i = 10000^(-2i/d), "
                "i = 0 .. d/2 - 1, the denominator is d (with d = 2 yours is 0/0 = nan).",
                rope_exponent_over_d_minus_2),
        Mistake("positions_from_1",
                "your default positions start at 1; they are 0, 1, ..., T-1 (the first token is "
                "not rotated).",
                rope_positions_from_1),
        Mistake("wrong_direction",
                "your rotation turns the wrong way (the signs of the sines are swapped): "
                "out_2i = x_2i cos - x_2i+1 sin and out_2i+1 = x_2i sin + x_2i+1 cos.",
                rope_wrong_direction),
        Mistake("sin_cos_swapped",
                "you swapped sin and cos: at position 0 nothing turns, so cos(0) = 1 must multiply "
                "x itself.",
                rope_sin_cos_swapped),
        Mistake("no_rotate_half",
                "you multiplied each column by cos + sin of its own angle instead of rotating the "
                "pair: the new column 2i mixes in column 2i+1 (x_2i cos - x_2i+1 sin).",
                rope_no_rotate_half),
        Mistake("ignores_positions",
                "your function ignores the `positions` argument and always uses 0..T-1.",
                rope_ignores_positions),
    ),
)


# --- long_context_weights_bytes: attention_weights_bytes(T, num_heads, batch_size=1, bytes_per_number=4)

def bytes_no_heads(T, num_heads, batch_size=1, bytes_per_number=4):
    return batch_size * T * T * bytes_per_number


def bytes_no_batch(T, num_heads, batch_size=1, bytes_per_number=4):
    return num_heads * T * T * bytes_per_number


def bytes_numbers_not_bytes(T, num_heads, batch_size=1, bytes_per_number=4):
    return batch_size * num_heads * T * T


def bytes_linear_in_T(T, num_heads, batch_size=1, bytes_per_number=4):
    return batch_size * num_heads * T * bytes_per_number


def bytes_in_gib(T, num_heads, batch_size=1, bytes_per_number=4):
    return batch_size * num_heads * T * T * bytes_per_number / 2 ** 30


def bytes_always_float32(T, num_heads, batch_size=1, bytes_per_number=4):
    return batch_size * num_heads * T * T * 4


def _bytes_cases(seed):
    return [((32768, 16), {}), ((100, 3), {"batch_size": 5}), ((7, 2), {"batch_size": 3, "bytes_per_number": 8}),
            ((1000, 12), {"batch_size": 2, "bytes_per_number": 2})]


WEIGHTS_BYTES = Exercise(
    grade_id="long_context_weights_bytes",
    function_name="attention_weights_bytes",
    reference=reference.attention_weights_bytes,
    make_cases=_bytes_cases,
    output_names=("your number of bytes",),
    atol=0.0,
    rtol=0.0,
    mistakes=(
        Mistake("no_heads", "every head has its own T x T matrix: multiply by num_heads.", bytes_no_heads),
        Mistake("no_batch", "every sequence of the batch has its own matrices: multiply by batch_size.",
                bytes_no_batch),
        Mistake("numbers_not_bytes",
                "you counted numbers, not bytes: multiply by bytes_per_number (4 for float32).",
                bytes_numbers_not_bytes),
        Mistake("linear_in_T", "a T x T matrix holds T * T numbers, not T.", bytes_linear_in_T),
        Mistake("in_gib", "return bytes, not GiB: do not divide by 2**30.", bytes_in_gib),
        Mistake("always_float32", "you always counted 4 bytes per number: use bytes_per_number.",
                bytes_always_float32),
    ),
)


# --- long_context_blocked_attention: blocked_attention(q, k, v, mask=None, block_size=4) ----

def _blocked_variant(q, k, v, mask=None, block_size=4, *, rescale=True, carry_max=True,
                     divide="end", mask_mode="-inf", scale=True, tail=True, guard_max=True,
                     guard_division=True, rescale_sum=True, rescale_acc=True):
    Tk = k.shape[-2]
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale else 1.0
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = torch.full((*lead, q.shape[-2], 1), float("-inf"), dtype=q.dtype)
    l = torch.zeros((*lead, q.shape[-2], 1), dtype=q.dtype)
    acc = torch.zeros((*lead, q.shape[-2], v.shape[-1]), dtype=q.dtype)
    stop_at = Tk if tail else Tk - block_size + 1
    for start in range(0, stop_at, block_size):
        stop = min(start + block_size, Tk)
        s = q @ k[..., start:stop, :].transpose(-2, -1) * factor
        if mask is not None and mask_mode == "-inf":
            s = s.masked_fill(~mask[..., start:stop], float("-inf"))
        elif mask is not None and mask_mode == "inverted":
            s = s.masked_fill(mask[..., start:stop], float("-inf"))
        block_max = s.amax(dim=-1, keepdim=True)
        new_max = torch.maximum(m, block_max) if carry_max else block_max
        safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max) if guard_max else new_max
        p = torch.exp(s - safe)
        with torch.no_grad():
            correction = torch.exp(m - safe)
        if not guard_max:
            correction = torch.nan_to_num(correction, nan=0.0)
        new_l = (l * correction if rescale and rescale_sum else l) + p.sum(dim=-1, keepdim=True)
        if divide == "end":
            acc = (acc * correction if rescale and rescale_acc else acc) + p @ v[..., start:stop, :]
        elif divide == "block_sum":  # each block's weights divided by that block's own sum
            block_sum = p.sum(dim=-1, keepdim=True)
            acc = acc * correction + (p / torch.where(block_sum > 0, block_sum, torch.ones_like(block_sum))) \
                @ v[..., start:stop, :]
        elif divide == "new_block_only":  # only the new block divided by the running sum
            acc = acc * correction + (p @ v[..., start:stop, :]) / new_l
        else:  # divided inside the loop, without undoing the previous division
            acc = (acc * correction + p @ v[..., start:stop, :]) / new_l
        l, m = new_l, new_max
    if divide != "end":
        return acc
    if guard_division:
        return acc / torch.where(l > 0, l, torch.ones_like(l))
    return acc / l


def blocked_no_rescale(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, rescale=False)


def blocked_sum_not_rescaled(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, rescale_sum=False)


def blocked_output_not_rescaled(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, rescale_acc=False)


def blocked_divide_by_block_sum(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, divide="block_sum")


def blocked_divide_new_block(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, divide="new_block_only")


def blocked_unguarded_nan_to_zero(q, k, v, mask=None, block_size=4):
    """The -inf left unguarded, and the nan it makes set to 0 at the end."""
    return torch.nan_to_num(_blocked_variant(q, k, v, mask, block_size, guard_max=False), nan=0.0)


def blocked_max_not_carried(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, carry_max=False)


def blocked_divide_in_loop(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, divide="loop")


def blocked_mask_ignored(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, mask_mode="ignored")


def blocked_mask_inverted(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, mask_mode="inverted")


def blocked_no_scaling(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, scale=False)


def blocked_drops_last_block(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, tail=False)


def blocked_unguarded_max(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, guard_max=False, guard_division=False)


def blocked_nan_for_masked_row(q, k, v, mask=None, block_size=4):
    return _blocked_variant(q, k, v, mask, block_size, guard_division=False)


def blocked_full_softmax(q, k, v, mask=None, block_size=4):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return weights @ v


def blocked_builtin_sdpa(q, k, v, mask=None, block_size=4):
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if mask is not None:
        out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return torch.nan_to_num(out, nan=0.0)


def _blocked_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=DT)

    # Every row has an allowed and a blocked key; row 1 and 2 see nothing in the first 4 keys;
    # row 3 sees no key at all.
    Tq, Tk = 5, 11
    mask = torch.rand(Tq, Tk, generator=g) < 0.6
    mask[:, 4] = True
    mask[:, 9] = False
    mask[1:3, :4] = False
    mask[3] = False
    # Blocks whose maxima differ by thousands: the first block scores exactly +4050, the rest
    # exactly -4050 (exp(8100) overflows float64); exact scores, so float32 answers agree too.
    d = 4
    u = torch.ones(d, dtype=DT)
    q_big = 45.0 * u.expand(3, d).clone()
    k_big = torch.cat([45.0 * u.expand(3, d), -45.0 * u.expand(7, d)])
    batch_mask = torch.rand(3, 5, 10, generator=g) < 0.5
    batch_mask[..., 0] = True  # every row sees a key
    padding_mask = (torch.arange(7)[None, :] < torch.tensor([7, 4])[:, None])[:, None, :]
    return [
        ((randn(2, 6, 4), randn(2, 9, 4), randn(2, 9, 5)), {"block_size": 4}),
        ((randn(2, 3, 7, 6), randn(2, 3, 7, 6), randn(2, 3, 7, 3)),
         {"mask": torch.ones(7, 7, dtype=torch.bool).tril(), "block_size": 3}),
        ((randn(2, Tq, 6), randn(2, Tk, 6), randn(2, Tk, 3)), {"mask": mask, "block_size": 4}),
        ((q_big, k_big, randn(10, 2)), {"block_size": 3}),
        ((randn(4, 8), randn(13, 8), randn(13, 2)), {"block_size": 5}),
        # A mask per sequence of the batch, (B, Tq, Tk), and a key-padding mask (B, 1, Tk) that
        # broadcasts over the queries: slicing mask[:, start:stop], as if it were (Tq, Tk), cuts the
        # wrong axis.
        ((randn(3, 5, 4), randn(3, 10, 4), randn(3, 10, 2)), {"mask": batch_mask, "block_size": 4}),
        ((randn(2, 6, 4), randn(2, 7, 4), randn(2, 7, 3)), {"mask": padding_mask, "block_size": 3}),
        # Every score of every row exactly -4050: a running maximum started at 0 instead of -inf
        # lets exp(score - 0) underflow to 0 in every block, and the rows come out as zeros.
        ((-45.0 * u.expand(3, d).clone(), 45.0 * u.expand(7, d).clone(), randn(7, 2)), {"block_size": 3}),
    ]


BLOCKED = Exercise(
    grade_id="long_context_blocked_attention",
    function_name="blocked_attention",
    reference=reference.blocked_attention,
    make_cases=_blocked_cases,
    output_names=("your output",),
    forbidden=SOFTMAX_BUILTINS + ATTENTION_BUILTINS,
    atol=1e-6,
    rtol=1e-5,
    crash_hint="q is (..., Tq, d_k), k (..., Tk, d_k), v (..., Tk, d_v), mask broadcastable to "
               "(..., Tq, Tk); slice the keys, values and the mask's last axis with "
               "[..., start:start + block_size]",
    mistakes=(
        Mistake("full_softmax", "Your code uses torch.softmax", blocked_full_softmax),
        Mistake("builtin_sdpa", "Your code uses torch.nn.functional.scaled_dot_product_attention",
                blocked_builtin_sdpa),
        Mistake("mask_ignored",
                "your output ignores the mask: set the scores of blocked keys (mask False) to -inf "
                "in every block.",
                blocked_mask_ignored),
        Mistake("mask_inverted",
                "your mask is inverted: True means the query may attend to that key, so fill the "
                "scores where the mask is False.",
                blocked_mask_inverted),
        Mistake("no_scaling",
                "your scores are not divided by sqrt(d_k).",
                blocked_no_scaling),
        Mistake("drops_last_block",
                "your loop skips the last, shorter block when block_size does not divide Tk: loop "
                "over range(0, Tk, block_size) and slice [start:start + block_size].",
                blocked_drops_last_block),
        Mistake("no_rescale",
                "when a block raises the running maximum you did not rescale the running sum and the "
                "accumulated output by exp(old max - new max).",
                blocked_no_rescale),
        Mistake("sum_not_rescaled",
                "you rescaled the accumulated output but not the running sum: when a block raises the "
                "running maximum, both are in units of exp(old max), so multiply the sum by "
                "exp(old max - new max) too (l = l * correction + p.sum(-1, keepdim=True)).",
                blocked_sum_not_rescaled),
        Mistake("output_not_rescaled",
                "you rescaled the running sum but not the accumulated output: when a block raises the "
                "running maximum, multiply the output so far by exp(old max - new max) too "
                "(acc = acc * correction + p @ v_block).",
                blocked_output_not_rescaled),
        Mistake("max_not_carried",
                "you used each block's own maximum instead of the running maximum over all blocks "
                "so far; with scores far apart, exp(old max - block max) overflows.",
                blocked_max_not_carried),
        Mistake("divide_in_loop",
                "you divided by the running sum inside the loop, before the last block: earlier "
                "blocks stay divided by an incomplete sum. Divide once, after the loop.",
                blocked_divide_in_loop),
        Mistake("divide_by_block_sum",
                "you divided each block's weights by that block's own sum, so every block counts as "
                "much as a whole softmax: keep the exp(score - max) unnormalised, add their sum to the "
                "running sum, and divide the accumulated output once, after the last block.",
                blocked_divide_by_block_sum),
        Mistake("divide_new_block",
                "you divided each new block's p @ v by the running sum so far, which still grows in "
                "the later blocks: accumulate p @ v undivided and divide by the running sum once, "
                "after the last block.",
                blocked_divide_new_block),
        Mistake("unguarded_max",
                "a row whose first block is fully masked has running maximum -inf, and "
                "exp(-inf - (-inf)) is nan: subtract 0 instead of the maximum while it is -inf.",
                blocked_unguarded_max),
        Mistake("unguarded_nan_to_zero",
                "you set the nan of your output to 0, but a row whose first block is fully masked got "
                "nan from exp(-inf - (-inf)) and still has allowed keys later: its output is their "
                "weighted values, not 0. Subtract 0 instead of the running maximum while it is -inf.",
                blocked_unguarded_nan_to_zero),
        Mistake("nan_for_masked_row",
                "a query with no allowed key must get a zero output: its running sum is 0, so "
                "divide by 1 there instead of 0.",
                blocked_nan_for_masked_row),
    ),
)


# --------------------------------------------------------------------------- think first: the weights' size

# One layer, 16 heads, one sequence of T = 32,768 tokens, float32: 16 * 32768**2 * 4 bytes = 64 GiB.
_GUESS = dict(T=32768, heads=16, batch=1, bytes=4)


def _guess_gib(T=_GUESS["T"], heads=_GUESS["heads"], batch=_GUESS["batch"], nbytes=_GUESS["bytes"], unit=2**30):
    return batch * heads * T * T * nbytes / unit


# The numbers vary by student (course_utils.grading.questions): heads and T; always one layer,
# one sequence, float32.
WEIGHTS_GUESS = think_first(
    "long_context_weights_guess", "weights_gib", lambda heads, T: _guess_gib(T=T, heads=heads),
    mistakes=(
        Mistake("one_head", "that is one head's matrix: every head of the layer has its own T x T "
                "weights.", lambda heads, T: _guess_gib(T=T, heads=1)),
        Mistake("linear_in_T", "that grows like T, not T^2: each head holds a T x T matrix, one weight per "
                "(query, key) pair.", lambda heads, T: heads * T * 4 / 2**30),
        Mistake("float64", "that counts a number at float64's size; the weights are in float32.",
                lambda heads, T: _guess_gib(T=T, heads=heads, nbytes=8)),
        Mistake("float16", "that counts a number at float16's size; the weights are in float32.",
                lambda heads, T: _guess_gib(T=T, heads=heads, nbytes=2)),
        Mistake("gb", "that is in GB (powers of ten): the question asks for GiB, powers of two.",
                lambda heads, T: _guess_gib(T=T, heads=heads, unit=1e9)),
        Mistake("mib", "that is in MiB: the question asks for GiB.",
                lambda heads, T: _guess_gib(T=T, heads=heads, unit=2**20)),
    ),
    answer_name="your guess (GiB)", rtol=2e-3)

EXERCISES = {exercise.grade_id: exercise for exercise in (ROPE, WEIGHTS_GUESS, WEIGHTS_BYTES, BLOCKED)}


def check(grade_id, fn):
    """Raise GradingError naming the mistake if `fn` is wrong; return None if right."""
    return _check(EXERCISES, grade_id, fn)


def diagnose(grade_id, fn):
    """The first hidden block of a test cell: raise only what can be named (a catalogued
    mistake, a crash, a forbidden call), so that the visible checks speak next."""
    return _diagnose(EXERCISES, grade_id, fn)
