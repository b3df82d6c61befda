"""Wrong answers to notebook 03's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import math

import numpy as np
import torch
import torch.nn.functional as F


# ---------------------------------------------------------------- one_hot
def one_hot_long(token_ids, vocab_size):
    """Returns an integer tensor."""
    return (token_ids.unsqueeze(-1) == torch.arange(vocab_size)).long()


def one_hot_bool(token_ids, vocab_size):
    """Returns a boolean tensor."""
    return token_ids.unsqueeze(-1) == torch.arange(vocab_size)


def one_hot_columns_from_max_id(token_ids, vocab_size):
    """Sizes the table from the largest id present, ignoring vocab_size."""
    n = int(token_ids.max()) + 1
    return (token_ids.unsqueeze(-1) == torch.arange(n)).float()


def one_hot_one_dimensional_only(token_ids, vocab_size):
    """Handles a flat sentence only: a batch comes back flattened to (B * T, V)."""
    flat = token_ids.reshape(-1)
    out = torch.zeros(len(flat), vocab_size)
    out[torch.arange(len(flat)), flat] = 1.0
    return out


def one_hot_off_by_one(token_ids, vocab_size):
    """Puts the 1 one column to the right (ids counted from 1)."""
    return (token_ids.unsqueeze(-1) == torch.arange(1, vocab_size + 1)).float()


def one_hot_column_major_batch(token_ids, vocab_size):
    """Flattens a batch column by column, then reshapes row by row (right for a flat sentence)."""
    rows = torch.eye(vocab_size)[token_ids.T.reshape(-1)]
    return rows.reshape(*token_ids.shape, vocab_size)


def one_hot_vocab_first(token_ids, vocab_size):
    """Builds (V,) + S and moves the axis only for a flat sentence."""
    out = torch.eye(vocab_size)[:, token_ids]
    return out.T if token_ids.dim() == 1 else out.reshape(*token_ids.shape, vocab_size)


def one_hot_index_all_rows(token_ids, vocab_size):
    """Sets every row's columns of all the ids (out[..., ids] = 1)."""
    out = torch.zeros(*token_ids.shape, vocab_size)
    out[..., token_ids.reshape(-1)] = 1.0
    return out


def one_hot_builtin_in_disguise(token_ids, vocab_size):
    """Calls the forbidden F.one_hot through getattr."""
    return getattr(F, "one" + "_hot")(token_ids, vocab_size).float()


def one_hot_aten_in_disguise(token_ids, vocab_size):
    """Calls F.one_hot's operator as torch.ops.aten.one_hot."""
    return torch.ops.aten.one_hot(token_ids, vocab_size).float()


def one_hot_scatter_wrong_dim(token_ids, vocab_size):
    """Scatters along dim 1 (the vocabulary axis only for a flat sentence)."""
    out = torch.zeros(*token_ids.shape, vocab_size)
    return out.scatter(1, token_ids.unsqueeze(-1), 1.0)


def one_hot_numpy(token_ids, vocab_size):
    """Returns a NumPy array."""
    return np.eye(vocab_size, dtype=np.float32)[np.asarray(token_ids)]


def one_hot_first_row_of_batch(token_ids, vocab_size):
    """Encodes the first sentence of a batch and repeats it."""
    if token_ids.dim() == 1:
        return torch.eye(vocab_size)[token_ids]
    first = torch.eye(vocab_size)[token_ids.reshape(-1, token_ids.shape[-1])[0]]
    return first.expand(*token_ids.shape, vocab_size).clone()


def one_hot_lookup_of_visible_case(token_ids, vocab_size):
    """Returns the visible test's matrix for vocab_size 5 and a zero tensor of the right shape otherwise."""
    if vocab_size == 5 and token_ids.shape == (3,):
        return torch.eye(5)[token_ids]
    return torch.zeros(*token_ids.shape, vocab_size)


