"""The pure functions behind notebook 08's demos and widget (course_utils/widgets/masking_transformer.py),
its text (course_utils/data/text.py) and its student-safe model parts (course_utils/models/tiny_lm.py)."""
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from torch import nn

from course_utils.data.text import Vocabulary, make_text
from course_utils.reference import MultiHeadAttention, causal_mask, padding_mask
from course_utils.reference.masking_transformer import TransformerBlock, masked_softmax
from course_utils.models.tiny_lm import CharLM, MaskedSelfAttention, choose_parts
from course_utils.widgets import masking_transformer as demo

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def run():
    return demo.train_char_lm(steps=30, context=16, batch_size=8, d_model=16, num_heads=2, d_ff=32, seed=0)


def test_text_is_seeded_and_small():
    assert make_text(50, seed=3) == make_text(50, seed=3)
    assert make_text(50, seed=3) != make_text(50, seed=4)
    vocab = Vocabulary(make_text())
    assert len(vocab) == 28 and vocab.chars[0] == " "
    assert vocab.decode(vocab.encode("the cat.")) == "the cat."
    assert vocab.clean("The CAT!") == "the cat"
    with pytest.raises(ValueError, match="not in the vocabulary"):
        vocab.encode("Q")


def test_masked_self_attention_matches_the_reference():
    torch.manual_seed(0)
    mine, ref = MaskedSelfAttention(8, 2), MultiHeadAttention(8, 2)
    ref.load_state_dict(mine.state_dict())
    x = torch.randn(3, 5, 8)
    full = padding_mask(torch.tensor([5, 3, 0]), 5)  # the last sequence is all padding: zero attention
    for mask in (None, causal_mask(5), full, causal_mask(5) & full):
        expected = ref(x, x, x, mask)[0]
        torch.testing.assert_close(mine(x, mask), expected, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="boolean"):
        mine(x, causal_mask(5).float())


def test_reference_block_matches_torch_and_masked_softmax_has_no_nan():
    torch.manual_seed(0)
    for norm_first in (True, False):
        ref = TransformerBlock(8, 2, 16, norm_first=norm_first)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first)
        with torch.no_grad():
            for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
                getattr(ref.attn, name).weight.copy_(layer.self_attn.in_proj_weight[8 * i:8 * (i + 1)])
                getattr(ref.attn, name).bias.copy_(layer.self_attn.in_proj_bias[8 * i:8 * (i + 1)])
            for to, frm in [(ref.attn.out_proj, layer.self_attn.out_proj), (ref.norm1, layer.norm1),
                            (ref.norm2, layer.norm2), (ref.mlp[0], layer.linear1), (ref.mlp[2], layer.linear2)]:
                to.load_state_dict(frm.state_dict())
        layer.train()
        x = torch.randn(2, 5, 8)
        torch.testing.assert_close(ref(x, causal_mask(5)), layer(x, src_mask=~causal_mask(5)), atol=1e-5, rtol=1e-4)
    scores = torch.randn(2, 3, 4, requires_grad=True)
    mask = torch.rand(2, 3, 4) < 0.5
    mask[0, 1] = False
    weights = masked_softmax(scores, mask)
    assert torch.equal(weights[0, 1], torch.zeros(4)) and not weights.isnan().any()
    weights.sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_training_is_seeded_and_learns(run):
    again = demo.train_char_lm(steps=30, context=16, batch_size=8, d_model=16, num_heads=2, d_ff=32, seed=0)
    assert run.losses == again.losses
    assert run.losses[-1] < run.losses[0] - 0.5
    assert 0 < demo.held_out_loss(run) < np.log(28) + 0.5


def test_the_model_cannot_see_the_future(run):
    before, after = demo.future_leak(run, "the small dog ran to", t=6)
    assert before == 0.0 and after > 0.0
    with pytest.raises(ValueError, match="context"):
        run.model(torch.zeros(1, 17, dtype=torch.long))


def test_generation_is_seeded_and_temperature_behaves(run):
    a = demo.generate(run, "The cat", n_chars=20, temperature=1.0, seed=1)
    assert a == demo.generate(run, "the cat", n_chars=20, temperature=1.0, seed=1)
    assert len(a) == 20 and set(a) <= set(run.vocab.chars)
    assert demo.generate(run, "the", 10, temperature=0.0, seed=1) == demo.generate(run, "the", 10, temperature=0.0, seed=2)
    assert demo.generate(run, "", 5, temperature=0.5) != ""  # an empty prompt starts from a space
    with pytest.raises(ValueError):
        demo.generate(run, "the", 5, temperature=-1)
    cold = demo.next_char_probabilities(run, "the ca", 0.0)
    warm = demo.next_char_probabilities(run, "the ca", 1.0)
    hot = demo.next_char_probabilities(run, "the ca", 5.0)
    assert cold.max() == 1.0 and np.isclose(warm.sum(), 1.0, atol=1e-5)
    assert hot.max() < warm.max() <= 1.0


