"""The reference answers of the think-first questions of notebooks 01-08, each against a count or a
measurement made another way (the catalogue grades students against these numbers)."""
import math

import numpy as np
import torch
from torch import nn

from course_utils.data import dates
from course_utils.models import seq2seq
from course_utils.reference import (bahdanau_attention, causal_cnn, embeddings_positions, masking_transformer,
                                    multi_head, rnn_limits, scaling_dk)


def test_longest_string_is_the_last_length_whose_strings_all_fit_in_the_bits():
    assert rnn_limits.longest_distinguishable_string() == 21
    for numbers, bits, symbols in ((32, 2, 8), (4, 1, 2), (10, 3, 5)):
        n = rnn_limits.longest_distinguishable_string(numbers, bits, symbols)
        assert symbols ** n <= 2 ** (numbers * bits) < symbols ** (n + 1)


def test_layers_to_reach_is_the_first_depth_whose_field_is_wide_enough():
    assert causal_cnn.layers_to_reach(1000) == 10
    assert causal_cnn.layers_to_reach(1024) == 10 and causal_cnn.layers_to_reach(1025) == 11
    assert causal_cnn.layers_to_reach(1000, kernel_size=3) == 9  # field 1 + 2 (2^L - 1): 511 < 1000 <= 1023


def test_pair_wavelength_is_the_measured_period_of_the_encoding():
    assert math.isclose(embeddings_positions.pair_wavelength(2, 8), 200 * math.pi)
    table = embeddings_positions.sinusoidal_positional_encoding(2000, 8).numpy()
    column = table[:, 4]  # sin(pos * w_2)
    upward = np.flatnonzero((column[:-1] < 0) & (column[1:] >= 0))
    assert abs(np.diff(upward).mean() - embeddings_positions.pair_wavelength(2, 8)) < 1.0


def test_weights_per_translation_match_the_models_weights():
    text = "the 3rd of March, 1999"
    torch.manual_seed(0)
    _, weights = seq2seq.greedy_translate(seq2seq.Seq2Seq(attention=True), [text])
    assert bahdanau_attention.attention_weights_per_translation(len(text), dates.TARGET_LENGTH) == weights[0].numel() == 242


def test_dot_product_variance_matches_a_simulation():
    generator = torch.Generator().manual_seed(0)
    q = 2 ** 0.5 * torch.randn(50_000, 256, generator=generator, dtype=torch.float64)
    k = 2 ** 0.5 * torch.randn(50_000, 256, generator=generator, dtype=torch.float64)
    measured = (q * k).sum(1).var().item()
    assert abs(measured / scaling_dk.dot_product_variance(256, 2.0, 2.0) - 1) < 0.03


def test_attention_weight_count_matches_pytorchs_weights():
    x = torch.zeros(2, 10, 64)
    _, weights = nn.MultiheadAttention(64, 8, batch_first=True)(x, x, x, average_attn_weights=False)
    assert multi_head.attention_weight_count(2, 10, 8) == weights.numel() == 1600


def test_causally_blocked_pairs_counts_the_upper_triangle():
    for T in (1, 2, 7, 64):
        assert masking_transformer.causally_blocked_pairs(T) == int(torch.ones(T, T).triu(1).sum())
