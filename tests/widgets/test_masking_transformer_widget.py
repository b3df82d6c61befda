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
from course_utils.models.tiny_lm import CharLM, MaskedSelfAttention
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
    # the top block of a 3-deep stack is the last of gradient_norms_by_layer's rows
    direct = demo.gradient_norms_by_layer(False, num_layers=3, seed=1, d_model=16, d_ff=32, T=8, batch_size=4)
    assert a["post"][1, 1] == direct["grad"][-1]

