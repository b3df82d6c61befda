"""The pure functions behind notebook 01's demos and widget, and its toy sequence data."""
import matplotlib
import numpy as np
import pytest
import torch

from course_utils.data import sequences
from course_utils.reference import rnn_limits as reference
from course_utils.widgets import rnn_limits as demo

matplotlib.use("Agg")


def test_orthogonal_recurrence_has_the_requested_spectral_radius_and_norm():
    W = demo.orthogonal_recurrence(16, 0.7, seed=3)
    assert reference.spectral_radius(W) == pytest.approx(0.7, abs=1e-10)
    assert float(torch.linalg.matrix_norm(W, ord=2)) == pytest.approx(0.7, abs=1e-10)
    assert torch.equal(W, demo.orthogonal_recurrence(16, 0.7, seed=3))


@pytest.mark.parametrize("radius", [0.8, 1.0, 1.25])
def test_linear_rnn_gradient_decays_at_the_spectral_radius(radius):
    norms = demo.gradient_norms(radius, 50, "linear (none)")
    assert norms.shape == (50,) and norms.dtype == np.float64
    assert demo.decay_rate(norms) == pytest.approx(radius, rel=0.02)


def test_tanh_never_decays_slower_than_the_linear_rnn():
    for radius in [0.9, 1.1]:
        linear = demo.decay_rate(demo.gradient_norms(radius, 60, "linear (none)", input_scale=0.5))
        squashed = demo.decay_rate(demo.gradient_norms(radius, 60, "tanh", input_scale=0.5))
        assert squashed < linear


def test_gradient_norms_match_an_explicit_jacobian_product():
    """The autograd measurement equals the chain rule written out for a linear RNN."""
    radius, length, hidden, d_in, seed = 0.9, 7, 6, 3, 2
    norms = demo.gradient_norms(radius, length, "linear (none)", hidden=hidden, d_in=d_in, seed=seed)
    W_hh = demo.orthogonal_recurrence(hidden, radius, seed)
    g = torch.Generator().manual_seed(seed + 1)
    W_xh = torch.randn(d_in, hidden, generator=g, dtype=torch.float64) / d_in ** 0.5
    u = torch.randn(hidden, generator=g, dtype=torch.float64)
    u = u / u.norm()
    expected = [float((W_xh @ torch.linalg.matrix_power(W_hh, length - 1 - t) @ u).norm()) for t in range(length)]
    np.testing.assert_allclose(norms, expected, rtol=1e-10)


def test_decay_rate_of_an_exact_geometric_sequence():
    assert demo.decay_rate(0.5 ** np.arange(10)[::-1]) == pytest.approx(0.5)
    assert demo.decay_rate(2.0 ** np.arange(10)[::-1], last=4) == pytest.approx(2.0)
    assert np.isnan(demo.decay_rate([1.0]))


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        demo.gradient_norms(1.0, 10, "relu")
    with pytest.raises(ValueError):
        demo.gradient_norms(1.0, 0)
    with pytest.raises(ValueError):
        sequences.target_for("sort", torch.zeros(1, 3, dtype=torch.long))


def test_sequences_are_seeded_and_right():
    source, target = sequences.make_batch("reverse", 4, 5, 8, torch.Generator().manual_seed(0))
    assert source.shape == target.shape == (4, 5) and source.dtype == torch.int64
    assert torch.equal(target, source.flip(1)) and int(source.max()) < 8
    copy_source, copy_target = sequences.make_batch("copy", 2, 3, 8, torch.Generator().manual_seed(0))
    assert torch.equal(copy_source, copy_target)
    first = [b for _, b in zip(range(3), sequences.batches("copy", 2, range(2, 6), 8, seed=1))]
    again = [b for _, b in zip(range(3), sequences.batches("copy", 2, range(2, 6), 8, seed=1))]
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, again))
    test = sequences.fixed_test_set("reverse", [3, 4], 5, 8)
    assert set(test) == {3, 4} and test[4][0].shape == (5, 4)
    assert sequences.bos(8) == 8


def test_seq2seq_shapes_and_repeatable_training():
    model = demo.Seq2Seq(5, hidden=8, embed=4)
    source, target = sequences.make_batch("copy", 3, 4, 5, torch.Generator().manual_seed(0))
    assert model(source, target).shape == (3, 4, 5)
    assert model.generate(source).shape == (3, 4)
    first, losses = demo.train_seq2seq("reverse", lengths=[2, 3], steps=15, n_symbols=5, hidden=8, embed=4,
                                       batch_size=8)
    second, again = demo.train_seq2seq("reverse", lengths=[2, 3], steps=15, n_symbols=5, hidden=8, embed=4,
                                       batch_size=8)
    assert losses == again and len(losses) == 15
    assert (demo.accuracy_by_length(first, "reverse", [2, 3], per_length=20)
            == demo.accuracy_by_length(second, "reverse", [2, 3], per_length=20))
    position = demo.accuracy_by_position(first, "reverse", 3, per_length=10)
    assert position.shape == (3,) and ((0 <= position) & (position <= 1)).all()


def test_a_trained_model_gets_short_strings_right_and_long_ones_wrong():
    model, _ = demo.train_seq2seq("reverse", lengths=range(2, 9), steps=150, n_symbols=6, hidden=24,
                                  batch_size=32)
    accuracy = demo.accuracy_by_length(model, "reverse", [2, 16], per_length=100)
    assert accuracy[2] > 0.9 and accuracy[16] < accuracy[2] - 0.3


def test_timing_returns_one_positive_time_per_length():
    sequential, parallel = demo.time_sequential_vs_parallel([4, 8], hidden=8, batch=2, repeats=1)
    assert len(sequential) == len(parallel) == 2 and min(sequential + parallel) > 0


