"""Ground truth of the course: instructor side only.

Every name that tests and outside checks rely on (docs/design.md, "Names other checks call") is
importable from here. Hidden tests use it through the mistake catalogues in
`course_utils.reference.mistakes`; the student bundle leaves this package out, and visible tests
and demos never import it.
"""
from .attention import (
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)
from .bahdanau_attention import additive_attention, dot_score, multiplicative_score
from .causal_cnn import CausalConv1d, conv_output_length, receptive_field
from .positions import relative_rotation, sinusoidal_positional_encoding
from .vision_transformer import patchify

__all__ = [
    "MultiHeadAttention", "causal_mask", "merge_heads", "padding_mask",
    "scaled_dot_product_attention", "split_heads", "additive_attention", "dot_score",
    "multiplicative_score", "CausalConv1d", "conv_output_length", "receptive_field",
    "relative_rotation", "sinusoidal_positional_encoding", "patchify",
]
