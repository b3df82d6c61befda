"""The model, training loop and pure functions behind notebook 09's figures and widget
(course_utils/models/vit_model.py, course_utils/widgets/vision_transformer.py)."""
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from course_utils import training
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
    table, seconds = vit_model.data_fraction_sweep(x_train, y_train, x_test[:50], y_test[:50], fractions=(0.1, 1.0),
                                                   kinds=("MLP", "ViT"), seeds=(0, 1),
                                                   known={("ViT", 1.0, 0): 0.5, ("ViT", 1.0, 1): 0.25},
                                                   max_steps=2, show_progress=False)
    assert set(table) == {"MLP", "ViT"} and table["MLP"].shape == table["ViT"].shape == (2, 2)
    assert table["ViT"][:, 1].tolist() == [0.5, 0.25]
    assert ((0.0 <= table["MLP"]) & (table["MLP"] <= 1.0)).all()
    assert set(seconds) == {("MLP", 0.1, 0), ("MLP", 1.0, 0), ("ViT", 0.1, 0), ("MLP", 0.1, 1), ("MLP", 1.0, 1),
                            ("ViT", 0.1, 1)}


def test_train_many_trains_each_model_as_train_classifier_alone_does(data):
    x, y = data[0][:200], data[1][:200]
    settings = [dict(epochs=2, seed=seed, lr=3e-3) for seed in (0, 1, 2)]
    alone = [vit_model.train_classifier(vit_model.make_model("ViT", seed=s["seed"]), x, y, show_progress=False, **s)
             for s in settings]
    jobs = [(vit_model.make_model("ViT", seed=s["seed"]), x, y, s) for s in settings]
    threads = torch.get_num_threads()
    state = torch.random.get_rng_state()
    together = vit_model.train_many(jobs, workers=2, show_progress=False)
    assert [r["losses"] for r in together] == [r["losses"] for r in alone]
    assert torch.get_num_threads() == threads
    assert torch.equal(torch.random.get_rng_state(), state)  # the global random numbers as they were


@pytest.mark.parametrize("processes", [True, False], ids=["forked workers", "threads"])
def test_train_many_leaves_the_trained_models_in_place(data, monkeypatch, processes):
    """Forked workers (Linux) and threads (elsewhere) give the same results and the same trained
    models, in the parent's model objects, as training them one by one."""
    if processes and not training._can_fork():
        pytest.skip("no fork on this platform")
    monkeypatch.setattr(training, "_can_fork", lambda: processes)
    x, y = data[0][:200], data[1][:200]
    jobs = [(vit_model.make_model(kind, seed=seed), x, y, dict(epochs=1, seed=seed))
            for kind, seed in (("MLP", 0), ("ViT", 1), ("CNN", 2))]
    alone = [vit_model.make_model(kind, seed=seed) for kind, seed in (("MLP", 0), ("ViT", 1), ("CNN", 2))]
    expected = [vit_model.train_classifier(m, x, y, show_progress=False, **job[3]) for m, job in zip(alone, jobs)]
    results = vit_model.train_many(jobs, workers=2, show_progress=False)
    assert [r["losses"] for r in results] == [r["losses"] for r in expected]
    for (model, *_), same in zip(jobs, alone):
        for (name, ours), theirs in zip(model.state_dict().items(), same.state_dict().values()):
            assert torch.equal(ours, theirs), name
        assert not model.training


def test_train_many_drops_a_students_part_that_fails_in_a_worker(data, capsys):
    """A student's function that raises during training is dropped from the parent's model too,
    with the sentence saying so printed in the notebook, whichever way the workers run."""
    x, y = data[0][:128], data[1][:128]
    calls = {"n": 0}

    def flaky_forward(model, images):
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("boom")
        return reference.vit_forward(model, images)

    models = [vit_model.make_model("ViT", seed=s, parts={"vit_forward": flaky_forward}) for s in (0, 1)]
    vit_model.train_many([(m, x, y, dict(epochs=1, seed=s)) for s, m in zip((0, 1), models)], workers=2,
                         show_progress=False)
    assert all(m.parts == {} for m in models)
    assert "raised RuntimeError" in capsys.readouterr().out


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


