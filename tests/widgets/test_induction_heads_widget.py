"""The pure functions behind notebook 14's demos read what training recorded, at the right step."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils import induction  # noqa: E402
from course_utils.widgets import induction_heads as demo  # noqa: E402

SMALL = induction.Config(vocab=11, seq_len=16, min_span=3, max_span=6, d_model=8, num_heads=2, steps=12,
                         batch_size=4, eval_every=4, eval_size=8)


@pytest.fixture(scope="module")
def run():
    return induction.train_seeds(SMALL, seeds=(0, 1))


def test_phase_change_steps_read_each_seeds_curve(run):
    run = induction.TrainingRun(**{**run.__dict__, "repeated_loss": torch.tensor([[3.0, 2.0, 1.0, 0.5],
                                                                                  [3.0, 3.0, 3.0, 3.0]])})
    assert demo.phase_change_steps(run, level=1.5) == [8, None]
    assert demo.phase_change_steps(run, level=2.5) == [4, None]


def test_pattern_at_picks_the_nearest_recorded_step(run):
    assert run.steps.tolist() == [0, 4, 8, 12]
    step, pattern = demo.pattern_at(run, 1, 5, 1, 0)
    assert step == 4
    assert pattern.shape == (12, 12)
    torch.testing.assert_close(torch.from_numpy(pattern), run.patterns[1, 1, 1, 0])
    assert demo.pattern_at(run, 0, 100, 0, 1)[0] == 12
    assert demo.pattern_at(run, 0, 7, 0, 1)[0] == 8


def test_the_figures_draw(run):
    ax = demo.draw_phase_change(run, run)
    assert ax.get_xlabel() == "training step" and len(ax.lines) >= 3 * 2
    ax = demo.draw_pattern(run, 0, 12, 1, 1)
    assert "step 12" in ax.get_title() and len(ax.get_xticklabels()) == 12
    plt.close("all")
