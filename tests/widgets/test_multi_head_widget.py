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
    alone, losses = demo.train_relation_model(steps=5, num_heads=2, d_model=8, seed=1)
    assert results[2][1]["accuracy"] == demo.evaluate(alone) and results[2][1]["losses"] == losses
    assert results[2][1]["roles"] == demo.head_specialisation(demo.head_relation_table(alone))
    assert results[2][1]["ablation"] == demo.ablate_heads(alone)
    assert [step for step, _ in results[2][1]["curve"]] == [1, 5]  # every 50 steps, and the last


def test_a_learning_curve_leaves_training_unchanged():
    plain, losses = demo.train_relation_model(steps=12, d_model=12, seed=3)
    model, curve_losses, curve = demo.train_relation_model(steps=12, d_model=12, seed=3, eval_every=5)
    assert curve_losses == losses
    assert [step for step, _ in curve] == [1, 6, 11, 12]
    assert curve[-1][1] == demo.evaluate(plain) == demo.evaluate(model)


def test_switching_off_a_head_breaks_its_relation(trained):
    model, _ = trained
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ablation = demo.ablate_heads(model)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the model is untouched
    roles = [r for r, _ in demo.head_specialisation(demo.head_relation_table(model))]
    for head, accuracy in enumerate(ablation):
        assert accuracy[roles[head]] < 0.4  # the relation this head attends to is lost
        assert all(a > 0.85 for r, a in accuracy.items() if r != roles[head])  # the others survive


def test_ablating_a_head_zeroes_its_share_of_the_output():
    model, _ = demo.train_relation_model(steps=2, num_heads=2, d_model=8, seed=0)
    tokens = torch.randint(10, (3, 8))
    with torch.no_grad():
        x = model.token(tokens) + model.position(torch.arange(8))
        attention = model.attention
        _, weights = attention(x, x, x, need_weights=True, average_attn_weights=False)
        v = (x @ attention.in_proj_weight[16:].T + attention.in_proj_bias[16:]).reshape(3, 8, 2, 4).transpose(1, 2)
        heads = weights @ v  # (B, h, T, d_k)
        # with head 0 off, only head 1's slice of W_O (and the bias) remains
        expected = heads[:, 1] @ attention.out_proj.weight[:, 4:].T + attention.out_proj.bias
        pruned = __import__("copy").deepcopy(model)
        pruned.attention.out_proj.weight[:, :4] = 0.0
        got, _ = pruned.attention(x, x, x)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_first_step_reaching():
    curve = [(1, {"a": 0.1, "b": 0.5}), (50, {"a": 0.99, "b": 0.98}), (100, {"a": 1.0, "b": 0.99})]
    assert demo.first_step_reaching(curve, 0.99) == 100
    assert demo.first_step_reaching(curve, 0.98) == 50
    assert demo.first_step_reaching(curve, 1.01) is None


def test_head_count_figure_draws():
    runs = demo.compare_head_counts(head_counts=(1, 2), seeds=(0, 1), steps=3, d_model=8, eval_every=1)
    axes = demo.draw_head_counts(runs)
    assert len(axes) == len(relations.RELATIONS) and len(axes[0].get_lines()) == 3  # two means + chance
    plt.close("all")
