"""The shared figures draw, carry titles and labels, and reject what they cannot draw."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils import plots  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_show_attention_draws_a_labelled_heatmap():
    weights = torch.softmax(torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), dim=-1)
    ax = plots.show_attention(weights, ["a", "b", "c"], ["w", "x", "y", "z"], title="T", highlight_row=1)
    ax.figure.canvas.draw()
    assert ax.get_title() == "T"
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert len(ax.texts) == 12  # one annotation per cell
    assert len(ax.patches) == 1  # the highlighted row


def test_show_attention_on_given_axes_without_annotations():
    fig, axes = plt.subplots(1, 2)
    ax = plots.show_attention(np.eye(20), ax=axes[1], colorbar=False, vmin=None, vmax=None)
    fig.canvas.draw()
    assert ax is axes[1]
    assert len(ax.texts) == 0  # too large to annotate by default


def test_show_attention_rejects_a_vector():
    with pytest.raises(ValueError, match="2-D"):
        plots.show_attention(np.ones(3))


def test_show_bars_labels_and_highlights():
    ax = plots.show_bars([0.2, 0.5, 0.3], ["a", "b", "c"], title="B", xlabel="key", highlight=1)
    ax.figure.canvas.draw()
    assert ax.get_title() == "B" and ax.get_xlabel() == "key" and ax.get_ylabel() == "weight"
    colours = [bar.get_facecolor() for bar in ax.patches]
    assert colours[1] != colours[0] == colours[2]


def test_plot_loglog_draws_measurement_and_guides():
    ns = np.array([16, 32, 64, 128])
    ax = plots.plot_loglog(ns, 1e-6 * ns ** 2, title="cost", xlabel="n", ylabel="seconds")
    ax.figure.canvas.draw()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert len(ax.get_lines()) == 3  # measured + slopes 1 and 2
    assert ax.get_title() == "cost"
