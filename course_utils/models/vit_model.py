"""A tiny Vision Transformer and two baselines for notebook 09, with a seeded training loop.

Student-safe, shipped with the course: nothing here is an answer the notebook's exercises could
call. The exercises (patchify, the patch embedding, prepending the class token, the forward pass)
are built by the student from matrix products; this module computes the same things its own way
(the patch embedding as a strided convolution, see notebook 09 for why that is the same thing),
and the forward pass lives in one function, `run_vit`, which the forward-pass exercise may not
call (its tests forbid it, and calling `model(images)` goes through it). Every library route to
a ViT's logits goes through `run_vit`, so those tests can tell a student's own forward pass from
a call into this module.

The ViT the notebook trains is **assembled from the student's answers** (`assemble`): each of
the four functions is used when it agrees with this module's own computation on the notebook's
shapes, values and gradients alike, under the rules of its exercise (`check_parts`); a function
that is missing, unfinished, wrong or breaks a rule is replaced by the library's version. With
the student's `vit_forward` the model runs it as its forward pass; otherwise `run_vit` runs with
whichever of the student's patchify, patch embedding and class token passed.

`PreNormBlock` is the pre-norm transformer block of notebook 08, written with
`torch.nn.MultiheadAttention` so that this notebook does not depend on your answers there.

Training runs on one CPU thread (restored afterwards): for models this small one thread is as
fast as two, and it makes every number repeat exactly from run to run and machine to machine.
"""
import math
import threading
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course_utils import grading, optim
from course_utils.data import digits as digit_data
from course_utils.training import in_parallel, one_thread, progress

__all__ = [
    "PreNormBlock", "TinyViT", "run_vit", "attention_maps", "MLP", "SmallCNN", "make_model",
    "train_classifier", "train_many", "predict", "accuracy", "data_fraction_sweep", "PARTS", "check_parts",
    "assemble", "describe_parts",
]


