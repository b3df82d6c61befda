"""A tiny Vision Transformer and two baselines for notebook 09, with a seeded training loop.

Student-safe, shipped with the course: nothing here is an answer the notebook's exercises could
call. The exercises (patchify, the patch embedding, prepending the class token, the forward pass)
are built by the student from matrix products; this module computes the same things its own way
(the patch embedding as a strided convolution, see notebook 09 for why that is the same thing),
and the forward pass lives in one function, `run_vit`, which the forward-pass exercise may not
call (its tests forbid it, and calling `model(images)` goes through it).

`PreNormBlock` is the pre-norm transformer block of notebook 08, written with
`torch.nn.MultiheadAttention` so that this notebook does not depend on your answers there.

Training runs on one CPU thread (restored afterwards): for models this small one thread is as
fast as two, and it makes every number repeat exactly from run to run and machine to machine.
"""
import math
import time

import torch
from torch import nn
from torch.nn import functional as F

from course_utils.data import digits as digit_data
from course_utils.training import one_thread, progress

__all__ = [
    "PreNormBlock", "TinyViT", "run_vit", "attention_maps", "MLP", "SmallCNN", "make_model",
    "train_classifier", "predict", "accuracy", "data_fraction_sweep",
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
        the attention weights of every head, (batch_size, num_heads, T, T)."""
        h = self.norm1(x)
        attended, weights = self.attention(h, h, h, need_weights=need_weights, average_attn_weights=False)
        x = x + attended
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
    """

    def __init__(self, image_size=16, patch_size=4, channels=1, d_model=32, depth=2, num_heads=4,
                 mlp_ratio=2, num_classes=10):
        super().__init__()
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
        return run_vit(self, images)


def run_vit(model, images, need_weights=False):
    """The forward pass of a TinyViT; with need_weights=True also a list with the attention
    weights of every block, each (batch_size, num_heads, N + 1, N + 1), token 0 = class token."""
    d_model = model.patch_embed.out_features
    P, C = model.patch_size, model.channels
    # A linear map of each P x P patch is a convolution with a P x P kernel and stride P.
    kernel = model.patch_embed.weight.reshape(d_model, C, P, P)
    tokens = F.conv2d(images, kernel, model.patch_embed.bias, stride=P).flatten(2).transpose(1, 2)
    cls = model.cls_token.expand(images.shape[0], -1, -1)
    x = torch.cat([cls, tokens], dim=1) + model.pos_embedding
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

    def forward(self, images):
        return self.net(images)


MODELS = {"ViT": TinyViT, "CNN": SmallCNN, "MLP": MLP}


def make_model(kind, seed=0, **kwargs):
    """A freshly initialised model ("ViT", "CNN" or "MLP"), the same for the same seed."""
    torch.manual_seed(seed)
    return MODELS[kind](**kwargs)


def train_classifier(model, x, y, epochs=30, batch_size=64, lr=3e-3, weight_decay=0.05, seed=0,
                     min_steps=0, max_steps=None, description="training", show_progress=True):
    """Train with AdamW and a one-cycle learning rate on shuffled mini-batches (seeded).

    Runs max(min_steps, epochs * batches per epoch) steps (at most max_steps if given).
    Returns a dict: losses (one float per step), steps, seconds (wall clock).
    """
    n = len(x)
    per_epoch = math.ceil(n / batch_size)
    steps = max(min_steps, epochs * per_epoch)
    if max_steps is not None:
        steps = min(steps, max_steps)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=max(steps, 1),
                                                   pct_start=0.15)
    losses = []
    start = time.perf_counter()
    with one_thread():
        torch.manual_seed(seed)
        model.train()
        order = torch.randperm(n, generator=generator)
        position = 0
        bar = progress(range(steps), desc=description, disable=not show_progress)
        for _ in bar:
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
    return {"losses": losses, "steps": steps, "seconds": time.perf_counter() - start}


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
    "ViT": {"epochs": 30, "lr": 3e-3},
    "CNN": {"epochs": 15, "lr": 5e-3},
    "MLP": {"epochs": 30, "lr": 3e-3},
}


def data_fraction_sweep(x_train, y_train, x_test, y_test, fractions=(0.1, 0.3, 1.0),
                        kinds=("ViT", "CNN", "MLP"), seed=0, min_steps=150, known=None,
                        max_steps=None, show_progress=True):
    """Held-out accuracy of each model trained on a class-balanced fraction of the training set.

    Every model sees the same subsets and trains for the same number of passes over its subset
    (at least `min_steps` steps, so that a small subset still gets trained). `known` maps
    (kind, fraction) to an accuracy measured already (e.g. the notebook's own ViT), which is
    then not trained again. Returns {kind: [accuracy per fraction]}.
    """
    known = dict(known or {})
    results = {kind: [] for kind in kinds}
    runs = [(kind, f) for kind in kinds for f in fractions if (kind, f) not in known]
    bar = progress(total=len(runs), desc="data-fraction sweep", disable=not show_progress)
    for kind in kinds:
        for fraction in fractions:
            if (kind, fraction) in known:
                results[kind].append(known[(kind, fraction)])
                continue
            xs, ys = digit_data.subset(x_train, y_train, fraction, seed=seed)
            model = make_model(kind, seed=seed, image_size=x_train.shape[-1])
            train_classifier(model, xs, ys, seed=seed, min_steps=min_steps, max_steps=max_steps,
                             show_progress=False, **SETTINGS[kind])
            results[kind].append(accuracy(model, x_test, y_test))
            bar.update(1)
    bar.close()
    return results
