"""The compute behind notebook 10's demos (course_utils.widgets.encoder_decoder)."""
import numpy as np
import pytest
import torch

from course_utils.data import dates
from course_utils.models import seq2seq
from course_utils.models import transformer_seq2seq as ts
from course_utils.widgets import encoder_decoder as demo


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return ts.TransformerSeq2Seq(**demo.MODEL_CONFIG).eval()


def test_attention_view_shapes_and_rows(model):
    view = demo.attention_view(model, "Sunday, 22 November 2026")
    layers, heads = demo.MODEL_CONFIG["num_layers"], demo.MODEL_CONFIG["num_heads"]
    assert view["source"] == list("sunday, 22 november 2026")
    assert view["output"][-1] == "<eos>" or len(view["output"]) == dates.TARGET_LENGTH + 2
    assert view["weights"].shape == (layers, heads, len(view["output"]), len(view["source"]))
    np.testing.assert_allclose(view["weights"].sum(-1), 1.0, atol=1e-5)
    assert view["iso"] == "".join(view["output"][:-1])


def test_attention_view_matches_the_model_translation(model):
    text = "2026/11/22"
    assert demo.attention_view(model, text)["iso"] == ts.greedy_translate(model, [text])[0]


@pytest.mark.parametrize("text", ["22 novembre 2026!", "", "   "])
def test_attention_view_refuses_what_it_cannot_read(model, text):
    with pytest.raises(ValueError):
        demo.attention_view(model, text)


def test_head_map_picks_a_head_or_averages(model):
    view = demo.attention_view(model, "22.11.2026")
    np.testing.assert_array_equal(demo.head_map(view, 1, 2), view["weights"][1, 2])
    np.testing.assert_allclose(demo.head_map(view, 0), view["weights"][0].mean(0))
    np.testing.assert_allclose(demo.head_map(view, 0).sum(-1), 1.0, atol=1e-5)
    with pytest.raises(ValueError):
        demo.head_map(view, 5, 0)
    with pytest.raises(ValueError):
        demo.head_map(view, 0, 9)


def test_bahdanau_alignment_shape():
    torch.manual_seed(0)
    gru = seq2seq.Seq2Seq(attention=True).eval()
    source, output, weights = demo.bahdanau_alignment(gru, "22 November 2026")
    assert source == list("22 november 2026")
    assert weights.shape == (len(output), len(source))
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_train_transformer_uses_the_parts_it_is_given_only_when_they_agree():
    pairs = dates.held_out_set()[:20]

    def wrong(x, memory, W_q, W_k, W_v, src_mask=None):
        scores = (x @ W_q) @ (memory @ W_k).transpose(-2, -1)  # not scaled
        weights = torch.softmax(scores, dim=-1)
        return weights @ (memory @ W_v), weights

    model, history, used = demo.train_transformer(3, eval_pairs=pairs, eval_every=3, cross_attention=wrong,
                                                  d_model=16, num_heads=2, d_ff=32)
    assert used == {"cross_attention": False, "block": False}
    assert history["step"] == [3] and len(history["loss"]) == 3 and 0 <= history["accuracy"][0] <= 1
    assert all(m.attend is None for m in model.modules() if isinstance(m, ts.Attention))


def test_training_repeats_with_the_same_seed():
    a = demo.train_transformer(4, seed=1, d_model=16, num_heads=2, d_ff=32)[1]["loss"]
    b = demo.train_transformer(4, seed=1, d_model=16, num_heads=2, d_ff=32)[1]["loss"]
    assert a == b


def test_side_by_side_trains_each_model_as_it_trains_alone():
    """The student's parts (here the reference's) train in a worker; the weights, histories and
    parts in use come back to the models of this process; the warm-up runs queued behind them
    give what they give alone."""
    from course_utils.reference import encoder_decoder as reference

    pairs = dates.held_out_set()[:20]
    parts = dict(cross_attention=reference.cross_attention, block=reference.DecoderBlock)
    warmup = dict(seeds=(0, 1), steps=4, warmup=2, last=2, d_model=16, num_heads=2, num_layers=1, d_ff=32)
    (model, history, used), (gru, gru_history), warm = demo.train_side_by_side(
        6, 4, seed=2, eval_pairs=pairs, eval_every=3, gru_eval_every=2, warmup_experiment=warmup, **parts)
    warm_alone = demo.warmup_runs(**warmup)
    for name in demo.ARMS:
        np.testing.assert_array_equal(warm[name]["curves"], warm_alone[name]["curves"])
    alone, alone_history, alone_used = demo.train_transformer(6, seed=2, eval_pairs=pairs, eval_every=3, **parts)
    gru_alone, gru_alone_history = demo.train_bahdanau(4, seed=2, eval_pairs=pairs, eval_every=2)
    assert used == alone_used == {"cross_attention": True, "block": True}
    for ours, theirs in ((history, alone_history), (gru_history, gru_alone_history)):
        assert ours["loss"] == theirs["loss"] and ours["accuracy"] == theirs["accuracy"]
        assert ours["step"] == theirs["step"]
    for ours, theirs in ((model, alone), (gru, gru_alone)):
        for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
            assert torch.equal(a, b), name
        assert not ours.training