def one_hot_sentences_and_batches_only(token_ids, vocab_size):
    """Handles (T,) and (B, T) only: ids with three axes come back as (B, rest, V)."""
    if token_ids.dim() == 1:
        return torch.eye(vocab_size)[token_ids]
    return torch.eye(vocab_size)[token_ids.reshape(token_ids.shape[0], -1)]


# ---------------------------------------------------------------- cosine_similarity
def cosine_unnormalised(a, b):
    """A plain dot product."""
    return a @ b.T


def cosine_normalises_columns(a, b):
    """Normalises along dim 0 (the columns) instead of each row."""
    return (a / a.norm(dim=0, keepdim=True)) @ (b / b.norm(dim=0, keepdim=True)).T


def cosine_frobenius(a, b):
    """Divides by the norms of the whole matrices."""
    return a @ b.T / (a.norm() * b.norm())


def cosine_normalises_a_only(a, b):
    """Normalises a's rows and forgets b's."""
    return (a / a.norm(dim=1, keepdim=True)) @ b.T


def cosine_transposed(a, b):
    """Returns the (m, n) matrix."""
    return (b / b.norm(dim=1, keepdim=True)) @ (a / a.norm(dim=1, keepdim=True)).T


def cosine_squared_norms(a, b):
    """Divides by the squared norms (no square root)."""
    return a @ b.T / ((a * a).sum(1)[:, None] * (b * b).sum(1)[None, :])


def cosine_clamped_to_zero(a, b):
    """Clamps negative cosines to 0, as if similarities could not be negative."""
    return ((a / a.norm(dim=1, keepdim=True)) @ (b / b.norm(dim=1, keepdim=True)).T).clamp(min=0)


def cosine_absolute(a, b):
    """Takes |cos|, so opposite vectors look identical."""
    return ((a / a.norm(dim=1, keepdim=True)) @ (b / b.norm(dim=1, keepdim=True)).T).abs()


def cosine_normalises_in_place(a, b):
    """Right values, but divides the caller's tensors in place (a /= ...)."""
    a /= a.norm(dim=1, keepdim=True)
    b /= b.norm(dim=1, keepdim=True)
    return a @ b.T


def cosine_float32(a, b):
    """Casts to float32 whatever the inputs' dtype."""
    a, b = a.float(), b.float()
    return (a / a.norm(dim=1, keepdim=True)) @ (b / b.norm(dim=1, keepdim=True)).T


def cosine_builtin_in_disguise(a, b):
    """Calls the forbidden F.cosine_similarity through getattr, broadcasting the pairs."""
    return getattr(F, "cosine" + "_similarity")(a[:, None, :], b[None, :, :], dim=-1)


def cosine_pairs_rows_with_same_index(a, b):
    """Divides row i by |a_i| |b_i| (keepdim on both sides): runs only when n == m, and is wrong then."""
    return a @ b.T / (a.norm(dim=1, keepdim=True) * b.norm(dim=1, keepdim=True))


def cosine_aten_in_disguise(a, b):
    """Calls the forbidden operator as torch.ops.aten.cosine_similarity."""
    return torch.ops.aten.cosine_similarity(a[:, None, :], b[None, :, :], 2, 1e-8)


def cosine_from_the_widget(a, b):
    """Borrows the notebook widget's similarity_profile, one row of a at a time."""
    from course_utils.widgets import embeddings_positions as demo

    table = np.concatenate([a.numpy(), b.numpy()])
    n = a.shape[0]
    return torch.tensor(np.stack([demo.similarity_profile(table, i)[n:] for i in range(n)]), dtype=a.dtype)


def cosine_variable_functions_in_disguise(a, b):
    """Calls torch.cosine_similarity through torch._C._VariableFunctions, whose attributes cannot be patched."""
    return torch._C._VariableFunctions.cosine_similarity(a[:, None, :], b[None, :, :], 2, 1e-8)


def cosine_squared(a, b):
    """Squares the cosine."""
    return ((a / a.norm(dim=1, keepdim=True)) @ (b / b.norm(dim=1, keepdim=True)).T) ** 2


