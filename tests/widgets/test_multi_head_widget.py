"""The pure functions behind notebook 07's demos and widget (course_utils/widgets/multi_head.py)
and its toy task (course_utils/data/relations.py)."""
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from course_utils.data import relations
from course_utils.reference import merge_heads, split_heads
from course_utils.widgets import multi_head as demo

matplotlib.use("Agg")


def test_relation_targets():
    tokens = torch.tensor([[3, 1, 4, 1, 5]])
    targets = relations.relation_targets(tokens)
    ignore = relations.IGNORE
    assert targets["previous"].tolist() == [[ignore, 3, 1, 4, 1]]
    assert targets["next"].tolist() == [[1, 4, 1, 5, ignore]]
    assert targets["first"].tolist() == [[3, 3, 3, 3, 3]]
    assert relations.source_positions("previous", 3) == [-1, 0, 1]
    with pytest.raises(ValueError):
        relations.source_positions("sideways", 3)


def test_make_batch_is_seeded():
    a, _ = relations.make_batch(4, 6, 10, torch.Generator().manual_seed(0))
    b, _ = relations.make_batch(4, 6, 10, torch.Generator().manual_seed(0))
    assert a.shape == (4, 6) and torch.equal(a, b) and int(a.max()) < 10


@pytest.mark.parametrize("seq_len, d_model, num_heads", [(5, 12, 3), (2, 6, 3), (4, 8, 1)])
def test_split_numbers_agree_with_split_heads(seq_len, d_model, num_heads):
    x = torch.arange(seq_len * d_model).reshape(1, seq_len, d_model)
    expected = split_heads(x, num_heads)[0].numpy()
    np.testing.assert_array_equal(demo.split_numbers(seq_len, d_model, num_heads), expected)
    wrong = demo.split_numbers(seq_len, d_model, num_heads, transpose=False)
    np.testing.assert_array_equal(wrong.ravel(), np.arange(seq_len * d_model))
    np.testing.assert_array_equal(merge_heads(torch.as_tensor(expected)[None])[0].numpy(), x[0].numpy())
    assert demo.split_layout(d_model, num_heads).tolist() == [f // (d_model // num_heads) for f in range(d_model)]
    with pytest.raises(ValueError):
        demo.split_layout(7, 2)


@pytest.fixture(scope="module")
def trained():
    return demo.train_relation_model(steps=300, seed=0)


def test_training_is_deterministic_and_restores_threads(trained):
    threads = torch.get_num_threads()
    _, losses = demo.train_relation_model(steps=5, seed=0)
    assert losses == trained[1][:5]
    assert torch.get_num_threads() == threads


def test_three_heads_learn_three_relations(trained):
    model, losses = trained
    assert losses[-1] < 0.05
    assert all(a > 0.95 for a in demo.evaluate(model).values())
    table = demo.head_relation_table(model)
    assert table.shape == (3, len(relations.RELATIONS))
    roles = [r for r, _ in demo.head_specialisation(table)]
    assert sorted(roles) == sorted(relations.RELATIONS)  # each relation has its own head
    assert all(w > 0.9 for _, w in demo.head_specialisation(table))


def test_head_weights_are_distributions(trained):
    model, _ = trained
    weights = demo.head_weights(model, torch.arange(8))
    assert weights.shape == (3, 8, 8)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_figures_draw(trained):
    model, _ = trained
    tokens = torch.arange(8)
    weights = demo.head_weights(model, tokens)
    demo.draw_split(5, 12, 3)
    assert len(demo.draw_heads(weights, tokens)) == 3
    demo.draw_head_query(weights, head=1, query=2, tokens=tokens)
    plt.close("all")


def test_compare_head_counts_trains_every_count_and_seed_like_a_single_run():
    results = demo.compare_head_counts(head_counts=(1, 2), seeds=(0, 1), steps=5, d_model=8)
    assert set(results) == {1, 2} and set(results[2]) == {0, 1}
    assert len(results[2][1]["roles"]) == 2 and len(results[1][0]["roles"]) == 1
    assert set(results[1][0]["accuracy"]) == set(relations.RELATIONS)
    alone, _ = demo.train_relation_model(steps=5, num_heads=2, d_model=8, seed=1)
    assert results[2][1]["accuracy"] == demo.evaluate(alone)
    assert results[2][1]["roles"] == demo.head_specialisation(demo.head_relation_table(alone))
