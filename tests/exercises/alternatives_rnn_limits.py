"""Second correct implementations of notebook 01's exercises, written differently from the
reference: the real test cells must pass them too."""
import numpy as np
import torch


def rnn_step_einsum(x_t, h_prev, W_xh, W_hh, b):
    """The two products as einsums and the tanh written out from exponentials."""
    z = torch.einsum("bi,ih->bh", x_t, W_xh) + torch.einsum("bj,jh->bh", h_prev, W_hh) + b
    return 1 - 2 / (torch.exp(2 * z) + 1)


def rnn_step_concatenated(x_t, h_prev, W_xh, W_hh, b):
    """One product: [x_t, h_prev] @ [[W_xh], [W_hh]], the stacked-weights form of many textbooks."""
    return torch.tanh(torch.addmm(b, torch.cat([x_t, h_prev], dim=1), torch.cat([W_xh, W_hh], dim=0)))


def rnn_forward_projected_first(x, h0, W_xh, W_hh, b):
    """Project every input at once (one big matmul), then run only the recurrence step by step,
    writing into a preallocated output tensor."""
    B, T, _ = x.shape
    H = W_hh.shape[0]
    inputs = x @ W_xh + b  # (B, T, H), all steps in parallel
    out = torch.empty(B, T, H, dtype=inputs.dtype)
    h = h0 if h0 is not None else x.new_zeros(B, H)
    for t in range(T):
        h = torch.tanh(inputs[:, t] + h @ W_hh)
        out[:, t] = h
    return out


def rnn_forward_time_major(x, h0, W_xh, W_hh, b):
    """Transpose to time-major (T, B, d_in), loop over the first axis, transpose back."""
    steps = x.transpose(0, 1)
    h = torch.zeros(x.shape[0], W_hh.shape[1], dtype=x.dtype) if h0 is None else h0
    states = []
    for x_t in steps:
        h = torch.tanh(x_t @ W_xh + h @ W_hh + b)
        states.append(h)
    return torch.stack(states).transpose(0, 1)


def spectral_radius_numpy(W):
    """NumPy's eigenvalue solver and the complex modulus written out."""
    eigenvalues = np.linalg.eigvals(np.asarray(W, dtype=np.float64))
    return float(np.sqrt(eigenvalues.real ** 2 + eigenvalues.imag ** 2).max())


def spectral_radius_power_limit(W):
    """The moduli of the roots of the characteristic polynomial det(lambda I - W), found by
    NumPy's polynomial root finder."""
    coefficients = np.poly(np.asarray(W, dtype=np.float64))
    return float(np.abs(np.roots(coefficients)).max())


ALTERNATIVES = {
    # np.max of a list of counts gives a NumPy integer
    "rnn_limits_capacity": [21, 21.0, (32 * 2) // 3, np.max([n for n in range(1, 30) if 8 ** n <= 2 ** 64])],
    "rnn_limits_step": [rnn_step_einsum, rnn_step_concatenated],
    "rnn_limits_forward": [rnn_forward_projected_first, rnn_forward_time_major],
    "rnn_limits_spectral_radius": [spectral_radius_numpy, spectral_radius_power_limit],
}