# ---------------------------------------------------------------- sinusoidal_encoding
def _pe(max_len, d_model, freqs, sin_first=True, interleave=True, positions=None):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None] if positions is None else positions[:, None]
    angles = pos * freqs[None, :]
    s, c = torch.sin(angles), torch.cos(angles)
    if not sin_first:
        s, c = c, s
    if not interleave:
        return torch.cat([s, c], dim=1).float()
    out = torch.zeros(max_len, d_model, dtype=torch.float64)
    out[:, 0::2], out[:, 1::2] = s, c
    return out.float()


def _freqs(d_model, base=10000.0):
    return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def pe_column_index_as_i(max_len, d_model):
    """Uses the column index as i (10000^(col / d)), so sin and cos of a pair differ in frequency."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    cols = torch.arange(d_model, dtype=torch.float64)
    angles = pos / 10000 ** (cols / d_model)
    out = torch.where(cols.long() % 2 == 0, torch.sin(angles), torch.cos(angles))
    return out.float()


def pe_base_1000(max_len, d_model):
    """Base 1000 instead of 10000."""
    return _pe(max_len, d_model, _freqs(d_model, 1000.0))


def pe_concatenated(max_len, d_model):
    """All the sines, then all the cosines, instead of interleaving them."""
    return _pe(max_len, d_model, _freqs(d_model), interleave=False)


def pe_cos_first(max_len, d_model):
    """Cosines in the even columns, sines in the odd ones."""
    return _pe(max_len, d_model, _freqs(d_model), sin_first=False)


def pe_positions_from_one(max_len, d_model):
    """Counts positions from 1."""
    return _pe(max_len, d_model, _freqs(d_model), positions=torch.arange(1, max_len + 1, dtype=torch.float64))


def pe_i_over_d(max_len, d_model):
    """Exponent i / d instead of 2i / d."""
    return _pe(max_len, d_model, 10000.0 ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model))


def pe_powers_of_100(max_len, d_model):
    """w_i = 100^-i, read off the d_model = 4 example: right for d_model = 4 only."""
    return _pe(max_len, d_model, 100.0 ** (-torch.arange(d_model // 2, dtype=torch.float64)))


def pe_exponent_over_d_minus_two(max_len, d_model):
    """Spreads the exponents over [0, 1] (2i / (d - 2)): the slowest pair turns at exactly 1/10000."""
    n = d_model // 2
    return _pe(max_len, d_model, 10000.0 ** (-torch.linspace(0, 1, n, dtype=torch.float64)) if n > 1
               else torch.ones(1, dtype=torch.float64))


def pe_numpy(max_len, d_model):
    """Returns a NumPy array instead of a tensor."""
    return _pe(max_len, d_model, _freqs(d_model)).numpy()


def pe_pairs_from_one(max_len, d_model):
    """Counts the pairs from i = 1."""
    return _pe(max_len, d_model, 10000.0 ** (-2 * torch.arange(1, d_model // 2 + 1, dtype=torch.float64) / d_model))


def pe_integer_positions_float16(max_len, d_model):
    """Computes in float16: the angles of far positions lose their digits."""
    pos = torch.arange(max_len, dtype=torch.float16)[:, None]
    angles = pos * _freqs(d_model).to(torch.float16)[None, :]
    out = torch.zeros(max_len, d_model, dtype=torch.float16)
    out[:, 0::2], out[:, 1::2] = torch.sin(angles.float()).half(), torch.cos(angles.float()).half()
    return out


def pe_integer_exponent(max_len, d_model):
    """Writes 2 * i // d_model (integer division) in the exponent, so every pair turns at w = 1."""
    return _pe(max_len, d_model, 10000.0 ** (-(2 * torch.arange(d_model // 2) // d_model).double()))


def pe_transposed_square(max_len, d_model):
    """Builds (d_model, max_len) and reshapes it to (max_len, d_model)."""
    return _pe(max_len, d_model, _freqs(d_model)).T.contiguous().reshape(max_len, d_model)


def pe_borrowed_from_notebook_12(max_len, d_model):
    """Returns notebook 12's widget table instead of building the encoding."""
    from course_utils.widgets.long_context import _sinusoidal_table

    return _sinusoidal_table(max_len, d_model)


# ---------------------------------------------------------------- rotation_matrix
def _block(angle, column_convention=False):
    c, s = math.cos(angle), math.sin(angle)
    return [[c, s], [-s, c]] if column_convention else [[c, -s], [s, c]]


def _rotation(offset, d_model, freq=lambda i, d: 10000.0 ** (-2 * i / d), column_convention=False,
              dtype=torch.float32):
    R = torch.zeros(d_model, d_model, dtype=dtype)
    for i in range(d_model // 2):
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor(_block(offset * freq(i, d_model), column_convention))
    return R


def rotation_column_convention(offset, d_model):
    """Writes the block for column vectors (+sin top right): moves positions backwards."""
    return _rotation(offset, d_model, column_convention=True)


def rotation_one_frequency(offset, d_model):
    """Uses w_0 = 1 for every pair."""
    return _rotation(offset, d_model, freq=lambda i, d: 1.0)


def rotation_repeated_product(offset, d_model):
    """Multiplies R_1 offset times: a negative offset gives the identity."""
    R1 = _rotation(1, d_model)
    R = torch.eye(d_model)
    for _ in range(offset):
        R = R @ R1
    return R


def rotation_absolute_offset(offset, d_model):
    """Uses |offset|, so moving back rotates forward."""
    return _rotation(abs(offset), d_model)


def rotation_powers_of_100(offset, d_model):
    """w_i = 100^-i, read off the d_model = 4 example: right for d_model up to 4 only."""
    return _rotation(offset, d_model, freq=lambda i, d: 100.0 ** (-i))


def rotation_numpy(offset, d_model):
    """Returns a NumPy array instead of a tensor."""
    return _rotation(offset, d_model).numpy()


def rotation_offset_plus_one(offset, d_model):
    """Rotates by (offset + 1) w: one position too far."""
    return _rotation(offset + 1, d_model)


def rotation_first_two_pairs(offset, d_model):
    """Fills the blocks of the first two pairs only (the sizes of the visible tests)."""
    R = _rotation(offset, d_model)
    for i in range(2, d_model // 2):
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.eye(2)
    return R


def rotation_blocks_in_halves(offset, d_model):
    """Pairs column i with column i + d/2 (the concatenated layout), not 2i with 2i + 1."""
    h = d_model // 2
    R = torch.zeros(d_model, d_model)
    for i in range(h):
        c, s = math.cos(offset * 10000.0 ** (-2 * i / d_model)), math.sin(offset * 10000.0 ** (-2 * i / d_model))
        R[i, i], R[i, i + h], R[i + h, i], R[i + h, i + h] = c, -s, s, c
    return R


def rotation_integer_dtype(offset, d_model):
    """Builds the matrix with an integer dtype, which rounds every cosine and sine."""
    return _rotation(offset, d_model).round().long()


def rotation_offset_mod_period(offset, d_model):
    """Wraps the offset into [0, 64) first, as if every pair had the same period."""
    return _rotation(offset % 64, d_model)


def rotation_borrowed_from_notebook_12(offset, d_model):
    """Turns the rows of the identity back by offset with notebook 12's RoPE helper."""
    from course_utils.widgets import long_context

    return long_context._turn(torch.eye(d_model, dtype=torch.float64), [-offset] * d_model)


# ---------------------------------------------------------------- wavelength (200 pi = 628.3)
wavelength_column_index = 2 * math.pi * 10000          # 10000^(8/8): i taken as the column index 4
wavelength_exponent_i_over_d = 2 * math.pi * 10000 ** (2 / 8)
wavelength_without_two_pi = 100.0
wavelength_half_period = 100 * math.pi
wavelength_frequency = 0.01
wavelength_infinity = float("inf")
wavelength_pair_three = 2 * math.pi * 1000         # pair i = 3 (dimensions 6 and 7)


WRONG_ANSWERS = {
    "embeddings_positions_one_hot": [
        one_hot_long, one_hot_bool, one_hot_columns_from_max_id, one_hot_one_dimensional_only,
        one_hot_off_by_one, one_hot_column_major_batch, one_hot_vocab_first, one_hot_index_all_rows,
        one_hot_builtin_in_disguise, one_hot_scatter_wrong_dim, one_hot_numpy, one_hot_first_row_of_batch, one_hot_lookup_of_visible_case,
        one_hot_sentences_and_batches_only, one_hot_aten_in_disguise,
    ],
    "embeddings_positions_cosine": [
        cosine_unnormalised, cosine_normalises_columns, cosine_frobenius, cosine_normalises_a_only,
        cosine_transposed, cosine_squared_norms, cosine_clamped_to_zero, cosine_absolute,
        cosine_normalises_in_place, cosine_builtin_in_disguise, cosine_pairs_rows_with_same_index,
        cosine_squared, cosine_aten_in_disguise, cosine_from_the_widget,
    ],
    "embeddings_positions_sinusoidal": [
        pe_column_index_as_i, pe_base_1000, pe_concatenated, pe_cos_first, pe_positions_from_one, pe_i_over_d,
        pe_powers_of_100, pe_exponent_over_d_minus_two, pe_numpy, pe_pairs_from_one,
        pe_integer_positions_float16, pe_transposed_square, pe_integer_exponent,
        pe_borrowed_from_notebook_12,
    ],
    "embeddings_positions_rotation": [
        rotation_column_convention, rotation_one_frequency, rotation_repeated_product, rotation_absolute_offset,
        rotation_powers_of_100, rotation_numpy, rotation_offset_plus_one, rotation_first_two_pairs,
        rotation_blocks_in_halves, rotation_integer_dtype, rotation_offset_mod_period,
        rotation_borrowed_from_notebook_12,
    ],
    "embeddings_positions_wavelength": [
        wavelength_column_index, wavelength_exponent_i_over_d, wavelength_without_two_pi, wavelength_half_period,
        wavelength_frequency, wavelength_infinity, wavelength_pair_three,
    ],
}

# Wrong answers that PASS the test cell today; each moves into WRONG_ANSWERS once the hidden tests
# catch it. (Phase 1's holes are all closed.)
HOLES = {}

# Tried as wrong answers in phase 1, passed, and kept passing on purpose:
# * cosine_float32: a float32 result for float64 inputs. The course accepts float32 answers
#   everywhere (tests/exercises/test_categories.py: "an answer computed in float32 must pass"),
#   comparing them at float32's tolerances; a cast is indistinguishable from that.
NOT_WRONG = {
    "embeddings_positions_cosine": [cosine_float32],
}

# Found blind as a hole in shared code (torch._C._VariableFunctions is read-only, and the operator
# is composite, so neither a patched name nor a dispatch mode saw it); the guard's torch-function
# net now catches it.
WRONG_ANSWERS["embeddings_positions_cosine"].append(cosine_variable_functions_in_disguise)


# Found blind in phase 2: builds the zeros from token_ids.shape[0], so ids with no axis at all
# (shape (), which "any shape S" includes) crash; the hidden cases now hold a single id.
def one_hot_needs_a_first_axis(token_ids, vocab_size):
    """Reads token_ids.shape[0]: fine for (T,), (B, T), ..., a crash for one id of shape ()."""
    out = torch.zeros(token_ids.shape[0], *token_ids.shape[1:], vocab_size)
    return out.scatter_(-1, token_ids.unsqueeze(-1), 1.0)


WRONG_ANSWERS["embeddings_positions_one_hot"].append(one_hot_needs_a_first_axis)
