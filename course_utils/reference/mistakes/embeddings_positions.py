"""Mistake catalogue of notebook 03 (embeddings and positional encoding).

Each mistake is computed by a self-contained function with the exercise's signature (only
torch and math: the forbidden-API guard treats any other function of course_utils.reference,
and the exercise's forbidden built-ins, as the answer). Cases are chosen so that every mistake
differs from the reference and from every other mistake on at least one of them.
"""
import math

import torch

from course_utils.reference.embeddings_positions import cosine_similarity as _ref_cosine_similarity
from course_utils.reference.embeddings_positions import one_hot as _ref_one_hot
from course_utils.reference.embeddings_positions import pair_wavelength as _ref_pair_wavelength
from course_utils.reference.mistakes import Exercise, Mistake, think_first
from course_utils.reference.mistakes import diagnose as _diagnose
from course_utils.reference.mistakes import check as _check
from course_utils.reference.positions import relative_rotation as _ref_relative_rotation
from course_utils.reference.positions import sinusoidal_positional_encoding as _ref_sinusoidal

# Every catalogued mistake fails a visible test too.
HIDDEN_ONLY = set()


# --- embeddings_positions_one_hot: one_hot(token_ids, vocab_size) --------------------------

def oh_vocab_from_ids(token_ids, vocab_size):
    return torch.eye(int(token_ids.max()) + 1)[token_ids]


def oh_transposed(token_ids, vocab_size):
    return torch.eye(vocab_size)[token_ids].movedim(-1, 0)


def oh_flattened(token_ids, vocab_size):
    return torch.eye(vocab_size)[token_ids.reshape(-1)]


def _one_hot_cases(seed):
    generator = torch.Generator().manual_seed(seed)
    return [
        ((torch.randint(0, 8, (7,), generator=generator), 10), {}),  # the largest ids never occur
        ((torch.randint(0, 7, (3, 4), generator=generator), 9), {}),
        ((torch.tensor([4, 0, 4, 2]), 5), {}),
        # "any shape S": three axes, so that an answer written for (T,) and (B, T) only shows
        ((torch.randint(0, 6, (2, 3, 4), generator=generator), 6), {}),
        # ... and no axis at all: one id, shape (), gives one row of shape (vocab_size,)
        ((torch.tensor(3), 7), {}),
    ]


ONE_HOT = Exercise(
    grade_id="embeddings_positions_one_hot",
    function_name="one_hot",
    reference=_ref_one_hot,
    make_cases=_one_hot_cases,
    mistakes=(
        Mistake(
            "vocab_from_ids",
            "your one-hot rows have max(token_ids) + 1 columns instead of vocab_size: a word that "
            "does not occur in this batch still has a column (F.one_hot guesses the size unless told).",
            oh_vocab_from_ids,
        ),
        Mistake(
            "transposed",
            "your vocabulary axis comes first: the one-hot vectors should be the rows, shape "
            "token_ids.shape + (vocab_size,), so that one_hot(ids) @ W picks rows of W.",
            oh_transposed,
        ),
        Mistake(
            "flattened",
            "you flattened the batch: for token_ids of shape (B, T) the result should keep that "
            "shape and add the vocabulary axis, (B, T, vocab_size).",
            oh_flattened,
        ),
    ),
    # torch.ops.aten.one_hot is the same operator as a packet that F.one_hot's recorder does not reach
    forbidden=("torch.nn.functional:one_hot", "torch:ops.aten.one_hot"),
    output_names=("your one-hot tensor",),
)


# --- embeddings_positions_cosine: cosine_similarity(a, b) ----------------------------------

def cos_unnormalised(a, b):
    return a @ b.T


def cos_normalises_a_only(a, b):
    return (a / a.norm(dim=-1, keepdim=True)) @ b.T


def cos_normalises_b_only(a, b):
    return a @ (b / b.norm(dim=-1, keepdim=True)).T


def cos_squared_norms(a, b):
    return (a @ b.T) / ((a * a).sum(-1)[:, None] * (b * b).sum(-1)[None, :])


def cos_whole_matrix_norms(a, b):
    return (a @ b.T) / (a.norm() * b.norm())


def cos_feature_axis(a, b):
    return (a / a.norm(dim=0, keepdim=True)) @ (b / b.norm(dim=0, keepdim=True)).T


def _cosine_cases(seed):
    generator = torch.Generator().manual_seed(seed)
    cases = []
    for n, m, d in [(5, 4, 8), (3, 7, 6), (2, 2, 3)]:
        a = torch.randn(n, d, generator=generator, dtype=torch.float64)
        b = torch.randn(m, d, generator=generator, dtype=torch.float64)
        a = a * (0.5 + 3 * torch.rand(n, 1, generator=generator, dtype=torch.float64))  # lengths far from 1
        b = b * (0.5 + 3 * torch.rand(m, 1, generator=generator, dtype=torch.float64))
        cases.append(((a, b), {}))
    return cases