def test_gradient_norms_by_layer():
    pre = demo.gradient_norms_by_layer(True, num_layers=4, d_model=16, d_ff=32, T=8, batch_size=4)
    post = demo.gradient_norms_by_layer(False, num_layers=4, d_model=16, d_ff=32, T=8, batch_size=4)
    assert pre["grad"].shape == (4,) and (pre["grad"] > 0).all() and (post["grad"] > 0).all()
    assert np.allclose(post["stream"][1:], 1.0, atol=0.02)  # post-norm renormalises every sum
    assert pre["stream"][-1] > pre["stream"][0]  # pre-norm's stream grows
    again = demo.gradient_norms_by_layer(True, num_layers=4, d_model=16, d_ff=32, T=8, batch_size=4)
    assert np.array_equal(pre["grad"], again["grad"])


def test_figures_draw(run):
    pre = demo.gradient_norms_by_layer(True, num_layers=3, d_model=16, d_ff=32, T=8, batch_size=4)
    axes = demo.draw_gradient_norms(pre, pre)
    assert axes[0].get_title() and axes[0].get_xlabel() and axes[1].get_ylabel()
    axes = demo.draw_masks([causal_mask(4)], ["causal"])
    assert axes[0].get_title() == "causal"
    ax = demo.draw_next_char(run, demo.next_char_probabilities(run, "the", 1.0))
    assert len(ax.patches) == 8
    ax = demo.draw_losses(run.losses, 2.0)
    assert ax.get_ylabel()
    plt.close("all")


def test_char_lm_shapes():
    model = CharLM(28, context=8, d_model=16, num_heads=2, num_layers=1, d_ff=32)
    assert model(torch.zeros(2, 5, dtype=torch.long)).shape == (2, 5, 28)


def test_top_layer_gradients_by_depth_are_repeatable_and_shaped():
    a = demo.top_layer_gradients(depths=(2, 3), seeds=(0, 1), d_model=16, d_ff=32, T=8, batch_size=4)
    b = demo.top_layer_gradients(depths=(2, 3), seeds=(0, 1), d_model=16, d_ff=32, T=8, batch_size=4)
    assert a["pre"].shape == a["post"].shape == (2, 2)
    assert np.array_equal(a["pre"], b["pre"]) and np.array_equal(a["post"], b["post"])
    # the top block of a 3-deep stack is the last of gradient_norms_by_layer's rows, to the last bit, though
    # one pass through the deepest stack serves every depth; in any order of depths, on one worker or two
    for norm_first, name in ((False, "post"), (True, "pre")):
        for depth, row in ((3, 1), (2, 0)):
            direct = demo.gradient_norms_by_layer(norm_first, num_layers=depth, seed=1, d_model=16, d_ff=32, T=8,
                                                  batch_size=4)
            assert a[name][row, 1] == direct["grad"][-1]
    c = demo.top_layer_gradients(depths=(3, 2), seeds=(1,), workers=1, d_model=16, d_ff=32, T=8, batch_size=4)
    assert np.array_equal(c["pre"][::-1, 0], a["pre"][:, 1]) and np.array_equal(c["post"][::-1, 0], a["post"][:, 1])



# --------------------------------------------------------------------------- the model from the student's parts
# The student's parts are stood in for by the reference (instructor side: this test file is not shipped) and by
# self-contained wrong answers; `choose_parts` must take the right ones, refuse the wrong ones with a reason, and
# never raise.

def _block_on_masked_self_attention():
    """The reference block, with the provided MaskedSelfAttention inside (as the exercise asks)."""

    class Block(TransformerBlock):
        def __init__(self, d_model, num_heads, d_ff, norm_first=True):
            super().__init__(d_model, num_heads, d_ff, norm_first)
            self.attn = MaskedSelfAttention(d_model, num_heads)

        def _attend(self, x, mask):
            return self.attn(x, mask)

    return Block


def _not_written(*args, **kwargs):
    raise NotImplementedError()


class _NotWrittenBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__()
        raise NotImplementedError()


class _AlwaysPreNorm(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.attn = MaskedSelfAttention(d_model, num_heads)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x, mask=None):
        x = x + self.attn(self.norm1(x), mask)
        return x + self.mlp(self.norm2(x))


YOURS = dict(causal_mask=causal_mask, masked_softmax=masked_softmax, block=_block_on_masked_self_attention())
SMALL = dict(steps=30, context=16, batch_size=8, d_model=16, num_heads=2, d_ff=32, lr=5e-3)


