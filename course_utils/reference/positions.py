"""Sinusoidal positional encoding and its relative-position rotation property.

Ground truth for notebook 03 (embeddings and positions).

Each pair of columns (2i, 2i+1) of the encoding is a point on a circle turning at its own
angular frequency w_i = 1 / 10000^(2i / d_model):

    PE[pos, 2i]     = sin(pos * w_i)
    PE[pos, 2i + 1] = cos(pos * w_i)

Moving k positions forward turns every circle by the angle k * w_i, whatever pos is. So a
fixed matrix R_k (a rotation in each pair of columns) maps the encoding of any position to the
encoding k positions later. This module uses **row vectors**:

    PE[pos + k] = PE[pos] @ R_k        (R_k = relative_rotation(k, d_model))
"""

import torch

__all__ = ["sinusoidal_positional_encoding", "relative_rotation"]


def _frequencies(d_model):
    """Angular frequency of each column pair. Shape: (ceil(d_model / 2),), float64."""
    # 2i for i = 0, 1, ...: the even column indices.
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    return 1.0 / (10000.0 ** (two_i / d_model))


def sinusoidal_positional_encoding(max_len, d_model, dtype=torch.float32):
    """The fixed positional encoding of "Attention Is All You Need".

    Returns a tensor of shape (max_len, d_model) (float32 unless ``dtype`` says otherwise);
    row pos is the encoding of position pos = 0 .. max_len - 1:

        PE[pos, 2i]     = sin(pos / 10000^(2i / d_model))
        PE[pos, 2i + 1] = cos(pos / 10000^(2i / d_model))

    Odd d_model: the formula above is applied as written, so the last column (index
    d_model - 1, even) is a sine with no cosine partner.
    """
    if max_len < 0 or d_model < 1:
        raise ValueError(f"need max_len >= 0 and d_model >= 1, got {max_len} and {d_model}")
    # Computed in float64 and cast at the end: pos * w reaches large angles for long sequences.
    # Shape of angles: (max_len, ceil(d_model / 2))
    positions = torch.arange(max_len, dtype=torch.float64)
    angles = positions[:, None] * _frequencies(d_model)[None, :]
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    # With an odd d_model there is one fewer odd column than even ones: drop the last cosine.
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe.to(dtype)


def relative_rotation(offset, d_model, dtype=torch.float32):
    """The matrix R_k that moves any sinusoidal encoding k = offset positions along.

    Row-vector convention: for every position pos,

        PE[pos + offset] = PE[pos] @ R_k

    where PE = sinusoidal_positional_encoding(..., d_model). Returns a (d_model, d_model)
    block-diagonal matrix; the 2 x 2 block for the column pair (2i, 2i+1), with
    theta = offset * w_i and w_i = 1 / 10000^(2i / d_model), is

        [[ cos(theta), -sin(theta)],
         [ sin(theta),  cos(theta)]]

    because [sin a, cos a] @ block = [sin(a + theta), cos(a + theta)]. R_k does not depend on
    pos: this is why the encoding lets attention express "k positions away".
    offset may be negative (moving back) and need not be an integer.

    Raises ValueError for odd d_model: the unpaired last sine column cannot be moved by a
    fixed linear map (sin(a + theta) needs cos(a), which is not in the encoding).
    """
    if d_model < 2 or d_model % 2:
        raise ValueError(
            f"relative_rotation needs an even d_model (pairs of sin/cos columns), got {d_model}"
        )
    theta = offset * _frequencies(d_model)  # Shape: (d_model / 2,)
    cos, sin = torch.cos(theta), torch.sin(theta)
    rotation = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    odd = even + 1
    # Fill the 2 x 2 blocks on the diagonal.
    rotation[even, even] = cos
    rotation[even, odd] = -sin
    rotation[odd, even] = sin
    rotation[odd, odd] = cos
    return rotation.to(dtype)
