"""Mistake catalogue of notebook 01 (the limits of RNNs).

Instructor side, as secret as the reference. `EXERCISES[grade_id]` holds, for each exercise,
the reference, the hidden test cases and the common wrong answers; the notebook's hidden
tests call `check(grade_id, student_function)`.

Why the cases look the way they do (every mistake must be told apart from the reference and
from every other mistake on them, and must run rather than raise):

* rnn_step: d_in = H in every case, so that applying W_hh to the input (and W_xh to the state)
  or using the transposed, nn.Linear-style weights runs instead of raising; B differs from H;
  the state, the bias and the inputs are all non-zero and large enough that tanh, sigmoid and
  no activation give clearly different numbers. The visible tests use d_in != H, where those
  two mistakes raise.
* rnn_forward: B = T in every case, so that looping over the batch axis as if it were time, or
  stacking the states time-first, gives an array of the right size; d_in != H; one case passes
  h0 = None (zeros) and the others a non-zero h0.
* spectral_radius: one matrix whose dominant eigenvalues are a complex pair, a random one, one whose dominant eigenvalue is real
  and negative, one non-normal (its largest singular value far above its spectral radius).

The `compute` of every mistake is a closure with everything inline, and this module imports
the reference only as a module, so that the forbidden-API guard does not mistake a catalogued
wrong answer for a call of the reference.
"""
import torch

from course_utils.reference import mistakes as framework
from course_utils.reference.mistakes import diagnose as _diagnose
from course_utils.reference import rnn_limits as reference
from course_utils.reference.mistakes import Exercise, Mistake, think_first
from course_utils.reference.mistakes.gradients import GradientExercise

__all__ = ["EXERCISES", "HIDDEN_ONLY", "RNN_BUILTINS", "check"]

# Every catalogued mistake also fails the visible tests.
HIDDEN_ONLY = set()

# The exercise is to write the recurrence: PyTorch's ready-made RNNs are off limits inside it.
RNN_BUILTINS = (
    "torch.nn:RNN",
    "torch.nn:RNNCell",
    "torch:rnn_tanh",
    "torch:rnn_tanh_cell",
    # nn.RNN's own route to the kernels: torch._VF looks the functions up afresh in
    # torch._C._VariableFunctions, so patching torch.rnn_tanh_cell does not reach it.
    "torch._VF:rnn_tanh",
    "torch._VF:rnn_tanh_cell",
    # The same operators as torch.ops.aten packets (composite: an "aten::" entry never sees them).
    "torch:ops.aten.rnn_tanh",
    "torch:ops.aten.rnn_tanh_cell",
)


def _randn(generator, *shape, scale=1.0):
    return scale * torch.randn(*shape, generator=generator, dtype=torch.float64)


# --------------------------------------------------------------------------- 1. rnn_step

def rnn_step_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def case(B, H, scale):
        return ((_randn(g, B, H, scale=scale), _randn(g, B, H, scale=0.8), _randn(g, H, H, scale=0.6),
                 _randn(g, H, H, scale=0.6), _randn(g, H, scale=0.7)), {})

    half = case(2, 3, 1.0)
    return [case(3, 4, 1.0), case(2, 5, 2.0), case(5, 3, 0.5),
            case(1, 1, 1.0),  # the smallest the prompt allows (issue 39, item 3): one sentence, H = 1
            (tuple(t.half() for t in half[0]), {})]  # float16, which the prompt does not rule out (item 2)


def _rnn_step_variant(activation="tanh", swapped=False, transposed=False, bias=True, recurrence=True,
                      bias_outside=False):
    def compute(x_t, h_prev, W_xh, W_hh, b):
        A, C = (W_hh, W_xh) if swapped else (W_xh, W_hh)
        if transposed:
            A, C = A.T, C.T
        z = x_t @ A
        if recurrence:
            z = z + h_prev @ C
        if bias and not bias_outside:
            z = z + b
        out = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "none": lambda v: v}[activation](z)
        return out + b if bias_outside else out
    return compute


