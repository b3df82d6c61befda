"""Reference answers for notebook 03 (embeddings and positions) not already in `positions.py`.

An embedding layer is a lookup: row i of the weight matrix is the vector of token i, which is
exactly what multiplying the one-hot row vector of token i by the weight matrix selects.
Cosine similarity compares directions, not lengths.
"""
import math

import torch

from .positions import relative_rotation, sinusoidal_positional_encoding

__all__ = ["pair_wavelength", "one_hot", "cosine_similarity", "sinusoidal_positional_encoding", "relative_rotation"]


def one_hot(token_ids, vocab_size):
    """One-hot rows: an integer tensor of any shape S -> float32 tensor of shape S + (vocab_size,)
    with a single 1.0 per row, in the column of the token id.

    Raises ValueError if an id is outside 0 .. vocab_size - 1.
    """
    token_ids = torch.as_tensor(token_ids)
    if token_ids.numel() and (token_ids.min() < 0 or token_ids.max() >= vocab_size):
        raise ValueError(f"token ids must lie in 0 .. {vocab_size - 1}")
    out = torch.zeros(*token_ids.shape, vocab_size, dtype=torch.float32)
    return out.scatter_(-1, token_ids.long().unsqueeze(-1), 1.0)


def cosine_similarity(a, b):
    """Every pair's cosine: a (n, d), b (m, d) -> (n, m), entry (i, j) = a_i . b_j / (|a_i| |b_j|).

    A zero row has no direction: its similarities are NaN (0 / 0), stated rather than hidden.
    """
    a_unit = a / a.norm(dim=-1, keepdim=True)
    b_unit = b / b.norm(dim=-1, keepdim=True)
    return a_unit @ b_unit.transpose(-1, -2)


def pair_wavelength(pair, d_model):
    """Positions after which pair `pair` of the sinusoidal encoding (dimensions 2i and 2i + 1)
    repeats: 2 pi / w_i with w_i = 1 / 10000^(2i / d_model). Pair 2 of d_model = 8: 200 pi."""
    return 2 * math.pi * 10000.0 ** (2 * pair / d_model)
