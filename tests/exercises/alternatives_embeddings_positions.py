"""Second correct implementations of notebook 03's exercises, written differently from the
reference: the real test cells must pass them too."""
import math

import numpy as np
import torch



def one_hot_by_comparison(token_ids, vocab_size):
    """Broadcast each id against 0 .. V-1: True exactly in its own column."""
    return (token_ids[..., None] == torch.arange(vocab_size)).float()


def one_hot_by_eye(token_ids, vocab_size):
    """Rows of the identity matrix, picked by id."""
    return torch.eye(vocab_size)[token_ids]


def cosine_by_einsum(a, b):
    dots = torch.einsum("nd,md->nm", a, b)
    return dots * torch.rsqrt((a * a).sum(-1))[:, None] * torch.rsqrt((b * b).sum(-1))[None, :]


def cosine_in_numpy(a, b):
    a, b = a.numpy(), b.numpy()
    return torch.from_numpy(
        (a @ b.T) / np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))
    )


def sinusoidal_by_loops(max_len, d_model):
    """The formula entry by entry, in plain Python."""
    rows = []
    for pos in range(max_len):
        row = []
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32).reshape(max_len, d_model)


def sinusoidal_by_complex(max_len, d_model):
    """exp(i * pos * w): imaginary part is the sine, real part the cosine; interleave them."""
    w = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * w
    phasors = torch.polar(torch.ones_like(angles), angles)
    return torch.stack([phasors.imag, phasors.real], dim=-1).reshape(max_len, d_model).float()


def rotation_by_block_diag(offset, d_model):
    blocks = []
    for i in range(d_model // 2):
        theta = offset / 10000 ** (2 * i / d_model)
        c, s = math.cos(theta), math.sin(theta)
        blocks.append(torch.tensor([[c, -s], [s, c]]))
    return torch.block_diag(*blocks)


def rotation_by_matrix_exponential(offset, d_model):
    """R_k = exp(k G), where G turns each pair at its angular speed w_i (the generator)."""
    G = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        w = 10000.0 ** (-2 * i / d_model)
        G[2 * i + 1, 2 * i], G[2 * i, 2 * i + 1] = w, -w
    return torch.linalg.matrix_exp(offset * G)


ALTERNATIVES = {
    "embeddings_positions_wavelength": [628.3, 628.32, 200 * 3.14159, 2 * 3.14159265 * 100, np.float32(2 * np.pi * 100)],
    "embeddings_positions_one_hot": [one_hot_by_comparison, one_hot_by_eye],
    "embeddings_positions_cosine": [cosine_by_einsum, cosine_in_numpy],
    "embeddings_positions_sinusoidal": [sinusoidal_by_loops, sinusoidal_by_complex],
    "embeddings_positions_rotation": [rotation_by_block_diag, rotation_by_matrix_exponential],
}