COSINE = Exercise(
    grade_id="embeddings_positions_cosine",
    function_name="cosine_similarity",
    reference=_ref_cosine_similarity,
    make_cases=_cosine_cases,
    mistakes=(
        Mistake(
            "unnormalised",
            "your result is the plain dot product a @ b.T: divide each entry by the lengths "
            "|a_i| |b_j| so that only the directions count.",
            cos_unnormalised,
        ),
        Mistake(
            "normalises_a_only",
            "you divided by the lengths of the rows of a but not of b: both vectors must have length 1.",
            cos_normalises_a_only,
        ),
        Mistake(
            "normalises_b_only",
            "you divided by the lengths of the rows of b but not of a: both vectors must have length 1.",
            cos_normalises_b_only,
        ),
        Mistake(
            "squared_norms",
            "you divided by the squared lengths |a_i|^2 |b_j|^2: the cosine divides by the lengths "
            "themselves (take the square root of the sum of squares).",
            cos_squared_norms,
        ),
        Mistake(
            "whole_matrix_norms",
            "you divided by the norms of the whole matrices: each row is its own vector, so take "
            "the norm of each row (dim=-1, keepdim=True).",
            cos_whole_matrix_norms,
        ),
        Mistake(
            "feature_axis",
            "you normalised each feature column (dim=0) instead of each vector (row, dim=-1).",
            cos_feature_axis,
        ),
    ),
    forbidden=(
        "torch.nn.functional:cosine_similarity",
        "torch:cosine_similarity",
        "torch.nn.functional:normalize",
        "torch.nn:CosineSimilarity",
        "torch:ops.aten.cosine_similarity",  # the same operator as a packet, which the names above miss
        # the notebook's widget computes the same cosines (row by row, and for the skip-gram neighbours)
        "course_utils.widgets.embeddings_positions:similarity_profile",
        "course_utils.widgets.embeddings_positions:nearest_neighbours",
    ),
    output_names=("your similarity matrix",),
    atol=1e-8,
    rtol=1e-6,
)


# --- embeddings_positions_sinusoidal: sinusoidal_encoding(max_len, d_model) ----------------

def pe_sin_cos_swapped(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    w = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.cos(pos * w)
    pe[:, 1::2] = torch.sin(pos * w)
    return pe.float()


def pe_concatenated(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    w = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cat([torch.sin(pos * w), torch.cos(pos * w)], dim=-1).float()


def pe_exponent_without_two(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    w = 10000.0 ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * w)
    pe[:, 1::2] = torch.cos(pos * w)
    return pe.float()


def pe_column_exponent(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    j = torch.arange(d_model, dtype=torch.float64)
    angles = pos * 10000.0 ** (-j / d_model)
    pe = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, 1::2])
    return pe.float()


def pe_multiplied(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    w = 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * w)
    pe[:, 1::2] = torch.cos(pos * w)
    return pe.float()


def pe_positions_from_one(max_len, d_model):
    pos = torch.arange(1, max_len + 1, dtype=torch.float64)[:, None]
    w = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * w)
    pe[:, 1::2] = torch.cos(pos * w)
    return pe.float()


def _sinusoidal_cases(seed):
    return [((12, 8), {}), ((7, 6), {}), ((30, 16), {})]


SINUSOIDAL = Exercise(
    grade_id="embeddings_positions_sinusoidal",
    function_name="sinusoidal_encoding",
    reference=_ref_sinusoidal,
    make_cases=_sinusoidal_cases,
    mistakes=(
        Mistake(
            "sin_cos_swapped",
            "sine and cosine are swapped: the even columns 2i hold sin(pos * w_i) and the odd "
            "columns 2i + 1 hold cos(pos * w_i).",
            pe_sin_cos_swapped,
        ),
        Mistake(
            "concatenated",
            "your sines fill the first half of the columns and your cosines the second half: "
            "they should be interleaved, sin in column 2i and cos in column 2i + 1 (use [:, 0::2] and [:, 1::2]).",
            pe_concatenated,
        ),
        Mistake(
            "exponent_without_two",
            "your frequencies use 10000^(i / d_model) for pair i: the exponent is 2i / d_model "
            "(the even column index over d_model), so the slowest pair has w close to 1/10000.",
            pe_exponent_without_two,
        ),
        Mistake(
            "column_exponent",
            "each column has its own frequency: you used the column index j in 10000^(j / d_model), "
            "but both columns of a pair (2i, 2i + 1) share w_i = 1 / 10000^(2i / d_model).",
            pe_column_exponent,
        ),
        Mistake(
            "multiplied",
            "you multiplied pos by 10000^(2i / d_model) instead of dividing: the frequencies must "
            "fall from 1 to about 1/10000 across the pairs.",
            pe_multiplied,
        ),
        Mistake(
            "positions_from_one",
            "your positions start at 1: row 0 is position 0, whose encoding is [0, 1, 0, 1, ...].",
            pe_positions_from_one,
        ),
    ),
    forbidden=("course_utils.widgets.embeddings_positions:positional_table",
               # notebook 12's widget builds the same table (and its RoPE helper the same angles)
               "course_utils.widgets.long_context:_sinusoidal_table",
               "course_utils.widgets.long_context:_turns"),
    output_names=("your encoding",),
)


