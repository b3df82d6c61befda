"""The pure functions behind notebook 05's demos: fast, seeded, and right."""
import math

import numpy as np
import pytest

from course_utils.data import sentences
from course_utils.widgets import self_attention as demo


def test_worked_example_has_the_lecture_dot_products():
    q1, k1, k2 = demo.worked_example()
    assert q1.shape == k1.shape == k2.shape == (64,)
    assert q1 @ k1 == pytest.approx(112.0)
    assert q1 @ k2 == pytest.approx(96.0)
    scores = np.array([q1 @ k1, q1 @ k2]) / np.sqrt(64)
    weights = np.exp(scores) / np.exp(scores).sum()
    assert np.round(weights, 2).tolist() == [0.88, 0.12]


def test_worked_example_is_seeded():
    a, b = demo.worked_example(seed=3), demo.worked_example(seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("name", sorted(sentences.SENTENCES))
@pytest.mark.parametrize("projections", sorted(demo.PROJECTIONS))
def test_sentence_attention_rows_are_distributions(name, projections):
    words, weights = demo.sentence_attention(name, projections=projections)
    assert words == sentences.tokenize(name)
    assert weights.shape == (len(words), len(words))
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)


def test_scale_zero_gives_uniform_weights():
    words, weights = demo.sentence_attention("cat", scale=0.0)
    np.testing.assert_allclose(weights, 1.0 / len(words))


def test_larger_scale_sharpens_every_row():
    _, soft = demo.sentence_attention("animal", scale=0.5)
    _, sharp = demo.sentence_attention("animal", scale=3.0)
    assert (sharp.max(axis=1) > soft.max(axis=1)).all()


def test_hand_made_projections_resolve_the_pronoun():
    words, weights = demo.sentence_attention("animal")
    it = words.index("it")
    assert words[int(weights[it].argmax())] == "animal"
    tired = words.index("tired")
    assert words[int(weights[tired].argmax())] == "animal"


def test_sentence_attention_is_repeatable():
    assert np.array_equal(demo.sentence_attention("dog")[1], demo.sentence_attention("dog")[1])


def test_embeddings_are_seeded_and_distinct():
    words, X = sentences.embed("animal")
    _, again = sentences.embed("animal")
    assert np.array_equal(X, again)
    assert X.shape == (len(words), sentences.D_MODEL)
    # "the" appears twice and gets the same embedding; different words differ
    assert np.array_equal(X[0], X[4])
    assert not np.allclose(X[1], X[2])


def test_embedding_needs_room_for_the_features():
    with pytest.raises(ValueError):
        sentences.embedding_table(d_model=3)


def test_time_attention_returns_positive_seconds():
    seconds = demo.time_attention([8, 16], d=4, repeats=1)
    assert seconds.shape == (2,)
    assert (seconds > 0).all() and np.isfinite(seconds).all()


def test_attention_matrix_bytes():
    assert demo.attention_matrix_bytes(1024) == 4 * 1024 ** 2
    assert demo.attention_matrix_bytes(10, batch=2, heads=3, bytes_per_number=8) == 2 * 3 * 100 * 8


def test_loglog_slope_recovers_a_power_law():
    ns = np.array([10, 20, 40, 80])
    assert demo.loglog_slope(ns, 3.0 * ns ** 2.0) == pytest.approx(2.0)


def test_attention_flops_by_part():
    n, d = 7, 5
    assert demo.attention_flops_by_part(n, d) == (2 * 4 * n * d * d, 2 * 2 * n * n * d)


# The whole table: formulas against FlopCounterMode, chains and paths from the autograd graph.

@pytest.mark.parametrize("name", list(demo.TABLE))
@pytest.mark.parametrize("n, d", [(5, 3), (9, 4)])
def test_counted_flops_match_each_layers_formula(name, n, d):
    assert demo.counted_flops(name, n, d) == demo.formula_flops(name, n, d, k=3)


def test_counted_flops_reproduce_the_seeds_slide():
    flops = {name: demo.counted_flops(name, 1000, 1000) for name in demo.TABLE}
    assert flops["LSTM"] == 16 * 10**9                 # the slide's "RNN (LSTM)"
    assert flops["causal CNN, k = 3"] == 6 * 10**9     # the slide's convolution, kernel width 3
    assert flops["self-attention + W_O"] == 12 * 10**9  # the slide's 4e9 plus 8e9 of projections
    assert flops["RNN (notebook 01)"] == 4 * 10**9


@pytest.mark.parametrize("n", [4, 12])
def test_sequential_chain_grows_with_n_only_for_the_recurrent_layers(n):
    assert demo.sequential_products("RNN (notebook 01)", n) == n   # one h W_hh per step, plus x_0 W_xh
    assert demo.sequential_products("LSTM", n) == n
    assert demo.sequential_products("causal CNN, k = 3", n) == 1
    assert demo.sequential_products("self-attention + W_O", n) == 4  # x W_k, Q K^T, A V, W_O


def test_path_length_layers_follow_the_receptive_field():
    n, k = 20, 3
    assert demo.path_length("causal CNN, k = 3", n)[0] == math.ceil((n - 1) / (k - 1))  # 1 + L (k - 1) >= n
    assert demo.path_length("dilated causal CNN, k = 3", n)[0] == math.ceil(math.log(n, k))  # k^L >= n
    assert demo.path_length("self-attention + W_O", n)[0] == 1
    assert demo.path_length("RNN (notebook 01)", n)[0] == 1


def test_path_operations_grow_linearly_for_recurrences_and_stay_flat_for_attention():
    ops = {name: [demo.path_length(name, n)[1] for n in (8, 16)] for name in demo.TABLE}
    assert ops["self-attention + W_O"][0] == ops["self-attention + W_O"][1]
    rnn_a, rnn_b = ops["RNN (notebook 01)"]
    assert rnn_b - rnn_a == 4 * 8  # per step: x W_xh + h W_hh (a product and two sums) and a tanh
    lstm_a, lstm_b = ops["LSTM"]
    assert lstm_b > lstm_a


def test_cost_table_prints_every_layer():
    rows = demo.cost_table(ns=(6, 12), flops_n=8, flops_d=4)
    assert [row["layer"] for row in rows] == list(demo.TABLE)
    assert all(row["flops"] == row["formula_flops"] for row in rows)
    text = demo.format_cost_table(rows, ns=(6, 12), flops_n=8, flops_d=4)
    assert all(name in text for name in demo.TABLE)