def test_drawings_have_titles_and_labels():
    ax = demo.draw_gradient_norms({"tanh": demo.gradient_norms(0.9, 20)}, radius=0.9)
    assert ax.get_title() and ax.get_xlabel() and ax.get_yscale() == "log"
    ax = demo.draw_accuracy_by_length({2: 1.0, 3: 0.5}, n_symbols=8, trained_lengths=[2, 3])
    assert ax.get_title() and ax.get_ylabel() == "token accuracy"
    matplotlib.pyplot.close("all")


def test_multiply_adds_count_both_products_of_every_position():
    # x_t W_ih and h W_hh: two (H x H) products per position, B * T positions.
    assert demo.multiply_adds(10, hidden=4, batch=3) == 2 * 3 * 10 * 16


def test_loglog_slope_of_an_exact_power_law():
    lengths = [16, 32, 64, 128]
    assert abs(demo.loglog_slope(lengths, [3e-6 * n ** 1.5 for n in lengths]) - 1.5) < 1e-9


def test_a_copy_kept_part_way_equals_the_shorter_run():
    import copy

    kept = {}

    def keep(step, model):
        if step == 3:
            kept[step] = copy.deepcopy(model)

    short, short_losses = demo.train_seq2seq("reverse", lengths=range(2, 5), steps=3, hidden=8, embed=4, batch_size=4)
    _, long_losses = demo.train_seq2seq("reverse", lengths=range(2, 5), steps=6, hidden=8, embed=4, batch_size=4,
                                        callback=keep)
    assert long_losses[:3] == short_losses
    for a, b in zip(short.parameters(), kept[3].parameters()):
        assert torch.equal(a, b)


def test_the_attention_model_looks_at_every_encoder_state():
    torch.manual_seed(0)
    model = demo.Seq2Seq(5, hidden=8, embed=4, attention=True, bidirectional=True)
    source, target = sequences.make_batch("reverse", 3, 6, 5, torch.Generator().manual_seed(0))
    assert model(source, target).shape == (3, 6, 5) and model.generate(source).shape == (3, 6)
    # The first output depends on every source symbol through the context, not only through the
    # hand-over: cut the hand-over (zero state) and the logits still change when any symbol does.
    encoder_states, _ = model.encode(source)
    decoder_states, _ = model.decoder(model.embed(torch.full_like(source[:, :1], 5)), torch.zeros(1, 3, 8))
    base = model.read_out(decoder_states, encoder_states)
    for position in range(6):
        changed = source.clone()
        changed[:, position] = (changed[:, position] + 1) % 5
        other_states, _ = model.encode(changed)
        assert not torch.allclose(model.read_out(decoder_states, other_states), base)
    # Without attention the read-out ignores the encoder's states entirely.
    plain = demo.Seq2Seq(5, hidden=8, embed=4, bidirectional=True)
    states, last = plain.encode(source)
    assert last.shape == (1, 3, 8)
    assert torch.equal(plain.read_out(decoder_states, states), plain.read_out(decoder_states, states * 0))


def test_the_bidirectional_encoder_is_torch_gru():
    torch.manual_seed(0)
    model = demo.Seq2Seq(5, hidden=8, embed=4, bidirectional=True)
    source, _ = sequences.make_batch("reverse", 3, 6, 5, torch.Generator().manual_seed(0))
    states, last = model.encode(source)  # both directions in one pass, with the module's weights
    expected, expected_last = model.encoder(model.embed(source))
    assert torch.equal(states, expected)
    assert torch.equal(last, torch.cat([expected_last[0], expected_last[1]], dim=-1)[None])


def test_an_odd_bidirectional_width_is_refused():
    with pytest.raises(ValueError, match="even"):
        demo.Seq2Seq(5, hidden=7, bidirectional=True)


def test_the_bottleneck_experiment_reports_every_seed_and_the_longer_run():
    results = demo.bottleneck_experiment(seeds=(0, 1), steps=4, longer_steps=6, lengths=range(2, 5),
                                         test_lengths=[3, 4], position_length=4, hidden=8, per_length=5)
    assert set(results) == set(demo.MODELS)
    plain, looking = results["no attention"], results["attention"]
    assert set(plain["by_length"]) == {0, 1} and set(plain["by_length"][0]) == {3, 4}
    assert plain["by_position"][1].shape == (4,) and "longer" in plain and "longer" not in looking
    assert plain["longer"]["steps"] == 6
    # The short run of seed 0 is the first 4 steps of its longer run, so it equals a plain 4-step run.
    alone, _ = demo.train_seq2seq("reverse", lengths=range(2, 5), steps=4, hidden=8, seed=0, bidirectional=True)
    assert plain["by_length"][0] == demo.accuracy_by_length(alone, "reverse", [3, 4], per_length=5)
    mean, low, high = demo.spread(plain["by_length"], 3)
    assert low <= mean <= high
    axes = demo.draw_bottleneck(results, trained_lengths=range(2, 5))
    assert all(ax.get_title() for ax in axes)
    matplotlib.pyplot.close("all")


def test_a_trained_attention_model_beats_the_plain_one_on_long_strings():
    kwargs = dict(lengths=range(2, 13), steps=150, n_symbols=6, hidden=32, batch_size=32, bidirectional=True)
    plain, _ = demo.train_seq2seq("reverse", **kwargs)
    looking, _ = demo.train_seq2seq("reverse", attention=True, **kwargs)
    plain_accuracy = demo.accuracy_by_length(plain, "reverse", [12], per_length=100)[12]
    looking_accuracy = demo.accuracy_by_length(looking, "reverse", [12], per_length=100)[12]
    assert looking_accuracy > plain_accuracy + 0.2, (plain_accuracy, looking_accuracy)
