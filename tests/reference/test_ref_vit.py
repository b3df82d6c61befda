"""The reference patchify against F.unfold and a hand example."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.reference.vision_transformer import patchify


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3)
)
def test_patchify_matches_unfold(B, C, P, rows, cols):
    images = torch.randn(B, C, rows * P, cols * P)
    patches = patchify(images, P)
    assert patches.shape == (B, rows * cols, C * P * P)
    assert torch.equal(patches, F.unfold(images, P, stride=P).transpose(1, 2))


def test_patchify_hand_example():
    # One 4 x 4 single-channel image holding 0..15 row by row; 2 x 2 patches.
    image = torch.arange(16.0).reshape(1, 1, 4, 4)
    patches = patchify(image, 2)
    expected = torch.tensor(
        [
            [0, 1, 4, 5],  # top-left
            [2, 3, 6, 7],  # top-right
            [8, 9, 12, 13],  # bottom-left
            [10, 11, 14, 15],  # bottom-right
        ],
        dtype=torch.float32,
    )
    assert torch.equal(patches[0], expected)
    # Two channels: channel 0's pixels, then channel 1's, within each patch.
    two = torch.cat([image, image + 100], dim=1)
    assert patchify(two, 2)[0, 1].tolist() == [2, 3, 6, 7, 102, 103, 106, 107]


def test_patchify_rejects_indivisible_sizes():
    with pytest.raises(ValueError, match="6 x 8"):
        patchify(torch.zeros(1, 3, 6, 8), 4)
    with pytest.raises(ValueError, match="7"):
        patchify(torch.zeros(1, 3, 8, 7), 4)
    with pytest.raises(ValueError):
        patchify(torch.zeros(3, 8, 8), 4)
