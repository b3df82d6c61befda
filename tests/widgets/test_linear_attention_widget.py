"""The pure functions behind notebook 15's widget: what is written, what is read, how it is scored."""
import time

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from course_utils.widgets import linear_attention as demo  # noqa: E402


def test_pairs_are_unit_length_and_rewrites_repeat_the_first_keys():
    keys, values = demo.random_pairs(8, 16, rewritten=0.25, draws=3)
    assert keys.shape == values.shape == (3, 10, 16)
    torch.testing.assert_close(keys.norm(dim=-1), torch.ones(3, 10))
    torch.testing.assert_close(keys[:, 8:], keys[:, :2])
    asked, answers = demo.latest(keys, values, 8)
    torch.testing.assert_close(asked, keys[:, :8])
    torch.testing.assert_close(answers[:, :2], values[:, 8:])  # the rewritten keys answer their new value
    torch.testing.assert_close(answers[:, 2:], values[:, 2:8])


def test_linear_state_is_the_sum_of_outer_products():
    keys, values = demo.random_pairs(5, 4, draws=2)
    expected = sum(torch.outer(keys[1, i], values[1, i]) for i in range(5))
    torch.testing.assert_close(demo.write_state(keys, values, "linear")[1], expected)


def test_delta_rule_reads_the_last_write_exactly_and_orthogonal_keys_all_back():
    keys, values = demo.random_pairs(6, 8, draws=2)
    S = demo.write_state(keys, values, "delta")
    torch.testing.assert_close(keys[:, -1:] @ S, values[:, -1:])  # beta = 1: the last key reads its value
    basis = torch.eye(8)[None, :5]  # orthogonal keys: nothing interferes, every value comes back
    torch.testing.assert_close(basis @ demo.write_state(basis, values[:, :5], "delta"), values[:, :5])


def test_a_rewritten_key_piles_up_in_linear_attention_and_is_replaced_by_the_delta_rule():
    key = F.normalize(torch.ones(1, 1, 4), dim=-1)
    keys, values = key.expand(1, 2, 4), torch.tensor([[[1.0, 0, 0, 0], [0, 1.0, 0, 0]]])
    torch.testing.assert_close(demo.read_back(keys, values, 1, "delta"), values[:, 1:])
    torch.testing.assert_close(demo.read_back(keys, values, 1, "linear"), values.sum(1, keepdim=True))
    torch.testing.assert_close(demo.read_back(keys, values, 1, "softmax"), values[:, 1:])


def test_recall_counts_the_nearest_value_and_the_error():
    keys = torch.eye(3)[None]
    values = torch.eye(3)[None]
    assert demo.recall(keys, values, 3, "linear") == (1.0, 0.0)
    swapped = values[:, [1, 0, 2]]
    # a read-back that lands on another key's value is wrong: linear attention with two equal keys
    same = torch.cat([keys[:, :1], keys[:, :1], keys[:, 2:]], 1)
    right, _ = demo.recall(F.normalize(same, dim=-1), swapped, 3, "linear")
    assert right < 1.0


def test_the_curves_tell_the_rules_apart_and_are_instant():
    start = time.perf_counter()
    curves = demo.recall_curve(16, [4, 16, 64], rewritten=0.5)
    assert time.perf_counter() - start < 2.0
    assert curves["softmax"][0] == [1.0, 1.0, 1.0]
    for rule in ("linear", "delta"):
        recall, error = curves[rule]
        assert recall[0] > recall[-1] and error[0] < error[-1]  # more pairs than dimensions: recall falls
    assert all(d < l for d, l in zip(curves["delta"][1], curves["linear"][1]))  # rewrites pile up in linear
    with pytest.raises(ValueError, match="written by"):
        demo.write_state(torch.zeros(1, 1, 2), torch.zeros(1, 1, 2), "softmax")


def test_the_figure_draws():
    curves = demo.recall_curve(8, [2, 8, 32])
    axes = demo.draw_recall(8, [2, 8, 32], curves)
    assert len(axes[0].lines) == 4 and "8 x 8" in axes[0].get_title()
    plt.close("all")