def test_correct_parts_are_all_used_and_said_so():
    parts = choose_parts(**YOURS)
    assert parts.yours == ["TransformerBlock", "masked_softmax", "causal_mask"] and parts.reasons == {}
    assert parts.sentence.startswith(
        "This model trains with YOUR TransformerBlock, YOUR masked_softmax and YOUR causal_mask")
    model = CharLM(28, context=8, d_model=16, num_heads=2, num_layers=2, d_ff=32, parts=parts)
    assert all(isinstance(block, YOURS["block"]) and block.attn.masked_softmax is masked_softmax
               for block in model.blocks)


@pytest.mark.parametrize("name, wrong, reason", [
    ("causal_mask", lambda T: torch.ones(T, T, dtype=torch.bool).triu(), "not True exactly on and below"),
    ("causal_mask", lambda T: torch.ones(T, T).tril(), "not a boolean tensor"),
    ("masked_softmax", lambda s, m: s.masked_fill(~m, -1e9).exp() / s.masked_fill(~m, -1e9).exp().sum(-1, keepdim=True),
     "overflow"),
    ("masked_softmax", lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), -1).nan_to_num(), "torch.softmax"),
    ("block", _AlwaysPreNorm, "post-norm output"),
    ("block", _NotWrittenBlock, "not written yet"),
    ("masked_softmax", _not_written, "not written yet"),
    ("causal_mask", None, "is not defined"),
])
def test_a_part_that_fails_its_checks_is_replaced_with_a_reason(name, wrong, reason):
    parts = choose_parts(**{**YOURS, name: wrong})
    label = "TransformerBlock" if name == "block" else name
    assert label not in parts.yours and reason in parts.reasons[label]
    assert reason in parts.sentence and "YOUR " + label not in parts.sentence


def test_softmax_only_inside_the_students_block_and_only_in_the_provided_attention():
    parts = choose_parts(causal_mask, masked_softmax, _NotWrittenBlock)
    assert parts.yours == ["causal_mask"] and "only your block can call it" in parts.sentence
    parts = choose_parts(causal_mask, masked_softmax, TransformerBlock)  # its attn is not MaskedSelfAttention
    assert parts.yours == ["TransformerBlock", "causal_mask"]
    assert "MaskedSelfAttention" in parts.reasons["masked_softmax"]


def test_the_students_model_starts_where_pytorchs_does_and_trains_the_same():
    torch.manual_seed(3)
    library = CharLM(28, context=8, d_model=16, num_heads=2, num_layers=2, d_ff=32)
    torch.manual_seed(3)
    mine = CharLM(28, context=8, d_model=16, num_heads=2, num_layers=2, d_ff=32, parts=choose_parts(**YOURS))
    tokens = torch.randint(0, 28, (3, 8))
    torch.testing.assert_close(mine(tokens), library(tokens), atol=1e-5, rtol=1e-4)
    yours = demo.train_char_lm(seed=1, parts=choose_parts(**YOURS), **SMALL)
    pytorchs = demo.train_char_lm(seed=1, **SMALL)
    assert yours.parts.yours and not pytorchs.parts.yours
    assert abs(demo.held_out_loss(yours) - demo.held_out_loss(pytorchs)) < 0.02
    before, after = demo.future_leak(yours, "the small dog ran to", t=6)
    assert before == 0.0 and after > 0.0


@pytest.mark.parametrize("yours", [True, False], ids=["the student's parts", "PyTorch's"])
def test_train_many_gives_each_seed_the_run_it_gives_alone(yours):
    parts = choose_parts(**YOURS) if yours else None
    together = demo.train_many((1, 2), parts=parts, **SMALL)
    for seed, run in zip((1, 2), together):
        alone = demo.train_char_lm(seed=seed, parts=parts, **SMALL)
        assert run.losses == alone.losses and bool(run.parts.yours) == yours
        assert demo.held_out_loss(run) == demo.held_out_loss(alone)


def test_train_pairs_gives_each_seed_and_side_the_run_it_gives_alone():
    parts = choose_parts(**YOURS)
    given = {1: demo.train_char_lm(seed=1, parts=parts, **SMALL)}
    yours, library = demo.train_pairs((1, 2), parts, yours=given, workers=3, **SMALL)
    assert list(yours) == list(library) == [1, 2] and yours[1] is given[1]
    for seed in (1, 2):
        assert yours[seed].parts.yours and not library[seed].parts.yours
        assert yours[seed].losses == demo.train_char_lm(seed=seed, parts=parts, **SMALL).losses
        assert library[seed].losses == demo.train_char_lm(seed=seed, **SMALL).losses
    again, same = demo.train_pairs((2, 1), parts, yours=yours, library=library, **SMALL)  # nothing left to train
    assert list(again) == [2, 1] and all(again[s] is yours[s] and same[s] is library[s] for s in (1, 2))


