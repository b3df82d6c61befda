"""The pure functions behind notebook 03's demos and widget, and the toy corpus."""
import matplotlib
import numpy as np
import pytest
import torch

from course_utils.data import corpus
from course_utils.reference import relative_rotation, sinusoidal_positional_encoding
from course_utils.widgets import embeddings_positions as demo

matplotlib.use("Agg")


@pytest.mark.parametrize("max_len, d_model", [(1, 2), (50, 16), (64, 128), (10, 6)])
def test_positional_table_is_the_sinusoidal_encoding(max_len, d_model):
    expected = sinusoidal_positional_encoding(max_len, d_model, dtype=torch.float64).numpy()
    np.testing.assert_allclose(demo.positional_table(max_len, d_model), expected, atol=1e-12)


def test_positional_table_needs_an_even_width():
    with pytest.raises(ValueError):
        demo.positional_table(5, 7)


def test_similarity_profile_peaks_at_the_position():
    table = demo.positional_table(64, 32)
    profile = demo.similarity_profile(table, 20)
    assert profile.shape == (64,) and profile.argmax() == 20 and abs(profile[20] - 1) < 1e-12


def test_offset_similarity_depends_only_on_the_offset():
    table = demo.positional_table(40, 24)
    matrix = demo.offset_similarity(table)
    for k in range(-39, 40):
        assert np.ptp(np.diagonal(matrix, k)) < 1e-10
    # and the rotation carries one row to the next
    R = relative_rotation(3, 24, dtype=torch.float64).numpy()
    np.testing.assert_allclose(table[:-3] @ R, table[3:], atol=1e-10)


def test_corpus_is_seeded_and_pairs_are_symmetric():
    assert corpus.make_corpus(20, seed=3) == corpus.make_corpus(20, seed=3)
    sentences = corpus.make_corpus(50, seed=0)
    words, index = corpus.build_vocabulary(sentences)
    assert words == sorted(words) and all(index[w] == i for i, w in enumerate(words))
    centers, contexts = corpus.skipgram_pairs(sentences, index, window=2)
    forward = sorted(zip(centers.tolist(), contexts.tolist()))
    assert forward == sorted(zip(contexts.tolist(), centers.tolist()))
    assert corpus.skipgram_pairs(["a b c"], {"a": 0, "b": 1, "c": 2}, window=1)[0].tolist() == [0, 1, 1, 2]


def test_skipgram_groups_words_by_category():
    sentences = corpus.make_corpus(400, seed=0)
    words, index = corpus.build_vocabulary(sentences)
    centers, contexts = corpus.skipgram_pairs(sentences, index)
    vectors, losses = demo.train_skipgram(centers, contexts, len(words), steps=150)
    assert losses[-1] < losses[0]
    for category, members in corpus.CATEGORIES.items():
        neighbours = demo.nearest_neighbours(vectors, words, members[0], k=2)
        assert all(word in members for word, _ in neighbours), (category, neighbours)


def test_category_agreement_counts_neighbours_of_the_same_category():
    words = ["a1", "a2", "b1", "b2", "the"]
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.7, 0.7]])
    categories = {"a": ("a1", "a2"), "b": ("b1", "b2", "missing")}
    hits, total, chance = demo.category_agreement(vectors, words, categories, k=1)
    assert (hits, total) == (4, 4) and chance == pytest.approx(1 / 4)
    hits, total, _ = demo.category_agreement(vectors, words, categories, k=2)
    assert (hits, total) == (4, 8)  # each word's second neighbour is "the"


def test_previous_token_scorer_learned_fails_beyond_training():
    learned = demo.train_previous_token_scorer("learned", steps=150)
    assert learned["parameters"] == 64 * 16 and learned["train_accuracy"] == 1.0
    assert learned["test_accuracy"] < 0.2
    fixed = demo.train_previous_token_scorer("sinusoidal", steps=150)
    assert fixed["parameters"] == 0 and fixed["train_accuracy"] == 1.0
    with pytest.raises(ValueError):
        demo.train_previous_token_scorer("rotary")


def test_test_correct_agrees_with_test_accuracy():
    result = demo.train_previous_token_scorer("sinusoidal", steps=50, train_len=8, total_len=20)
    assert len(result["test_correct"]) == 12
    assert result["test_accuracy"] == pytest.approx(sum(result["test_correct"]) / 12)


def test_extrapolation_runs_are_the_single_runs():
    runs = demo.extrapolation_runs(seeds=[2, 0], steps=20, train_len=8, total_len=16)
    assert list(runs) == ["learned", "sinusoidal"] and len(runs["learned"]) == 2
    assert runs["learned"][0] == demo.train_previous_token_scorer("learned", seed=2, steps=20, train_len=8, total_len=16)
    assert runs["sinusoidal"][1] == demo.train_previous_token_scorer("sinusoidal", seed=0, steps=20, train_len=8,
                                                                     total_len=16)


def test_hits_by_position_averages_over_runs():
    results = [{"test_correct": [True, False, True]}, {"test_correct": [True, False, False]}]
    np.testing.assert_allclose(demo.hits_by_position(results), [1.0, 0.0, 0.5])


def test_chance_tail_is_the_binomial_distribution():
    assert demo.chance_tail(0, 32, 1 / 64) == pytest.approx((63 / 64) ** 32)
    assert demo.chance_tail(1, 2, 0.5) == pytest.approx(0.75)
    assert demo.chance_tail(10, 10, 0.3) == pytest.approx(1.0)
    # the learned table's guesses, 4 of 320, are what a 1/64 guesser gets or fewer 44 % of the time
    assert 0.4 < demo.chance_tail(4, 320, 1 / 64) < 0.5


def test_off_block_share():
    R = relative_rotation(-1, 16, dtype=torch.float64).numpy()
    assert demo.off_block_share(R) == pytest.approx(0.0, abs=1e-12)
    A = np.zeros((4, 4))
    A[0, 0], A[0, 3] = 1.0, 1.0  # one entry on a block, one off
    assert demo.off_block_share(A) == pytest.approx(0.5)
    assert demo.off_block_share(np.ones((4, 4))) == pytest.approx(0.5)


def test_position_ranges():
    assert demo.position_ranges([45, 32, 41, 42, 43]) == "32, 41-43, 45"
    assert demo.position_ranges([7]) == "7"
    assert demo.position_ranges([]) == "none"


def test_training_leaves_the_thread_count_alone():
    before = torch.get_num_threads()
    demo.train_previous_token_scorer("sinusoidal", steps=5)
    assert torch.get_num_threads() == before


def test_drawing_runs():
    import matplotlib.pyplot as plt

    runs = demo.extrapolation_runs(seeds=[0, 1], steps=10, train_len=8, total_len=16)
    left, right = demo.draw_extrapolation(runs, 8, chance=1 / 16, exact=[True] * 8)
    assert len(right.get_lines()) == 4 and "1/16" in right.get_title()

    table = demo.positional_table(16, 8)
    ax = demo.draw_encoding(table)
    demo.draw_similarity(demo.similarity_profile(table, 3), 3)
    assert "d_model = 8" in ax.get_title()
    plt.close("all")