RNN_STEP_MISTAKES = (
    Mistake(
        "weights_swapped",
        "you applied W_hh to the input and W_xh to the previous state: the input goes through "
        "W_xh (d_in, H), the state through W_hh (H, H).",
        _rnn_step_variant(swapped=True),
    ),
    Mistake(
        "weights_transposed",
        "you multiplied by the transposed weights (x_t @ W_xh.T, the nn.Linear / nn.RNN layout): "
        "here W_xh is (d_in, H) and W_hh is (H, H): multiply by them as they are given.",
        _rnn_step_variant(transposed=True),
    ),
    Mistake(
        "no_tanh",
        "your new state is x_t W_xh + h_prev W_hh + b without the tanh: apply torch.tanh to the sum.",
        _rnn_step_variant(activation="none"),
    ),
    Mistake(
        "sigmoid",
        "you used a sigmoid where the vanilla RNN uses tanh (states in (-1, 1), not (0, 1)).",
        _rnn_step_variant(activation="sigmoid"),
    ),
    Mistake(
        "no_bias",
        "you left out the bias b: add it inside the tanh.",
        _rnn_step_variant(bias=False),
    ),
    Mistake(
        "bias_outside_tanh",
        "you added the bias after the tanh: it belongs inside, tanh(x_t W_xh + h_prev W_hh + b).",
        _rnn_step_variant(bias_outside=True),
    ),
    Mistake(
        "no_recurrence",
        "your step ignores the previous state h_prev: add h_prev @ W_hh inside the tanh, "
        "that term is what makes the network recurrent.",
        _rnn_step_variant(recurrence=False),
    ),
)


# --------------------------------------------------------------------------- 2. rnn_forward

def rnn_forward_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def case(B, d_in, H, with_h0):
        h0 = _randn(g, B, H, scale=0.9) if with_h0 else None
        return ((_randn(g, B, B, d_in), h0, _randn(g, d_in, H, scale=0.7), _randn(g, H, H, scale=0.5),
                 _randn(g, H, scale=0.5)), {})

    def smallest():  # one sentence of one step, d_in = H = 1 (issue 39, item 3)
        return ((_randn(g, 1, 1, 1), None, _randn(g, 1, 1, scale=0.7), _randn(g, 1, 1, scale=0.5),
                 _randn(g, 1, scale=0.5)), {})

    half = case(3, 2, 4, False)  # float16 with no initial state: the zero state in x's dtype (item 2)
    return [case(4, 3, 5, True), case(3, 2, 4, False), case(5, 3, 2, True), smallest(),
            (tuple(t if t is None else t.half() for t in half[0]), {})]


def _rnn_forward_variant(mode="right"):
    def compute(x, h0, W_xh, W_hh, b):
        B, T, _ = x.shape
        H = W_hh.shape[0]
        zeros = torch.zeros(B, H, dtype=x.dtype)
        h = zeros if (h0 is None or mode == "ignores_h0") else h0
        start = h
        states = [h] if mode == "includes_h0" else []
        if mode == "time_batch_confused":  # reads x as (T, B, d_in)
            for t in range(x.shape[0]):
                h = torch.tanh(x[t] @ W_xh + h @ W_hh + b)
                states.append(h)
            return torch.stack(states, dim=1)
        for t in (reversed(range(T)) if mode == "reads_backwards" else range(T)):
            previous = start if mode == "no_feedback" else h
            h = torch.tanh(x[:, t] @ W_xh + previous @ W_hh + b)
            states.append(h)
        if mode == "last_state_only":
            return h
        return torch.stack(states, dim=0 if mode == "stacked_time_first" else 1)
    return compute


RNN_FORWARD_MISTAKES = (
    Mistake(
        "last_state_only",
        "you returned only the last hidden state (B, H): return every state h_1 .. h_T, "
        "stacked into (B, T, H).",
        _rnn_forward_variant("last_state_only"),
    ),
    Mistake(
        "ignores_h0",
        "your states ignore the h0 you were given (you always start from zeros): start from h0, "
        "and use zeros only when h0 is None.",
        _rnn_forward_variant("ignores_h0"),
    ),
    Mistake(
        "no_feedback",
        "every step starts again from h0: feed each new state back in as h_prev of the next step.",
        _rnn_forward_variant("no_feedback"),
    ),
    Mistake(
        "time_batch_confused",
        "you looped over axis 0 as if it were time: x is batch first, (B, T, d_in), so step t "
        "reads x[:, t].",
        _rnn_forward_variant("time_batch_confused"),
    ),
    Mistake(
        "stacked_time_first",
        "you stacked the states time first, (T, B, H): stack along dim=1 to get (B, T, H).",
        _rnn_forward_variant("stacked_time_first"),
    ),
    Mistake(
        "reads_backwards",
        "you read the sequence from its last step: step 1 reads x[:, 0], step 2 x[:, 1], and so on, "
        "in order (for t in range(T)), and states[:, t] is the state after reading x[:, t].",
        _rnn_forward_variant("reads_backwards"),
    ),
    Mistake(
        "includes_h0",
        "your states include h0, so there are T + 1 of them: return h_1 .. h_T only.",
        _rnn_forward_variant("includes_h0"),
    ),
)