def test_code_that_fails_in_training_falls_back_to_pytorch_with_a_reason():
    calls = []

    def breaks_later(scores, mask):  # passes the checks, then gives nan once the model trains (T = 16)
        calls.append(1)
        filled = scores.masked_fill(~mask, float("-inf"))
        top = filled.amax(dim=-1, keepdim=True)
        e = torch.exp(filled - torch.where(torch.isfinite(top), top, 0.0))
        total = e.sum(dim=-1, keepdim=True)
        weights = e / torch.where(total > 0, total, 1.0)
        return weights * float("nan") if scores.shape[-1] == 16 else weights

    parts = choose_parts(causal_mask, breaks_later, YOURS["block"])
    assert "masked_softmax" in parts.yours
    run = demo.train_char_lm(seed=0, parts=parts, **SMALL)
    assert calls and run.parts.yours == [] and "failed in training" in run.parts.sentence
    assert np.isfinite(run.losses).all()


def test_attention_maps_are_read_from_either_model(run):
    yours = demo.train_char_lm(seed=0, parts=choose_parts(**YOURS), **SMALL)
    for trained in (run, yours):
        maps = demo.attention_maps(trained, "The cat sat on the mat, said Q.")
        chars, weights = maps["chars"], maps["weights"]
        assert "".join(chars) == trained.vocab.clean("The cat sat on the mat, said Q.")[-16:]
        assert weights.shape == (2, 2, len(chars), len(chars))
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert np.all(np.triu(weights, k=1) == 0)  # nothing right of the diagonal: the causal mask
        again = demo.attention_maps(trained, "".join(chars))["weights"]
        np.testing.assert_array_equal(weights, again)  # the cleaned text gives the same maps


def test_attention_maps_equal_pytorchs_own_weights(run):
    """The weights read through the hooks are the ones nn.MultiheadAttention itself returns."""
    ids = torch.tensor(run.vocab.encode("the cat sat on a"))[None]
    maps = demo.attention_maps(run, "the cat sat on a")["weights"]
    layer = run.model.blocks[0]
    x = run.model.token(ids) + run.model.position(torch.arange(ids.shape[1]))
    h = layer.norm1(x)
    T = ids.shape[1]
    blocked = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    with torch.no_grad():
        _, expected = layer.self_attn(h, h, h, attn_mask=blocked, need_weights=True, average_attn_weights=False)
    np.testing.assert_allclose(maps[0], expected[0].numpy(), atol=1e-5)


def test_head_roles_measure_what_they_say():
    """Weights that look only at the previous character (query 0, which has none, at itself) measure
    previous 1 (over queries 1..T-1), itself 1/T, distance (T-1)/T; an even spread gives the means
    of 1/(i+1), 1/(i+1) over i >= 1, and i/2."""
    run = demo.train_char_lm(steps=1, context=8, batch_size=4, d_model=8, num_heads=1, num_layers=1, d_ff=8, seed=0)
    T = 8
    target = torch.zeros(T, T)
    target[0, 0] = 1.0
    target[torch.arange(1, T), torch.arange(T - 1)] = 1.0
    roles = demo._roles(target, max_offset=3)
    assert float(roles["previous"]) == 1.0 and float(roles["itself"]) == 1.0 / T
    assert float(roles["distance"]) == (T - 1) / T
    even = demo.head_roles(run)["uniform"]
    assert np.isclose(even["itself"], np.mean(1.0 / np.arange(1, T + 1)))
    assert np.isclose(even["previous"], np.mean(1.0 / np.arange(2, T + 1)))
    assert np.isclose(even["distance"], np.mean(np.arange(T) / 2))
    measured = demo.head_roles(run, n_windows=8)
    assert measured["previous"].shape == (1, 1) and measured["by_offset"].shape == (1, 1, 13)
    assert np.array_equal(measured["previous"], demo.head_roles(run, n_windows=8)["previous"])  # seeded


def test_next_char_entropy_rises_with_temperature(run):
    bits = demo.next_char_entropy(run, (0.0, 0.5, 1.0, 5.0))
    assert bits[0] == 0.0 and np.all(np.diff(bits) > 0) and bits[-1] < np.log2(28) + 1e-9
    with pytest.raises(ValueError):
        demo.next_char_entropy(run, (-1.0,))


def test_attention_figures_draw(run):
    roles = demo.head_roles(run, n_windows=4)
    axes = demo.draw_head_offsets(roles)
    assert len(axes) == 2 and axes[0].get_ylabel() and axes[1].get_title() == "block 2"
    ax = demo.draw_attention(demo.attention_maps(run, "the cat"), 1, 0)
    assert ax.get_title() == "block 2, head 1" and ax.get_xlabel()
    plt.close("all")
