"""The model, training loop and pure functions behind notebook 09's figures and widget
(course_utils/models/vit_model.py, course_utils/widgets/vision_transformer.py)."""
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from course_utils.models import vit_model
from course_utils.data import digits
from course_utils.reference import vision_transformer as reference
from course_utils.widgets import vision_transformer as demo

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def data():
    return digits.load_digits(upsample=2)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    vit = vit_model.TinyViT()
    with torch.no_grad():
        vit.pos_embedding.normal_()
        vit.cls_token.normal_()
    return vit.eval()


def test_run_vit_is_the_vit_of_the_notebook(model, data):
    """The conv-based forward pass equals the reference built from patchify and a matmul."""
    images = data[2][:8]
    with torch.no_grad():
        torch.testing.assert_close(model(images), reference.vit_forward(model, images), atol=1e-5, rtol=1e-4)


def test_prenorm_block_is_pre_norm():
    torch.manual_seed(0)
    block = vit_model.PreNormBlock(8, 2).eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        h = block.norm1(x)
        attended, _ = block.attention(h, h, h)
        y = x + attended
        expected = y + block.mlp(block.norm2(y))
        out, weights = block(x, need_weights=True)
    torch.testing.assert_close(block(x), expected)
    torch.testing.assert_close(out, expected)
    assert weights.shape == (2, 2, 5, 5)


def test_class_token_attention_and_rollout(model, data):
    images = data[2][:3]
    maps = demo.class_token_attention(model, images)
    assert maps.shape == (3, 2, 4, 4, 4)
    full = vit_model.attention_maps(model, images)
    assert full.shape == (3, 2, 4, 17, 17)
    torch.testing.assert_close(full.sum(-1), torch.ones(3, 2, 4, 17))
    torch.testing.assert_close(maps.flatten(-2), full[:, :, :, 0, 1:])
    assert torch.all(maps.flatten(-2).sum(-1) <= 1 + 1e-6)
    rollout = demo.attention_rollout(model, images)
    assert rollout.shape == (3, 4, 4)
    torch.testing.assert_close(rollout.flatten(1).sum(-1), torch.ones(3))
    assert torch.all(rollout >= 0)


def test_rollout_of_uniform_attention_is_uniform(model, data, monkeypatch):
    T = model.num_patches + 1
    monkeypatch.setattr(vit_model, "attention_maps",
                        lambda m, x: torch.full((x.shape[0], 2, 4, T, T), 1.0 / T))
    rollout = demo.attention_rollout(model, data[2][:2])
    torch.testing.assert_close(rollout, torch.full((2, 4, 4), 1.0 / 16))


def test_confusion_matrix():
    counts = demo.confusion_matrix([0, 1, 1, 2, 2, 2], [0, 1, 2, 2, 2, 0], num_classes=3)
    assert counts.tolist() == [[1, 0, 0], [0, 1, 1], [1, 0, 2]]
    assert counts.sum() == 6


def test_training_is_deterministic_and_restores_threads(data):
    x, y = data[0][:256], data[1][:256]
    threads = torch.get_num_threads()
    runs = []
    for _ in range(2):
        m = vit_model.make_model("ViT", seed=1)
        runs.append(vit_model.train_classifier(m, x, y, epochs=1, seed=1, show_progress=False)["losses"])
    assert runs[0] == runs[1] and len(runs[0]) == 4
    assert torch.get_num_threads() == threads
    assert vit_model.train_classifier(vit_model.make_model("MLP"), x, y, epochs=5, max_steps=3,
                                      show_progress=False)["steps"] == 3


def test_data_fraction_sweep_shape_and_known(data):
    x_train, y_train, x_test, y_test = data
    out = vit_model.data_fraction_sweep(x_train, y_train, x_test[:50], y_test[:50], fractions=(0.1, 1.0),
                                        kinds=("MLP", "ViT"), known={("ViT", 1.0): 0.5}, max_steps=2,
                                        show_progress=False)
    assert set(out) == {"MLP", "ViT"} and len(out["MLP"]) == 2 and out["ViT"][1] == 0.5
    assert all(0.0 <= a <= 1.0 for a in out["MLP"] + out["ViT"])


def test_figures_draw(model, data):
    image, label = data[2][5], data[3][5]
    for fig in (demo.draw_patches(image, 4),
                demo.draw_cls_attention(image, demo.class_token_attention(model, image[None])[0], 3, int(label)),
                demo.draw_example(model, image, label, block="rollout"),
                demo.draw_example(model, image, label, block=1, head=2)):
        assert fig.axes
        plt.close(fig)
    ax = demo.draw_confusion(np.eye(10, dtype=int))
    ax2 = demo.draw_fraction_sweep((0.1, 1.0), {"ViT": [0.8, 0.99], "CNN": [0.9, 0.99]}, train_size=1437)
    assert ax.get_title() and ax2.get_xlabel()
    # One row per seed: the line is the mean, and every seed's point is drawn.
    ax3 = demo.draw_fraction_sweep((0.1, 1.0), {"ViT": [[0.8, 0.99], [0.7, 0.97]]}, train_size=1437)
    (line,) = ax3.get_lines()
    assert np.allclose(line.get_ydata(), [75.0, 98.0]) and len(ax3.collections) == 2
    plt.close("all")
