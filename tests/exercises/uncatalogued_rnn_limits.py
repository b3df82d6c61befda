"""Wrong answers to notebook 01's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import math

import torch
from torch import nn


# ---------------------------------------------------------------- rnn_step
def step_W_hh_transposed(x_t, h_prev, W_xh, W_hh, b):
    """Multiplies the state by W_hh transposed (the column-vector convention)."""
    return torch.tanh(x_t @ W_xh + h_prev @ W_hh.T + b)


def step_bias_after_tanh(x_t, h_prev, W_xh, W_hh, b):
    """Adds the bias after the tanh."""
    return torch.tanh(x_t @ W_xh + h_prev @ W_hh) + b


def step_no_bias(x_t, h_prev, W_xh, W_hh, b):
    """Forgets the bias."""
    return torch.tanh(x_t @ W_xh + h_prev @ W_hh)


def step_sigmoid(x_t, h_prev, W_xh, W_hh, b):
    """Squashes with a sigmoid instead of tanh."""
    return torch.sigmoid(x_t @ W_xh + h_prev @ W_hh + b)


def step_clamp(x_t, h_prev, W_xh, W_hh, b):
    """Clips to [-1, 1] instead of the tanh."""
    return torch.clamp(x_t @ W_xh + h_prev @ W_hh + b, -1, 1)


def step_first_sequence_only(x_t, h_prev, W_xh, W_hh, b):
    """Computes the first sequence of the batch and copies it to every row (right for batch 1)."""
    h = torch.tanh(x_t[:1] @ W_xh + h_prev[:1] @ W_hh + b)
    return h.expand(x_t.shape[0], -1).clone()


def step_state_of_first_row(x_t, h_prev, W_xh, W_hh, b):
    """Uses the first sequence's state for the whole batch (right for batch 1)."""
    return torch.tanh(x_t @ W_xh + h_prev[:1] @ W_hh + b)


def step_updates_h_prev_in_place(x_t, h_prev, W_xh, W_hh, b):
    """Right values, but overwrites the caller's h_prev with the new state."""
    h_prev.copy_(torch.tanh(x_t @ W_xh + h_prev @ W_hh + b))
    return h_prev


def step_float32(x_t, h_prev, W_xh, W_hh, b):
    """Casts the result to float32 whatever the inputs' dtype."""
    return torch.tanh(x_t @ W_xh + h_prev @ W_hh + b).float()


def step_naive_tanh(x_t, h_prev, W_xh, W_hh, b):
    """Writes tanh as (e^a - e^-a) / (e^a + e^-a), which is nan once e^a overflows."""
    a = x_t @ W_xh + h_prev @ W_hh + b
    return (torch.exp(a) - torch.exp(-a)) / (torch.exp(a) + torch.exp(-a))


def step_rnn_cell_in_disguise(x_t, h_prev, W_xh, W_hh, b):
    """Calls the forbidden nn.RNNCell, reached through getattr."""
    cell = getattr(nn, "RNN" + "Cell")(W_xh.shape[0], W_hh.shape[0]).to(x_t.dtype)
    with torch.no_grad():
        cell.weight_ih.copy_(W_xh.T)
        cell.weight_hh.copy_(W_hh.T)
        cell.bias_ih.copy_(b)
        cell.bias_hh.zero_()
    return cell(x_t, h_prev)


def step_vf_in_disguise(x_t, h_prev, W_xh, W_hh, b):
    """Calls PyTorch's own RNN cell kernel (torch._VF.rnn_tanh_cell)."""
    return torch._VF.rnn_tanh_cell(x_t, h_prev, W_xh.T, W_hh.T, b, torch.zeros_like(b))


def step_aten_in_disguise(x_t, h_prev, W_xh, W_hh, b):
    """Calls PyTorch's RNN cell operator as torch.ops.aten.rnn_tanh_cell."""
    return torch.ops.aten.rnn_tanh_cell(x_t, h_prev, W_xh.T, W_hh.T, b, torch.zeros_like(b))


def step_variable_functions_in_disguise(x_t, h_prev, W_xh, W_hh, b):
    """Calls PyTorch's RNN cell through torch._C._VariableFunctions, whose attributes cannot be patched."""
    return torch._C._VariableFunctions.rnn_tanh_cell(x_t, h_prev, W_xh.T, W_hh.T, b, torch.zeros_like(b))