def test_source_positions_count_from_the_end_of_each_sentence():
    src, mask = dates.pad_sources(["2026/11/22", "1.1.2000", "22 november 2026"])
    positions = ts.source_positions(src, mask)
    for row, length in enumerate(mask.sum(1).tolist()):
        assert positions[row, :length].tolist() == list(range(length - 1, -1, -1))
        assert (positions[row, length:] == 0).all()
    assert ts.source_positions(src[:1, :10], None).tolist() == [list(range(9, -1, -1))]
    # What padding stands after a date changes nothing in its memory.
    torch.manual_seed(0)
    model = ts.TransformerSeq2Seq(**demo.MODEL_CONFIG).eval()
    with torch.no_grad():
        alone = model.encode(*dates.pad_sources(["1.1.2000"]))
        padded = model.encode(src, mask)[1:2, :8]
    torch.testing.assert_close(padded, alone)


def test_reached():
    history = {"step": [10, 20, 30], "seconds": [1.0, 2.0, 3.0], "accuracy": [0.5, 0.99, 1.0]}
    assert demo.reached(history, 0.99) == (20, 2.0)
    assert demo.reached(history, 1.01) == (None, None)


def test_warmup_runs_and_summary():
    runs = demo.warmup_runs(seeds=(0, 1), steps=4, warmup=2, last=2, d_model=16, num_heads=2, num_layers=1, d_ff=32)
    assert [n for n in runs if n not in ("seconds", "seeds")] == list(demo.ARMS) and runs["seeds"] == (0, 1)
    for name in demo.ARMS:
        assert runs[name]["curves"].shape == (2, 4) and runs[name]["loss"].shape == (2,)
        np.testing.assert_allclose(runs[name]["loss"], runs[name]["curves"][:, -2:].mean(1))
    # Without a ramp the first step already has the full learning rate; with one it is a fraction of it,
    # so the two arms of an arrangement start from the same loss and part after the first step.
    for arrangement in ("post-norm", "pre-norm"):
        none, ramp = runs[f"{arrangement}, no warm-up"]["curves"], runs[f"{arrangement}, warm-up"]["curves"]
        np.testing.assert_array_equal(none[:, 0], ramp[:, 0])
        assert not np.array_equal(none[:, 1:], ramp[:, 1:])
    summary = demo.warmup_summary(runs)
    assert set(summary["table"]) == set(demo.ARMS)
    for name, row in summary["table"].items():
        assert row["seeds"] == 2 and 0 <= row["learned"] <= 2 and row["min"] <= row["mean"] <= row["max"]


def _fake(post, post_w, pre, pre_w):
    return {name: {"loss": np.array(loss)} for name, loss in zip(demo.ARMS, (post, post_w, pre, pre_w))}


def test_warmup_summary_table_and_facts():
    summary = demo.warmup_summary(_fake([1.0, 0.9, 0.95], [0.2, 0.3, 0.4], [0.3, 0.4, 0.45], [0.05, 0.08, 0.06]))
    assert summary["table"]["post-norm, warm-up"] == {"mean": pytest.approx(0.3), "min": 0.2, "max": 0.4,
                                                      "learned": 3, "seeds": 3}
    assert summary["table"]["post-norm, no warm-up"]["learned"] == 0
    facts = {name: flag for name, flag in summary.items() if name != "table"}
    assert len(facts) == 5 and all(facts.values()), facts
    post_gain, pre_gain = demo.WARMUP_GAINS
    # Each fact fails when its numbers say otherwise.
    summary = demo.warmup_summary(_fake([1.0, 0.4, 0.95], [0.2, 0.6, 0.3], [0.3, 0.7, 0.2], [0.05, 0.5, 0.06]))
    assert summary["post-norm without a warm-up: no run learns"] is False
    assert summary["post-norm with a warm-up: every run learns"] is False
    assert summary["pre-norm, with or without a warm-up: every run learns"] is False
    # Means closer than the margins: the warm-up "helps" by less than each claimed gain.
    summary = demo.warmup_summary(_fake([0.7, 0.7], [0.7 - post_gain + 0.01] * 2, [0.3, 0.3],
                                        [0.3 - pre_gain + 0.01] * 2))
    assert summary[f"the warm-up lowers post-norm's mean final loss by more than {post_gain}"] is False
    assert summary[f"the warm-up lowers pre-norm's mean final loss too, by more than {pre_gain}"] is False
    assert demo.warmup_summary(_fake([1.0], [0.6], [0.7], [0.55]), threshold=0.65)["table"]["pre-norm, warm-up"]["learned"] == 1


def test_warmup_runs_train_each_model_as_ts_fit_trains_it_alone():
    """The runs of an arm train as one stacked model; each still follows its own ts.fit run."""
    settings = dict(steps=4, warmup=2, d_model=16, num_heads=2, num_layers=1, encoder_layers=1, d_ff=32)
    runs = demo.warmup_runs(seeds=(0, 3), last=2, **settings)
    for name, norm_first, ramp in ((demo.ARMS[1], False, 2), (demo.ARMS[2], True, 0)):
        for row, seed in enumerate((0, 3)):
            torch.manual_seed(seed)
            model = ts.TransformerSeq2Seq(d_model=16, num_heads=2, num_layers=1, encoder_layers=1, d_ff=32,
                                          norm_first=norm_first, positions_from_end=True)
            history = ts.fit(model, 4, batch_size=32, lr=3e-2, warmup=ramp, seed=seed, description=None)
            np.testing.assert_allclose(runs[name]["curves"][row], history["loss"], rtol=1e-4, atol=1e-4)
