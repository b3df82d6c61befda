"""Reference answers of notebook 01 (the limits of RNNs). Instructor side only.

Shape convention (row vectors, batch first, as in the notebook):
    x_t: (B, d_in), h_{t-1}: (B, H), W_xh: (d_in, H), W_hh: (H, H), b: (H,)
    h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)                      -> (B, H)
PyTorch's `nn.RNN` stores the transposes (weight_ih_l0: (H, d_in), weight_hh_l0: (H, H)) and
two biases (b_ih + b_hh); with W_xh = weight_ih_l0.T, W_hh = weight_hh_l0.T and
b = bias_ih_l0 + bias_hh_l0 it computes the same states.
"""
import torch

__all__ = ["longest_distinguishable_string", "rnn_step", "rnn_forward", "spectral_radius"]


def rnn_step(x_t, h_prev, W_xh, W_hh, b):
    """One vanilla RNN step: (B, d_in), (B, H) -> (B, H)."""
    return torch.tanh(x_t @ W_xh + h_prev @ W_hh + b)


def rnn_forward(x, h0, W_xh, W_hh, b):
    """The unrolled pass over x: (B, T, d_in) -> every hidden state h_1 .. h_T, (B, T, H).

    h0: (B, H), or None for zeros. The returned states do not include h0.
    """
    B, T, _ = x.shape
    h = torch.zeros(B, W_hh.shape[0], dtype=x.dtype) if h0 is None else h0
    states = []
    for t in range(T):
        h = rnn_step(x[:, t], h, W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1)


def spectral_radius(W):
    """max |lambda| over the (complex) eigenvalues of a square matrix, as a Python float."""
    return float(torch.linalg.eigvals(W).abs().max())


def longest_distinguishable_string(numbers=32, bits_each=2, symbols=8):
    """The longest n such that every string of n symbols (from `symbols`) has a state of its own
    when the state is `numbers` numbers of `bits_each` bits: symbols**n <= 2**(numbers * bits_each).
    Notebook 01's think-first question: 32 numbers of 2 bits, 8 symbols -> 21."""
    n = 0
    while symbols ** (n + 1) <= 2 ** (numbers * bits_each):
        n += 1
    return n