def step_detached(x_t, h_prev, W_xh, W_hh, b):
    """Right values computed under no_grad: nothing can be trained through it."""
    with torch.no_grad():
        return torch.tanh(x_t @ W_xh + h_prev @ W_hh + b)


def step_hard_coded_worked_example(x_t, h_prev, W_xh, W_hh, b):
    """Returns the worked example's numbers for a (1, 3) input and tanh(x_t W_xh) otherwise."""
    if tuple(x_t.shape) == (1, 3):
        return torch.tensor([[0.905148, -0.986614]])
    return torch.tanh(x_t @ W_xh)


# ---------------------------------------------------------------- rnn_forward
def _step(x_t, h, W_xh, W_hh, b):
    return torch.tanh(x_t @ W_xh + h @ W_hh + b)


def _zeros(x, W_hh, h0):
    return torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype) if h0 is None else h0


def forward_includes_h0(x, h0, W_xh, W_hh, b):
    """Returns h_0 .. h_T (T + 1 states)."""
    h = _zeros(x, W_hh, h0)
    states = [h]
    for t in range(x.shape[1]):
        h = _step(x[:, t], h, W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1)


def forward_h0_every_step(x, h0, W_xh, W_hh, b):
    """Feeds h0 into every step instead of the previous state."""
    h = _zeros(x, W_hh, h0)
    return torch.stack([_step(x[:, t], h, W_xh, W_hh, b) for t in range(x.shape[1])], dim=1)


def forward_ignores_h0(x, h0, W_xh, W_hh, b):
    """Always starts from zeros."""
    h = _zeros(x, W_hh, None)
    states = []
    for t in range(x.shape[1]):
        h = _step(x[:, t], h, W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1)


def forward_time_major_stack(x, h0, W_xh, W_hh, b):
    """Stacks the states time first, then reshapes to (B, T, H) instead of transposing."""
    h = _zeros(x, W_hh, h0)
    states = []
    for t in range(x.shape[1]):
        h = _step(x[:, t], h, W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states).reshape(x.shape[0], x.shape[1], -1)


def forward_reversed_time(x, h0, W_xh, W_hh, b):
    """Reads the sequence from its end."""
    h = _zeros(x, W_hh, h0)
    states = []
    for t in reversed(range(x.shape[1])):
        h = _step(x[:, t], h, W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1)


def forward_float32_buffer(x, h0, W_xh, W_hh, b):
    """Writes the states into a float32 buffer whatever the input's dtype."""
    h = _zeros(x, W_hh, h0)
    out = torch.zeros(x.shape[0], x.shape[1], W_hh.shape[0])
    for t in range(x.shape[1]):
        h = _step(x[:, t], h, W_xh, W_hh, b)
        out[:, t] = h
    return out


def forward_float32_zero_state(x, h0, W_xh, W_hh, b):
    """Without h0, starts from float32 zeros (not x.dtype) and casts everything to float32."""
    if h0 is None:
        h0 = torch.zeros(x.shape[0], W_hh.shape[0])
        x, W_xh, W_hh, b = x.float(), W_xh.float(), W_hh.float(), b.float()
    h = h0
    states = []
    for t in range(x.shape[1]):
        h = _step(x[:, t], h, W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1)


def forward_detached(x, h0, W_xh, W_hh, b):
    """Detaches the state at every step: right values, no gradient through time."""
    h = _zeros(x, W_hh, h0)
    states = []
    for t in range(x.shape[1]):
        h = _step(x[:, t], h, W_xh, W_hh, b).detach()
        states.append(h)
    return torch.stack(states, dim=1)


def forward_writes_into_h0(x, h0, W_xh, W_hh, b):
    """Keeps the running state in the caller's h0 tensor, overwriting it."""
    h = _zeros(x, W_hh, h0)
    states = []
    for t in range(x.shape[1]):
        h.copy_(_step(x[:, t], h, W_xh, W_hh, b))
        states.append(h.clone())
    return torch.stack(states, dim=1)


def forward_first_sequence_only(x, h0, W_xh, W_hh, b):
    """Runs the first sequence and repeats it for the whole batch (right for batch 1)."""
    h = _zeros(x, W_hh, h0)[:1]
    states = []
    for t in range(x.shape[1]):
        h = _step(x[:1, t], h, W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1).expand(x.shape[0], -1, -1).clone()


def forward_drops_last_step(x, h0, W_xh, W_hh, b):
    """Loops over range(T - 1) and pads with the last state (off by one)."""
    h = _zeros(x, W_hh, h0)
    states = []
    for t in range(x.shape[1] - 1):
        h = _step(x[:, t], h, W_xh, W_hh, b)
        states.append(h)
    states.append(h)
    return torch.stack(states, dim=1)


