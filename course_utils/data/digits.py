"""scikit-learn's bundled handwritten digits, for the Vision Transformer of notebook 09.

1797 grey-scale images of 8 x 8 pixels (values 0..16), digits 0 to 9, shipped inside
scikit-learn: no download. `load_digits()` gives them as PyTorch tensors in [0, 1], shaped like
images, `(N, 1, H, W)`, with a fixed held-out split: the same 360 test images (36 of each digit)
on every machine and for every seed, so that accuracies of different models and runs can be
compared.

Upsampling: 8 x 8 pixels cut into 4 x 4 patches gives only 4 patches, too few for attention to
have anything to do; 2 x 2 patches of 4 numbers each are barely "patches". `upsample=2` resizes
to 16 x 16 (bilinear), so 4 x 4 patches give a 4 x 4 grid of 16 patches of 16 numbers each.
Upsampling adds no information (every new pixel is a blend of old ones); it only makes the
patches big enough to draw and to talk about.
"""
import importlib.util
from pathlib import Path

import numpy as np
import torch

__all__ = ["NUM_CLASSES", "TEST_PER_CLASS", "bundled_digits", "load_digits", "split_indices", "subset"]

NUM_CLASSES = 10
TEST_PER_CLASS = 36  # 360 held-out images, 20 % of the 1797
SPLIT_SEED = 2024     # fixed: the held-out set never changes


def split_indices(labels, test_per_class=TEST_PER_CLASS, seed=SPLIT_SEED):
    """(train_indices, test_indices): `test_per_class` images of every class held out, chosen
    at random with a fixed seed; both sorted."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    test = []
    for digit in range(NUM_CLASSES):
        members = np.flatnonzero(labels == digit)
        if len(members) <= test_per_class:
            raise ValueError(f"digit {digit} has only {len(members)} images; cannot hold out {test_per_class}")
        test.extend(rng.choice(members, size=test_per_class, replace=False).tolist())
    test = np.sort(np.array(test))
    train = np.setdiff1d(np.arange(len(labels)), test)
    return train, test


def bundled_digits():
    """(images, labels) exactly as `sklearn.datasets.load_digits()` gives them: float64 images
    of shape (1797, 8, 8) with values 0..16 and int64 labels.

    Read straight from the CSV scikit-learn ships, without importing scikit-learn: the import
    alone costs about 2 s of a notebook that runs in seconds (tests/test_digits_data.py checks
    that both give the same arrays)."""
    spec = importlib.util.find_spec("sklearn")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the digits come bundled with scikit-learn, which is not installed: "
                          "pip install scikit-learn (the version pinned in pyproject.toml)")
    csv = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    table = np.loadtxt(csv, delimiter=",")  # 64 pixels then the label, one image per row
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)


def load_digits(upsample=2):
    """The digits as tensors: (x_train, y_train, x_test, y_test).

    x_* are float32 of shape (N, 1, 8 * upsample, 8 * upsample) with values in [0, 1];
    y_* are int64 labels 0..9. 1437 training and 360 held-out images. `upsample` is a whole
    number >= 1 (1 keeps the original 8 x 8 pixels; 2 gives 16 x 16, bilinear).
    """
    if int(upsample) != upsample or upsample < 1:
        raise ValueError(f"upsample must be a whole number >= 1, got {upsample}")
    pixels, targets = bundled_digits()
    images = torch.tensor(pixels, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(targets, dtype=torch.int64)
    if upsample > 1:
        size = 8 * int(upsample)
        images = torch.nn.functional.interpolate(images, size=(size, size), mode="bilinear",
                                                 align_corners=False).clamp(0.0, 1.0)
    train, test = split_indices(targets)
    train, test = torch.as_tensor(train), torch.as_tensor(test)
    return images[train], labels[train], images[test], labels[test]


def subset(x, y, fraction, seed=0):
    """A class-balanced random `fraction` of (x, y): the same share of every digit (at least
    one image each), in a fixed order for a given seed."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if fraction == 1:
        return x, y
    g = torch.Generator().manual_seed(seed)
    keep = []
    for digit in range(NUM_CLASSES):
        members = torch.nonzero(y == digit).flatten()
        n = max(1, round(fraction * len(members)))
        keep.append(members[torch.randperm(len(members), generator=g)[:n]])
    keep = torch.sort(torch.cat(keep)).values
    return x[keep], y[keep]