# --------------------------------------------------------------------------- 3. spectral_radius

def spectral_radius_cases(seed):
    g = torch.Generator().manual_seed(seed)
    P = _randn(g, 4, 4) + 3 * torch.eye(4, dtype=torch.float64)
    negative = P @ torch.diag(torch.tensor([-3.0, 1.0, 0.5, 2.0], dtype=torch.float64)) @ torch.linalg.inv(P)
    non_normal = torch.triu(_randn(g, 5, 5, scale=3.0), diagonal=1) + torch.diag(
        torch.tensor([0.6, 0.45, -0.3, 0.2, 0.1], dtype=torch.float64))  # distinct eigenvalues
    Q = _randn(g, 5, 5) + 3 * torch.eye(5, dtype=torch.float64)
    block = torch.zeros(5, 5, dtype=torch.float64)
    block[:2, :2] = torch.tensor([[0.3, -1.5], [1.5, 0.3]], dtype=torch.float64)  # 0.3 +- 1.5i
    block[2:, 2:] = torch.diag(torch.tensor([1.0, -0.8, 0.5], dtype=torch.float64))
    complex_pair = Q @ block @ torch.linalg.inv(Q)
    return [((complex_pair,), {}), ((_randn(g, 6, 6, scale=0.5),), {}), ((negative,), {}),
            ((non_normal,), {})]


def _eigenvalues(W):
    return torch.linalg.eigvals(W)


SPECTRAL_RADIUS_MISTAKES = (
    Mistake(
        "spectral_norm",
        "you returned the largest singular value (the spectral norm, matrix_norm(W, 2)); the "
        "spectral radius is the largest |eigenvalue|, which can be much smaller for a non-symmetric W.",
        lambda W: float(torch.linalg.matrix_norm(W, ord=2)),
    ),
    Mistake(
        "max_real_part",
        "you returned the largest real part of the eigenvalues: take the modulus, "
        "torch.linalg.eigvals(W).abs(), so that negative and complex eigenvalues count by their size.",
        lambda W: float(_eigenvalues(W).real.max()),
    ),
    Mistake(
        "abs_of_real_part",
        "you dropped the imaginary parts of the eigenvalues before taking their size: the modulus "
        "of a + bi is sqrt(a^2 + b^2), which .abs() of the complex eigenvalues gives.",
        lambda W: float(_eigenvalues(W).real.abs().max()),
    ),
    Mistake(
        "frobenius_norm",
        "you returned the Frobenius norm of W (the square root of the sum of squared entries), "
        "not the largest |eigenvalue|.",
        lambda W: float(torch.linalg.matrix_norm(W)),
    ),
    Mistake(
        "max_abs_entry",
        "you returned the largest |entry| of W: the spectral radius is the largest |eigenvalue|.",
        lambda W: float(W.abs().max()),
    ),
)


_CRASH_HINTS = {
    "rnn_limits_step": "x_t is (B, d_in), h_prev is (B, H), W_xh is (d_in, H), W_hh is (H, H) and b "
                       "is (H,): check that the inner sizes of each product agree and that every term is (B, H)",
    "rnn_limits_forward": "x is batch first, (B, T, d_in), and h0 is (B, H) or None (zeros); "
                          "loop over t, call rnn_step(x[:, t], h, ...) and stack with dim=1",
    "rnn_limits_spectral_radius": "W is a square torch tensor; its eigenvalues "
                                  "(torch.linalg.eigvals) may be complex",
}