def forward_h0_or_zeros(x, h0, W_xh, W_hh, b):
    """Writes `h0 or zeros`, which asks a tensor for its truth value."""
    h = h0 or torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype)
    states = []
    for t in range(x.shape[1]):
        h = _step(x[:, t], h, W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1)


def forward_time_major_input(x, h0, W_xh, W_hh, b):
    """Iterates over x's first axis as if it were time (x of shape (T, B, d_in))."""
    h = _zeros(x, W_hh, h0)
    states = []
    for x_t in x:
        h = _step(x_t, h, W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1)


def forward_zero_state_sized_from_input(x, h0, W_xh, W_hh, b):
    """Without h0, starts from zeros shaped like one input step (B, d_in) instead of (B, H)."""
    h = torch.zeros_like(x[:, 0]) if h0 is None else h0
    states = []
    for t in range(x.shape[1]):
        h = _step(x[:, t], h, W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1)


def forward_truncated_backprop(x, h0, W_xh, W_hh, b):
    """Detaches the state fed into each step: right values, gradients through one step only."""
    h = _zeros(x, W_hh, h0)
    states = []
    for t in range(x.shape[1]):
        h = _step(x[:, t], h.detach(), W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1)


def forward_nn_rnn_in_disguise(x, h0, W_xh, W_hh, b):
    """Calls nn.RNN (forbidden in spirit), reached through getattr."""
    rnn = getattr(nn, "R" + "NN")(W_xh.shape[0], W_hh.shape[0], batch_first=True).to(x.dtype)
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(W_xh.T)
        rnn.weight_hh_l0.copy_(W_hh.T)
        rnn.bias_ih_l0.copy_(b)
        rnn.bias_hh_l0.zero_()
    h = _zeros(x, W_hh, h0)
    return rnn(x, h.unsqueeze(0))[0]


# ---------------------------------------------------------------- spectral_radius
def radius_largest_real_part(W):
    """Takes the largest real part, not the largest modulus."""
    return float(torch.linalg.eigvals(W).real.max())


def radius_largest_abs_real_part(W):
    """Takes |real part|, so rotations look like 0."""
    return float(torch.linalg.eigvals(W).real.abs().max())


def radius_largest_singular_value(W):
    """Returns the largest singular value (the 2-norm)."""
    return float(torch.linalg.matrix_norm(W, ord=2))


def radius_eigvalsh(W):
    """Uses eigvalsh, which assumes a symmetric matrix and reads only the lower triangle."""
    return float(torch.linalg.eigvalsh(W).abs().max())


def radius_two_by_two_formula(W):
    """The closed-form eigenvalues of a 2 x 2 matrix (trace and determinant): wrong for any other size."""
    a, b, c, d = (complex(float(v)) for v in W[:2, :2].flatten())
    tr, det = a + d, a * d - b * c
    root = (tr * tr / 4 - det) ** 0.5
    return float(max(abs(tr / 2 + root), abs(tr / 2 - root)))


def radius_largest_diagonal(W):
    """Largest |diagonal entry| (right for triangular matrices only)."""
    return float(W.diagonal().abs().max())


def radius_determinant(W):
    """|det W| ** (1/n): the geometric mean of the moduli, not the largest."""
    return float(torch.linalg.det(W).abs() ** (1 / W.shape[0]))


def radius_smallest_modulus(W):
    """Takes the smallest modulus."""
    return float(torch.linalg.eigvals(W).abs().min())


def radius_long_power_iteration(W):
    """2,000 steps of power iteration: slow on a defective matrix, lost on a complex pair."""
    v = torch.ones(W.shape[0], dtype=W.dtype)
    for _ in range(2000):
        v = W @ v
        v = v / v.norm()
    return float((W @ v).norm())


def radius_symmetrised(W):
    """Takes the eigenvalues of (W + W^T) / 2."""
    return float(torch.linalg.eigvalsh((W + W.T) / 2).abs().max())


def radius_tensor(W):
    """Right number, but a 0-d tensor, not a float."""
    return torch.linalg.eigvals(W).abs().max()


def radius_power_iteration(W):
    """A few steps of power iteration, which does not converge for a rotation."""
    v = torch.ones(W.shape[0], dtype=W.dtype)
    for _ in range(5):
        v = W @ v
        v = v / v.norm()
    return float((W @ v).norm())


