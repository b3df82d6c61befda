"""The pure functions behind notebook 06's demos and widget (course_utils/widgets/scaling_dk.py)."""
import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from course_utils.reference.scaling_dk import softmax_jacobian
from course_utils.widgets import scaling_dk as demo

matplotlib.use("Agg")


def test_entropy_of_uniform_and_one_hot():
    assert float(demo.entropy(torch.full((8,), 1 / 8))) == pytest.approx(math.log(8))
    assert float(demo.entropy(torch.tensor([0.0, 1.0, 0.0]))) == 0.0
    np.testing.assert_allclose(demo.entropy(torch.tensor([[0.5, 0.5], [1.0, 0.0]])), [math.log(2), 0.0])


def test_measured_variance_follows_d_k_and_scaling_brings_it_to_one():
    measured = demo.measure_score_variance([4, 64, 1024], n_pairs=4000, seed=0)
    np.testing.assert_allclose(measured["raw"] / measured["d_k"], 1.0, rtol=0.1)
    np.testing.assert_allclose(measured["scaled"], 1.0, rtol=0.1)
    np.testing.assert_allclose(measured["scaled"], measured["raw"] / measured["d_k"], rtol=1e-12)


def test_measurement_is_seeded():
    a = demo.measure_score_variance([8, 16], n_pairs=100, seed=3)
    b = demo.measure_score_variance([8, 16], n_pairs=100, seed=3)
    np.testing.assert_array_equal(a["raw"], b["raw"])


def test_saturation_curve_collapses_and_matches_the_jacobian_formula():
    curve = demo.saturation_curve([0.1, 1.0, 10.0, 100.0], n=8, seed=0)
    assert curve["entropy"][0] == pytest.approx(math.log(8), rel=0.01)
    assert curve["entropy"][-1] < 1e-6 and curve["jacobian_norm"][-1] < 1e-10
    assert np.all(np.diff(curve["entropy"]) < 0)
    assert np.all(np.diff(curve["max_weight"]) > 0)
    # autograd's Jacobian norm equals the norm of diag(s) - s s^T
    z = torch.randn(8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    expected = float(torch.linalg.matrix_norm(softmax_jacobian(10.0 * z)))
    assert curve["jacobian_norm"][2] == pytest.approx(expected, rel=1e-9)


def test_gradient_to_projections_dies_without_scaling_only():
    stats = demo.projection_gradient_stats([16, 1024], n_tokens=16, n_trials=3, seed=0)
    assert np.all(stats["scaled_W_Q_dead"] == 0) and np.all(stats["scaled_W_K_dead"] == 0)
    assert stats["unscaled_W_Q_dead"][-1] > 0.2
    assert stats["unscaled_W_Q_median"][-1] < 0.01 * stats["scaled_W_Q_median"][-1]


@pytest.mark.parametrize("d_k", [1, 64, 1024])
def test_saturation_panel(d_k):
    panel = demo.saturation_panel(d_k, temperature=1.0, n_keys=10, n_hist=500, seed=0)
    for mode in demo.MODES:
        data = panel[mode]
        assert data["weights"].shape == (10,) and data["weights"].sum() == pytest.approx(1.0)
        assert 0.0 <= data["entropy"] <= panel["max_entropy"] + 1e-9
        assert data["logits_hist"].shape == (500,)
        np.testing.assert_allclose(data["logits"] * data["divisor"], panel["unscaled"]["logits"], rtol=1e-9)
    assert panel["scaled"]["divisor"] == pytest.approx(math.sqrt(d_k))
    # scaled logits have unit spread at every d_k
    assert panel["scaled"]["logits_hist"].std() == pytest.approx(1.0, rel=0.15)


def test_temperature_divides_the_logits_and_softens_both_modes():
    cold = demo.saturation_panel(64, temperature=0.25, n_hist=10)
    hot = demo.saturation_panel(64, temperature=4.0, n_hist=10)
    for mode in demo.MODES:
        np.testing.assert_allclose(cold[mode]["logits"], 16 * hot[mode]["logits"], rtol=1e-9)
        assert hot[mode]["entropy"] > cold[mode]["entropy"]


def test_panel_keeps_the_same_vectors_as_d_k_grows():
    small = demo.saturation_panel(4, n_hist=10, seed=0)
    large = demo.saturation_panel(16, n_hist=10, seed=0)
    assert not np.allclose(small["unscaled"]["logits"], large["unscaled"]["logits"])
    assert demo.saturation_panel(4, n_hist=10, seed=0)["unscaled"]["logits"].tolist() == small["unscaled"]["logits"].tolist()


def test_bad_arguments():
    with pytest.raises(ValueError):
        demo.saturation_panel(0)
    with pytest.raises(ValueError):
        demo.saturation_panel(4, temperature=0)


def test_figures_draw():
    demo.draw_score_variance(demo.measure_score_variance([4, 16], n_pairs=50))
    demo.draw_saturation_curve(demo.saturation_curve([1.0, 10.0]))
    demo.draw_projection_gradients(demo.projection_gradient_stats([4, 8], n_trials=1))
    fig = demo.draw_saturation_panel(demo.saturation_panel(8, temperature=2.0, n_hist=50))
    assert len(fig.axes) == 4
    plt.close("all")