class PreNormBlock(nn.Module):
    """The pre-norm transformer block of notebook 08:
    x = x + Attention(LayerNorm(x)); x = x + MLP(LayerNorm(x))."""

    def __init__(self, d_model, num_heads, mlp_ratio=2):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attention = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, mlp_ratio * d_model), nn.GELU(),
                                 nn.Linear(mlp_ratio * d_model, d_model))

    def forward(self, x, need_weights=False):
        """Shape of x: (batch_size, T, d_model) -> the same shape; with need_weights=True also
        the attention weights of every head, (batch_size, num_heads, T, T).

        The attention is `self.attention`'s own computation (its weights, the same numbers up to
        float32 round-off) written out: for 17 tokens of 8 numbers per head, the two products and
        a softmax cost a quarter less than nn.MultiheadAttention's general path, which trains the
        notebook's models a quarter faster."""
        attention = self.attention
        h = self.norm1(x)
        B, T, d_model = h.shape
        heads = attention.num_heads
        qkv = F.linear(h, attention.in_proj_weight, attention.in_proj_bias)      # (B, T, 3 d_model)
        q, k, v = qkv.view(B, T, 3, heads, d_model // heads).permute(2, 0, 3, 1, 4)  # each (B, H, T, d_k)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_model // heads), dim=-1)
        attended = (weights @ v).transpose(1, 2).reshape(B, T, d_model)
        x = x + attention.out_proj(attended)
        x = x + self.mlp(self.norm2(x))
        return (x, weights) if need_weights else x


class TinyViT(nn.Module):
    """A Vision Transformer small enough to train on a CPU in seconds.

    Parts (the names the notebook uses):
    patch_embed    nn.Linear(C * P * P, d_model): one flattened patch -> one token
    cls_token      (1, 1, d_model) learned class token, prepended to the patch tokens
    pos_embedding  (1, N + 1, d_model) learned position embeddings, slot 0 for the class token
    blocks         `depth` pre-norm transformer blocks
    norm           the final LayerNorm
    head           nn.Linear(d_model, num_classes), applied to the class token

    parts       the student's functions this model runs instead of the library's, by name
                   (see `assemble`); empty for the library's own ViT
    """

    def __init__(self, image_size=16, patch_size=4, channels=1, d_model=32, depth=2, num_heads=4,
                 mlp_ratio=2, num_classes=10, parts=None):
        super().__init__()
        self.parts = dict(parts or {})
        if image_size % patch_size:
            raise ValueError(f"image_size {image_size} is not divisible by patch_size {patch_size}")
        self.image_size, self.patch_size, self.channels = image_size, patch_size, channels
        self.num_patches = (image_size // patch_size) ** 2
        self.patch_embed = nn.Linear(channels * patch_size * patch_size, d_model)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, d_model))
        self.pos_embedding = nn.Parameter(0.02 * torch.randn(1, self.num_patches + 1, d_model))
        self.blocks = nn.ModuleList(PreNormBlock(d_model, num_heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    @property
    def grid(self):
        """Patches per side: the N patches form a grid x grid square, row-major."""
        return self.image_size // self.patch_size

    def forward(self, images):
        """Shape of images: (batch_size, C, H, W). Returns logits (batch_size, num_classes)."""
        if not self.parts:
            return run_vit(self, images)
        try:
            return self.parts["vit_forward"](self, images) if "vit_forward" in self.parts else run_vit(self, images)
        except Exception as error:  # noqa: BLE001 - checked before training; never break the notebook
            self.parts = {}
            print(f"Your code in this model's forward pass raised {type(error).__name__} on images of shape "
                  f"{tuple(images.shape)}; from here on this model runs the library's own forward pass.")
            return run_vit(self, images)


def run_vit(model, images, need_weights=False):
    """The forward pass of a TinyViT; with need_weights=True also a list with the attention
    weights of every block, each (batch_size, num_heads, N + 1, N + 1), token 0 = class token."""
    d_model = model.patch_embed.out_features
    P, C = model.patch_size, model.channels
    weight, bias = model.patch_embed.weight, model.patch_embed.bias
    parts = getattr(model, "parts", {})  # the student's functions that passed `check_parts`
    if "patch_embedding" in parts:
        tokens = parts["patch_embedding"](images, weight, bias, P)
    elif "patchify" in parts:
        tokens = parts["patchify"](images, P) @ weight.T + bias
    else:
        # A linear map of each P x P patch is a convolution with a P x P kernel and stride P.
        kernel = weight.reshape(d_model, C, P, P)
        tokens = F.conv2d(images, kernel, bias, stride=P).flatten(2).transpose(1, 2)
    if "prepend_class_token" in parts:
        x = parts["prepend_class_token"](tokens, model.cls_token)
    else:
        x = torch.cat([model.cls_token.expand(images.shape[0], -1, -1), tokens], dim=1)
    x = x + model.pos_embedding
    maps = []
    for block in model.blocks:
        if need_weights:
            x, weights = block(x, need_weights=True)
            maps.append(weights)
        else:
            x = block(x)
    logits = model.head(model.norm(x)[:, 0])
    return (logits, maps) if need_weights else logits


@torch.no_grad()
def attention_maps(model, images):
    """Attention weights of every block and head: (batch_size, depth, num_heads, N + 1, N + 1)."""
    model.eval()
    _, maps = run_vit(model, images, need_weights=True)
    return torch.stack(maps, dim=1)


class MLP(nn.Module):
    """Baseline without any spatial prior: the flattened pixels through one hidden layer."""

    def __init__(self, image_size=16, channels=1, hidden=128, num_classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(channels * image_size * image_size, hidden),
                                 nn.ReLU(), nn.Linear(hidden, num_classes))

    def forward(self, images):
        return self.net(images)


class SmallCNN(nn.Module):
    """Baseline with the image prior built in: two 3 x 3 convolutions (local, shared weights),
    each followed by 2 x 2 max pooling, then a linear classifier."""

    def __init__(self, image_size=16, channels=1, width=16, num_classes=10):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(2 * width * (image_size // 4) ** 2, num_classes))
        # Channels last in memory (the same numbers, the same flattening order): PyTorch's CPU max
        # pooling and convolutions run a third faster on it than on the default layout.
        self.to(memory_format=torch.channels_last)

    def forward(self, images):
        return self.net(images.contiguous(memory_format=torch.channels_last))


MODELS = {"ViT": TinyViT, "CNN": SmallCNN, "MLP": MLP}


def make_model(kind, seed=0, **kwargs):
    """A freshly initialised model ("ViT", "CNN" or "MLP"), the same for the same seed."""
    torch.manual_seed(seed)
    return MODELS[kind](**kwargs)


def train_classifier(model, x, y, epochs=30, batch_size=64, lr=3e-3, weight_decay=0.05, seed=0,
                     min_steps=0, max_steps=None, description="training", show_progress=True, stop=None):
    """Train with AdamW and a one-cycle learning rate on shuffled mini-batches (seeded).

    Runs max(min_steps, epochs * batches per epoch) steps (at most max_steps if given; fewer if
    the threading.Event `stop` is set). Returns a dict: losses (one float per step), steps,
    seconds (wall clock), cpu_seconds (the processor time of the training itself: unlike the wall
    clock, it does not grow when other work shares the core).
    """
    n = len(x)
    per_epoch = math.ceil(n / batch_size)
    steps = max(min_steps, epochs * per_epoch)
    if max_steps is not None:
        steps = min(steps, max_steps)
    generator = torch.Generator().manual_seed(seed)
    # The fused kernel does the same update in one pass over the weights: a tenth of a ViT step.
    optimizer = optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, fused=True)
    schedule = optim.OneCycle(optimizer, max_lr=lr, total_steps=max(steps, 1), pct_start=0.15)
    losses = []
    start, cpu_start = time.perf_counter(), time.thread_time()
    with one_thread():
        torch.manual_seed(seed)
        model.train()
        order = torch.randperm(n, generator=generator)
        position = 0
        bar = progress(range(steps), desc=description, disable=not show_progress)
        for _ in bar:
            if stop is not None and stop.is_set():
                break
            if position >= n:
                order, position = torch.randperm(n, generator=generator), 0
            batch = order[position:position + batch_size]
            position += batch_size
            loss = F.cross_entropy(model(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            if len(losses) % 25 == 0:
                bar.set_postfix(loss=f"{sum(losses[-25:]) / 25:.3f}")
        model.eval()
    return {"losses": losses, "steps": steps, "seconds": time.perf_counter() - start,
            "cpu_seconds": time.thread_time() - cpu_start}


def train_many(jobs, workers=2, description="training", show_progress=True):
    """Train several models at once, `workers` at a time (`course_utils.training.in_parallel`).

    `jobs` is a list of (model, x, y, settings), settings being train_classifier's keyword
    arguments. Every model trains exactly as train_classifier alone would train it (one thread
    each, its own seeded batches), so the results do not depend on `workers` or on how the jobs
    are run; build the models beforehand, because building one draws from the global random
    numbers. On Linux each worker is a forked copy of this process, elsewhere a thread; either way
    the models are trained in place, and a student's part dropped in training (`model.parts`) is
    dropped here too. Returns the list of train_classifier results, in the order of `jobs`.
    """
    jobs = list(jobs)
    stop = threading.Event()  # with threads, an interrupted cell stops every run at its next step

    def task(model, x, y, settings):
        result = train_classifier(model, x, y, **dict(settings, show_progress=False, stop=stop))
        return result, list(getattr(model, "parts", {}))

    # The longest jobs first, so that no long job is left to run alone at the end.
    order = sorted(range(len(jobs)), key=lambda i: -_STEP_COST.get(type(jobs[i][0]).__name__, 1.0)
                   * _planned_steps(jobs[i]))
    done = in_parallel([lambda job=jobs[i]: task(*job) for i in order], workers=workers,
                       models=[jobs[i][0] for i in order], stop=stop,
                       description=description if show_progress else None)
    results = [None] * len(jobs)
    for i, (result, parts) in zip(order, done):
        model = jobs[i][0]
        if hasattr(model, "parts"):
            model.parts = {name: model.parts[name] for name in parts}
        results[i] = result
    return results


# Rough cost of one training step, relative to a TinyViT's, to hand out the longest jobs first.
_STEP_COST = {"TinyViT": 1.0, "SmallCNN": 0.6, "MLP": 0.1}


def _planned_steps(job):
    """The number of steps train_classifier will run for a job."""
    _, x, _, settings = job
    per_epoch = math.ceil(len(x) / settings.get("batch_size", 64))
    steps = max(settings.get("min_steps", 0), settings.get("epochs", 30) * per_epoch)
    return steps if settings.get("max_steps") is None else min(steps, settings["max_steps"])


@torch.no_grad()
def predict(model, x, batch_size=512):
    """Predicted classes, (N,) int64."""
    model.eval()
    with one_thread():
        return torch.cat([model(x[i:i + batch_size]).argmax(dim=-1) for i in range(0, len(x), batch_size)])


def accuracy(model, x, y):
    """Share of correctly classified images, a float in [0, 1]."""
    return (predict(model, x) == y).double().mean().item()


# Training settings per model for the data-fraction comparison (and the ViT of the notebook).
SETTINGS = {
    "ViT": {"epochs": 20, "lr": 4e-3},
    "CNN": {"epochs": 10, "lr": 5e-3},
    "MLP": {"epochs": 30, "lr": 3e-3},
}


def data_fraction_sweep(x_train, y_train, x_test, y_test, fractions=(0.1, 0.3, 1.0),
                        kinds=("ViT", "CNN", "MLP"), seeds=(0,), min_steps=200, known=None,
                        max_steps=None, show_progress=True, vit_parts=None, workers=2):
    """Held-out accuracy of each model trained on a class-balanced fraction of the training set,
    for each seed (a seed fixes the subset, the initial weights and the batches).

    Every model sees the same subsets and trains with its own SETTINGS, for at least `min_steps`
    steps, so that a small subset is trained as long as the models need. `known` maps
    (kind, fraction, seed) to an accuracy measured already (e.g. the notebook's own ViTs), which
    is then not trained again. `vit_parts`: the student's functions the ViTs run (`assemble`).
    Runs on `workers` threads (`train_many`). Returns ({kind: array (seeds, fractions) of
    accuracies}, {(kind, fraction, seed): training CPU seconds} for the runs it trained).
    """
    known = dict(known or {})
    runs, jobs = [], []
    for seed in seeds:
        for kind in kinds:
            for fraction in fractions:
                if (kind, fraction, seed) in known:
                    continue
                xs, ys = digit_data.subset(x_train, y_train, fraction, seed=seed)
                extra = {"parts": vit_parts} if kind == "ViT" and vit_parts else {}
                model = make_model(kind, seed=seed, image_size=x_train.shape[-1], **extra)
                runs.append(((kind, fraction, seed), model))
                jobs.append((model, xs, ys, dict(SETTINGS[kind], seed=seed, min_steps=min_steps,
                                                 max_steps=max_steps)))
    results = train_many(jobs, workers=workers, description="data-fraction sweep", show_progress=show_progress)
    seconds = {}
    for (key, model), result in zip(runs, results):
        known[key] = accuracy(model, x_test, y_test)
        seconds[key] = result["cpu_seconds"]
    table = {kind: np.array([[known[(kind, f, seed)] for f in fractions] for seed in seeds]) for kind in kinds}
    return table, seconds


# --------------------------------------------------------------------------- the student's parts

# The four functions notebook 09 asks for, in the order it asks for them.
PARTS = ("patchify", "patch_embedding", "prepend_class_token", "vit_forward")

# What each exercise forbids (its visible tests do too): a function that uses them is not used.
_FORBIDDEN = {
    "patchify": grading.UNFOLD_BUILTINS,
    "patch_embedding": grading.CONV_BUILTINS + grading.UNFOLD_BUILTINS,
    "prepend_class_token": (),
    "vit_forward": ("course_utils.models.vit_model:run_vit",),
}


# Where a part is tried: the notebook's model on a batch of 5 images, and one image through a
# model with 3 channels and 2 x 2 patches, on which every layout mistake (patch order, channel
# order) shows.
_TRIALS = ((None, 5), ({"image_size": 6, "patch_size": 2, "channels": 3, "d_model": 12, "depth": 1,
                        "num_heads": 2, "num_classes": 4}, 1))


def _inputs(config, batch, g):
    """A TinyViT of `config` whose every weight is redrawn at scale 0.5 (so that the class token,
    each position and each bias matter), and `batch` images of its size, in float32 as trained."""
    model = TinyViT(**config)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g))
    images = torch.rand(batch, model.channels, model.image_size, model.image_size, generator=g)
    return model, images


def _library(name, model, images):
    """The library's own computation of one part for `model` and `images`: (args, result)."""
    P, C = model.patch_size, model.channels
    weight, bias = model.patch_embed.weight, model.patch_embed.bias
    if name == "patchify":
        return (images, P), F.unfold(images, P, stride=P).transpose(1, 2)
    tokens = F.conv2d(images, weight.reshape(-1, C, P, P), bias, stride=P).flatten(2).transpose(1, 2)
    if name == "patch_embedding":
        return (images, weight, bias, P), tokens
    if name == "prepend_class_token":
        return (tokens, model.cls_token), torch.cat([model.cls_token.expand(len(tokens), -1, -1), tokens], 1)
    return (model, images), run_vit(model, images)


def _same(got, expected, tol=1e-4):
    """Equal up to float32 round-off (a matrix product and a convolution add in other orders)."""
    return (isinstance(got, torch.Tensor) and got.shape == expected.shape and got.dtype == expected.dtype
            and bool(torch.allclose(got, expected, rtol=tol, atol=tol)))


def _check_one(name, fn, config):
    """None if `fn` computes part `name` as the library does (values and gradients, on each of
    _TRIALS, under its exercise's rules), else the reason in a few words."""
    if fn is None:
        return "is not defined"
    if not callable(fn):
        return "is not a function"
    g = torch.Generator().manual_seed(9)
    for trial_config, batch in _TRIALS:
        model, images = _inputs(trial_config or config, batch, g)
        args, expected = _library(name, model, images)
        inputs = [a for a in args if isinstance(a, torch.Tensor)] + list(model.parameters())
        before = [a.detach().clone() for a in inputs]
        try:
            got = grading.call_without(fn, args, forbidden=_FORBIDDEN[name], exercise="its exercise")
        except grading.TamperError:
            return "runs in a notebook that replaced a function the checks rely on"
        except grading.GradingError as error:
            if "off limits" in str(error):
                return "uses a function its exercise forbids"
            try:  # it raised: which error, in the student's words
                fn(*args)
            except Exception as raised:  # noqa: BLE001
                return f"raises {type(raised).__name__}"
            return "raises an error"
        except Exception as error:  # noqa: BLE001 - e.g. the tamper guard
            return f"raises {type(error).__name__}"
        if any(not torch.equal(a, b) for a, b in zip(inputs, before)):
            return "changes its input (or the model's weights) in place"
        if not isinstance(got, torch.Tensor):
            return f"returns a {type(got).__name__}, not a tensor"
        if got.shape != expected.shape:
            return f"returns shape {tuple(got.shape)} where the library's is {tuple(expected.shape)}"
        if not _same(got, expected):
            return "gives other numbers than the library's"
        # The same gradients: training must reach every weight as the library's model does.
        leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        if name == "prepend_class_token":
            leaves = list(args)
        if name == "vit_forward":
            leaves = list(model.parameters())
        if name == "patchify":
            continue  # the images need no gradient
        upstream = torch.randn(expected.shape, generator=g, dtype=expected.dtype)
        try:
            theirs = torch.autograd.grad((got * upstream).sum(), leaves, allow_unused=True)
        except RuntimeError:
            return "gives the right numbers but no gradient"
        ours = torch.autograd.grad((expected * upstream).sum(), leaves, allow_unused=True)
        for a, b in zip(theirs, ours):
            if a is None or b is None or not _same(a, b):
                return "gives the right numbers but other gradients than the library's"
    return None


def check_parts(config=None, **functions):
    """For each of PARTS: None if the function given under that name (e.g. the notebook's own
    `patchify`) can stand in for the library's in a TinyViT of `config` (default: the notebook's),
    else why not, in a few words. A part not given is "not defined".

    A function stands in when its result equals the library's in value and kind and its
    gradients do too (random weights at scale 0.5; a batch of 5 for `config`, one image through a
    model with 3 channels), it leaves its inputs alone, and it calls nothing its exercise forbids
    (F.unfold for patchify, a convolution for the patch embedding, the library's forward pass
    for vit_forward). Runs without touching the global random numbers.
    """
    unknown = set(functions) - set(PARTS)
    if unknown:
        raise TypeError(f"unknown parts {sorted(unknown)}; the parts are {PARTS}")
    config = dict(config or {})
    config.pop("parts", None)
    with torch.random.fork_rng(), one_thread():
        return {name: _check_one(name, functions.get(name), config) for name in PARTS}


def _calls(fn, name, functions):
    """Whether `fn` names the function given as `name` among its globals (under any name)."""
    code = getattr(fn, "__code__", None)
    if code is None or functions.get(name) is None:
        return False
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= set(const.co_names)
    scope = getattr(fn, "__globals__", {})
    return any(scope.get(n) is functions[name] for n in names)


def _used_by(name, functions, seen=()):
    """The parts that the function given as `name` calls, directly or through another one."""
    found = []
    for other in PARTS:
        if other != name and other not in seen and functions.get(other) is not None \
                and _calls(functions[name], other, functions):
            found += [other] + _used_by(other, functions, seen + (name,))
    return [p for p in PARTS if p in found]


def _join(items):
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _listing(names):
    return _join(f"`{n}`" for n in names)


def describe_parts(checks, functions=None):
    """One sentence: which ViT the notebook trains (the student's, a mix, or the library's) and
    why, from `check_parts`' answer (and the functions, to say which ones `vit_forward` calls)."""
    functions = functions or {}
    passed = [name for name in PARTS if checks[name] is None]
    failed = [name for name in PARTS if checks[name] is not None]
    reasons = _join(f"your `{name}` {checks[name]}" for name in failed) if failed else ""
    if "vit_forward" in passed:
        inside = _used_by("vit_forward", functions)
        with_ = f" (with your {_listing(inside)} inside it)" if inside else ""
        sentence = (f"The ViT below trains your own code: your `vit_forward`{with_} runs every forward pass, "
                    "because it gives the library model's logits and gradients for the same weights")
        return sentence + (f" ({reasons})." if failed else ".")
    if not passed:
        if all(checks[name] == "raises NotImplementedError" for name in PARTS):
            return ("The ViT below is the library's TinyViT, because none of your four functions is written "
                    "yet (they raise NotImplementedError): answer exercises 1 and 3-5 and run this cell again "
                    "to train your own.")
        if all(checks[name] in ("raises NotImplementedError", "is not defined") for name in PARTS):
            return ("The ViT below is the library's TinyViT, because none of your four functions is written "
                    "and run yet: answer exercises 1 and 3-5, run their cells and then this one to train your own.")
        return f"The ViT below is the library's TinyViT, because none of your functions can stand in for it: {reasons}."
    return (f"The ViT below runs the library's forward pass with your {_listing(passed)} in it, and the library's "
            f"own steps for the rest, because {reasons}.")


def assemble(seed=0, checks=None, config=None, **functions):
    """A fresh TinyViT (initialised as `make_model("ViT", seed)`) that runs the student's functions
    where they pass `check_parts`, else the library's. Returns (model, checks); pass `checks`
    back in to build more models from the same functions without checking them again."""
    if checks is None:
        checks = check_parts(config=config, **functions)
    parts = {name: functions[name] for name in PARTS if checks[name] is None}
    return make_model("ViT", seed=seed, parts=parts, **dict(config or {})), checks