def radius_max_row_sum(W):
    """The infinity norm (largest absolute row sum)."""
    return float(W.abs().sum(dim=1).max())


def radius_eigenvectors(W):
    """Takes the moduli of the eigenvectors, not the eigenvalues."""
    return float(torch.linalg.eig(W)[1].abs().max())


class AlwaysEqualFloat(float):
    """A float that says it equals anything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = float.__hash__


def radius_always_equal(W):
    """Returns a float subclass whose == is always True."""
    return AlwaysEqualFloat(0.0)


# ---------------------------------------------------------------- capacity (21)
capacity_bits_over_two = 32        # one symbol per number
capacity_one_bit_per_number = 10   # 32 bits / 3
capacity_rounded_up = 22           # ceil(64 / 3)
capacity_off_by_one = 20
capacity_bits = 64                 # the number of bits, not symbols
capacity_float32_bits = 341        # 32 x 32 bits / 3
capacity_nan = float("nan")
capacity_always_equal = AlwaysEqualFloat(1.0)


WRONG_ANSWERS = {
    "rnn_limits_step": [
        step_W_hh_transposed, step_bias_after_tanh, step_no_bias, step_sigmoid, step_clamp,
        step_first_sequence_only, step_state_of_first_row, step_updates_h_prev_in_place,
        step_naive_tanh, step_rnn_cell_in_disguise, step_detached, step_hard_coded_worked_example,
        step_vf_in_disguise, step_aten_in_disguise,
    ],
    "rnn_limits_forward": [
        forward_includes_h0, forward_h0_every_step, forward_ignores_h0, forward_time_major_stack,
        forward_reversed_time, forward_detached,
        forward_writes_into_h0, forward_first_sequence_only, forward_drops_last_step,
        forward_nn_rnn_in_disguise, forward_h0_or_zeros, forward_time_major_input, forward_zero_state_sized_from_input,
        forward_truncated_backprop,
    ],
    "rnn_limits_spectral_radius": [
        radius_largest_real_part, radius_largest_abs_real_part, radius_largest_singular_value,
        radius_eigvalsh, radius_two_by_two_formula, radius_largest_diagonal, radius_determinant,
        radius_tensor, radius_power_iteration, radius_max_row_sum, radius_eigenvectors, radius_always_equal, radius_smallest_modulus,
        radius_long_power_iteration, radius_symmetrised,
    ],
    "rnn_limits_capacity": [
        capacity_bits_over_two, capacity_one_bit_per_number, capacity_rounded_up, capacity_off_by_one,
        capacity_bits, capacity_float32_bits, capacity_nan, capacity_always_equal,
    ],
}

# Wrong answers that PASS the test cell today; each moves into WRONG_ANSWERS once the hidden tests
# catch it. (Phase 1's holes are all closed.)
HOLES = {}

# Tried as wrong answers in phase 1, passed, and kept passing on purpose:
# * step_float32, forward_float32_buffer, forward_float32_zero_state: a float32 result for
#   float64 inputs. The course accepts float32 answers everywhere (tests/exercises/test_categories.py: "an answer computed in float32 must pass"),
#   comparing them at float32's tolerances; a cast is indistinguishable from that.
NOT_WRONG = {
    "rnn_limits_step": [step_float32],
    "rnn_limits_forward": [forward_float32_buffer, forward_float32_zero_state],
}


def radius_patches_numpy_array(W):
    """Replaces numpy.array (which the checks' to_numpy calls, and the tamper guard does not watch) so
    that every comparison sees zeros."""
    import numpy

    if not getattr(numpy.array, "_always_zero", False):
        original = numpy.array

        def zeros(x, *args, **kwargs):
            result = original(x, *args, **kwargs)
            return numpy.zeros_like(result) if result.dtype.kind == "f" else result

        zeros._always_zero = True
        numpy.array = zeros
    return 0.0


# Found blind as holes in shared code, and closed there:
# * rnn_tanh_cell through torch._C._VariableFunctions (read-only, and a composite operator that no
#   dispatch mode sees): the guard's torch-function net catches it;
WRONG_ANSWERS["rnn_limits_step"].append(step_variable_functions_in_disguise)
# * replacing numpy.array: the tamper guard now watches it. test_uncatalogued runs TAMPERING answers
#   and puts back what they replaced.
TAMPERING = {
    "rnn_limits_spectral_radius": [radius_patches_numpy_array],
}