# --------------------------------------------------------------------------- the student's ViT
# Answers written as a student writes them (module-level functions calling each other by name),
# not the reference's, so that the checks meet what a notebook gives them.

def student_patchify(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


def student_patch_embedding(images, weight, bias, patch_size):
    return student_patchify(images, patch_size) @ weight.T + bias


def student_prepend_class_token(tokens, cls_token):
    return torch.cat([cls_token.expand(tokens.shape[0], -1, -1), tokens], dim=1)


def student_vit_forward(model, images):
    x = student_patch_embedding(images, model.patch_embed.weight, model.patch_embed.bias, model.patch_size)
    x = student_prepend_class_token(x, model.cls_token) + model.pos_embedding
    for block in model.blocks:
        x = block(x)
    return model.head(model.norm(x)[:, 0])


STUDENT = {"patchify": student_patchify, "patch_embedding": student_patch_embedding,
           "prepend_class_token": student_prepend_class_token, "vit_forward": student_vit_forward}


def _stub(*args, **kwargs):
    raise NotImplementedError()


def test_check_parts_accepts_correct_answers_and_says_whose_vit_trains():
    checks = vit_model.check_parts(**STUDENT)
    assert checks == {name: None for name in vit_model.PARTS}
    sentence = vit_model.describe_parts(checks, STUDENT)
    assert sentence.startswith("The ViT below trains your own code: your `vit_forward`")
    # Which of the student's functions the forward pass calls is read from the code, not assumed.
    assert "`patchify`, `patch_embedding` and `prepend_class_token` inside it" in sentence
    inlined = vit_model.describe_parts(checks, dict(STUDENT, vit_forward=reference.vit_forward))
    assert "inside it" not in inlined


@pytest.mark.parametrize("grade_id", ["vision_transformer_patchify", "vision_transformer_patch_embedding",
                                      "vision_transformer_class_token", "vision_transformer_forward"])
def test_every_alternative_is_accepted_and_every_catalogued_mistake_refused(grade_id):
    from course_utils.reference.mistakes import vision_transformer as mistakes
    from tests.exercises.alternatives_vision_transformer import ALTERNATIVES

    exercise = mistakes.EXERCISES[grade_id]
    name = exercise.function_name
    for alternative in ALTERNATIVES[grade_id]:
        assert vit_model.check_parts(**{name: alternative})[name] is None, alternative.__name__
    for mistake in exercise.mistakes:
        assert vit_model.check_parts(**{name: mistake.compute})[name] is not None, mistake.name


def test_stubs_give_the_library_vit_and_say_why():
    stubs = {name: _stub for name in vit_model.PARTS}
    model, checks = vit_model.assemble(seed=3, **stubs)
    assert set(checks.values()) == {"raises NotImplementedError"} and model.parts == {}
    assert "library's TinyViT" in vit_model.describe_parts(checks, stubs)
    assert "written and run yet" in vit_model.describe_parts(vit_model.check_parts())  # nothing defined
    library = vit_model.make_model("ViT", seed=3)
    images = torch.rand(2, 1, 16, 16)
    torch.testing.assert_close(model(images), library(images))


def test_checks_see_gradients_rules_and_side_effects():
    def detached_class_token(tokens, cls_token):  # right numbers, a class token that never learns
        return torch.cat([cls_token.detach().expand(tokens.shape[0], -1, -1), tokens], dim=1)

    def forward_through_the_library(model, images):
        return model(images)

    def unfolding(images, patch_size):
        return torch.nn.functional.unfold(images, patch_size, stride=patch_size).transpose(1, 2)

    def in_place(tokens, cls_token):
        tokens.mul_(1.0)
        tokens.add_(1.0)
        return torch.cat([cls_token.expand(tokens.shape[0], -1, -1), tokens - 1.0], dim=1)

    checks = vit_model.check_parts(prepend_class_token=detached_class_token, vit_forward=forward_through_the_library,
                                   patchify=unfolding)
    assert checks["prepend_class_token"] == "gives the right numbers but other gradients than the library's"
    assert checks["vit_forward"] == checks["patchify"] == "uses a function its exercise forbids"
    assert vit_model.check_parts(prepend_class_token=in_place)["prepend_class_token"] == \
        "changes its input (or the model's weights) in place"
    odd = vit_model.check_parts(patchify=lambda images, p: images.numpy(),
                                prepend_class_token=lambda tokens, cls: tokens)
    assert odd["patchify"] == "returns a ndarray, not a tensor"
    assert odd["prepend_class_token"] == "returns shape (5, 16, 32) where the library's is (5, 17, 32)"


def test_check_parts_leaves_the_global_random_numbers_alone():
    state = torch.random.get_rng_state()
    vit_model.check_parts(**STUDENT)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_the_assembled_vit_runs_the_students_code_and_trains_as_the_library_does(data):
    calls = []

    def counted_forward(model, images):
        calls.append(len(images))
        return student_vit_forward(model, images)

    parts = dict(STUDENT, vit_forward=counted_forward)
    model, checks = vit_model.assemble(seed=1, **parts)
    assert set(model.parts) == set(vit_model.PARTS)
    calls.clear()
    x, y = data[0][:200], data[1][:200]
    ours = vit_model.train_classifier(model, x, y, epochs=2, seed=1, show_progress=False)["losses"]
    assert len(calls) == len(ours) == 8  # every training step went through the student's forward pass
    theirs = vit_model.train_classifier(vit_model.make_model("ViT", seed=1), x, y, epochs=2, seed=1,
                                        show_progress=False)["losses"]
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
    # The attention maps read from the same model, through the student's embedding and class token.
    assert vit_model.attention_maps(model, x[:2]).shape == (2, 2, 4, 17, 17)


def test_a_mix_runs_the_library_forward_pass_with_the_students_parts(data):
    calls = []

    def counted_patchify(images, patch_size):
        calls.append(patch_size)
        return student_patchify(images, patch_size)

    parts = {"patchify": counted_patchify, "patch_embedding": _stub, "prepend_class_token": student_prepend_class_token,
             "vit_forward": _stub}
    model, checks = vit_model.assemble(seed=2, **parts)
    assert set(model.parts) == {"patchify", "prepend_class_token"}
    sentence = vit_model.describe_parts(checks, parts)
    assert sentence.startswith("The ViT below runs the library's forward pass with your `patchify` and "
                               "`prepend_class_token` in it") and "`patch_embedding` raises NotImplementedError" in sentence
    calls.clear()
    images = data[2][:4]
    with torch.no_grad():
        torch.testing.assert_close(model(images), vit_model.make_model("ViT", seed=2)(images), atol=1e-5, rtol=1e-4)
    assert calls == [4]


def test_a_function_that_breaks_during_training_never_breaks_the_notebook(data, capsys):
    def fragile_forward(model, images):
        if len(images) > 5:  # passes the checks (5 images and 1), fails on a training batch
            raise RuntimeError("boom")
        return student_vit_forward(model, images)

    model, checks = vit_model.assemble(seed=0, **dict(STUDENT, vit_forward=fragile_forward))
    assert checks["vit_forward"] is None
    run = vit_model.train_classifier(model, data[0][:128], data[1][:128], epochs=1, show_progress=False)
    assert run["steps"] == 2 and model.parts == {}
    assert "raised RuntimeError" in capsys.readouterr().out


def test_the_sweep_trains_the_students_vit(data):
    calls = []

    def counted_forward(model, images):
        calls.append(1)
        return student_vit_forward(model, images)

    x_train, y_train, x_test, y_test = data
    table, seconds = vit_model.data_fraction_sweep(
        x_train, y_train, x_test[:20], y_test[:20], fractions=(0.1,), kinds=("ViT",), max_steps=2,
        show_progress=False, vit_parts={"vit_forward": counted_forward})
    assert table["ViT"].shape == (1, 1) and set(seconds) == {("ViT", 0.1, 0)} and len(calls) >= 2