EXERCISES = {
    exercise.grade_id: exercise
    for exercise in (
        GradientExercise(  # notebook 01 trains a seq2seq model through it
            grade_id="rnn_limits_step",
            make_gradient_cases=lambda seed: rnn_step_cases(seed)[:2],
            function_name="rnn_step",
            reference=reference.rnn_step,
            make_cases=rnn_step_cases,
            mistakes=RNN_STEP_MISTAKES,
            forbidden=RNN_BUILTINS + ("course_utils.grading.parts:rnn_step",),
            output_names=("your new state",),
            atol=1e-8,
            rtol=1e-6,
            crash_hint=_CRASH_HINTS["rnn_limits_step"],
        ),
        GradientExercise(  # notebook 01 trains a seq2seq model through it
            grade_id="rnn_limits_forward",
            make_gradient_cases=lambda seed: rnn_forward_cases(seed)[:2],
            function_name="rnn_forward",
            reference=reference.rnn_forward,
            make_cases=rnn_forward_cases,
            mistakes=RNN_FORWARD_MISTAKES,
            forbidden=RNN_BUILTINS,
            earlier=("rnn_step",),  # its prompt: "call your rnn_step once per time step"
            output_names=("your hidden states",),
            atol=1e-8,
            rtol=1e-6,
            crash_hint=_CRASH_HINTS["rnn_limits_forward"],
        ),
        Exercise(
            grade_id="rnn_limits_spectral_radius",
            function_name="spectral_radius",
            reference=reference.spectral_radius,
            make_cases=spectral_radius_cases,
            mistakes=SPECTRAL_RADIUS_MISTAKES,
            output_names=("your spectral radius",),
            atol=1e-8,
            rtol=1e-6,
            crash_hint=_CRASH_HINTS["rnn_limits_spectral_radius"],
        ),
    )
}


# --- rnn_limits_capacity: a think-first question. Its visible test only checks that
# `longest_string` is a positive number (the number is the question): every wrong value is hidden only.
# The numbers vary by student (course_utils.grading.questions): the state's `numbers`, the `bits_each`
# each of them carries and the alphabet's `symbols` (a power of 2 with more than 2**bits_each of them,
# and numbers * bits_each no multiple of log2(symbols), so that rounding down matters).
def _symbol_bits(symbols):
    return symbols.bit_length() - 1  # log2 of a power of 2


CAPACITY_MISTAKES = (
    Mistake('capacity_one_bit_a_symbol', "you counted one bit per symbol; one bit tells only two symbols apart: "
                                         "how many bits does one of {symbols} symbols take?",
                                         lambda numbers, bits_each, symbols: numbers * bits_each),
    Mistake('capacity_one_bit_a_number', "you gave each of the {numbers} numbers a single bit; the question gives "
                                         "each {bits_each} bits.",
                                         lambda numbers, bits_each, symbols: numbers // _symbol_bits(symbols)),
    Mistake('capacity_a_symbol_a_number', "you stored one symbol per number, but {bits_each} bits tell only "
                                          "2^{bits_each} values apart, not {symbols}: count bits, not numbers.",
                                          lambda numbers, bits_each, symbols: numbers),
    Mistake('capacity_rounded_up', "you rounded up: the last symbol you counted needs more bits than the "
                                   "state has left.",
                                   lambda numbers, bits_each, symbols:
                                   numbers * bits_each // _symbol_bits(symbols) + 1),
)
HIDDEN_ONLY = HIDDEN_ONLY | {mistake.name for mistake in CAPACITY_MISTAKES}
EXERCISES["rnn_limits_capacity"] = think_first(
    "rnn_limits_capacity", "longest_string",
    lambda numbers, bits_each, symbols: reference.longest_distinguishable_string(numbers, bits_each, symbols),
    CAPACITY_MISTAKES, "your longest length")


def check(grade_id, student_fn):
    """The hidden test of one exercise: GradingError naming the mistake, or None when right."""
    return framework.check(EXERCISES, grade_id, student_fn)


def diagnose(grade_id, fn):
    """Raise GradingError if `fn` crashes, breaks a rule or makes a catalogued mistake; silent on an
    uncatalogued wrong answer, which the test cell's last hidden line (`check`) then fails."""
    return _diagnose(EXERCISES, grade_id, fn)