# --- embeddings_positions_rotation: rotation_matrix(offset, d_model) -----------------------

def rot_transposed(offset, d_model):
    theta = offset * 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i, t in enumerate(theta):
        R[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[math.cos(t), math.sin(t)], [-math.sin(t), math.cos(t)]])
    return R.float()


def rot_same_angle(offset, d_model):
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    c, s = math.cos(offset), math.sin(offset)
    for i in range(d_model // 2):
        R[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[c, -s], [s, c]])
    return R.float()


def rot_exponent_without_two(offset, d_model):
    theta = offset * 10000.0 ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i, t in enumerate(theta):
        R[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    return R.float()


def _rotation_cases(seed):
    return [((3, 8), {}), ((-2, 6), {}), ((5, 16), {}), ((1, 4), {})]


ROTATION = Exercise(
    grade_id="embeddings_positions_rotation",
    function_name="rotation_matrix",
    reference=_ref_relative_rotation,
    make_cases=_rotation_cases,
    mistakes=(
        Mistake(
            "transposed",
            "your matrix moves positions backwards, PE[pos] @ R = PE[pos - k]: it is the transpose "
            "of the right one. With row vectors and pairs ordered (sin, cos), each block is "
            "[[cos θ, -sin θ], [sin θ, cos θ]].",
            rot_transposed,
        ),
        Mistake(
            "same_angle",
            "every pair turns by the same angle k: pair i turns by k * w_i, with "
            "w_i = 1 / 10000^(2i / d_model), because each pair is a circle at its own speed.",
            rot_same_angle,
        ),
        Mistake(
            "exponent_without_two",
            "your angles use 10000^(i / d_model) for pair i: the encoding's frequencies are "
            "w_i = 1 / 10000^(2i / d_model).",
            rot_exponent_without_two,
        ),
    ),
    # Notebook 12's RoPE helpers turn every column pair by pos * w_i: applied to the rows of the
    # identity with position -k, they give R_k.
    forbidden=("course_utils.widgets.long_context:_turn", "course_utils.widgets.long_context:_turns"),
    output_names=("your rotation matrix",),
)

EXERCISES = {exercise.grade_id: exercise for exercise in (ONE_HOT, COSINE, SINUSOIDAL, ROTATION)}


# --- embeddings_positions_wavelength: a think-first question. Its visible test only checks that
# `pair_wavelength` is a positive number (the number is the question): every wrong value is hidden only.
# The numbers vary by student (course_utils.grading.questions): `d_model` and the pair `i`
# (dimensions 2i and 2i + 1).
WAVELENGTH_MISTAKES = (
    Mistake('wavelength_no_two_pi', "you gave 1 / w_{i}, the positions it takes pos * w_{i} to grow by 1; a sine "
                                    "comes back to its values after a full turn, not after 1.",
                                    lambda d_model, i: 10000.0 ** (2 * i / d_model)),
    Mistake('wavelength_i_not_2i', "you used 10000^(i / d_model); look again at the exponent in w_i.",
                                   lambda d_model, i: 2 * math.pi * 10000.0 ** (i / d_model)),
    Mistake('wavelength_frequency', "you gave the frequency (turns per position); the wavelength is its "
                                    "inverse.",
                                    lambda d_model, i: 1 / (2 * math.pi * 10000.0 ** (2 * i / d_model))),
    Mistake('wavelength_dimension_as_pair', "you took i = 2 x {i}, the dimension; i counts pairs, and dimensions "
                                            "2i and 2i + 1 are pair i = {i}.",
                                            lambda d_model, i: 2 * math.pi * 10000.0 ** (2 * (2 * i) / d_model)),
)
HIDDEN_ONLY = HIDDEN_ONLY | {mistake.name for mistake in WAVELENGTH_MISTAKES}
EXERCISES["embeddings_positions_wavelength"] = think_first(
    "embeddings_positions_wavelength", "pair_wavelength", lambda d_model, i: _ref_pair_wavelength(i, d_model),
    WAVELENGTH_MISTAKES, "your wavelength", rtol=0.005)


def check(grade_id, fn):
    """Raise GradingError naming the mistake if fn is wrong for the exercise `grade_id`."""
    return _check(EXERCISES, grade_id, fn)


def diagnose(grade_id, fn):
    """Raise GradingError if `fn` crashes, breaks a rule or makes a catalogued mistake; silent on an
    uncatalogued wrong answer, which the test cell's last hidden line (`check`) then fails."""
    return _diagnose(EXERCISES, grade_id, fn)
