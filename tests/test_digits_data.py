"""scikit-learn's bundled digits as notebook 09 uses them (course_utils/data/digits.py)."""
import subprocess
import sys

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits as sklearn_digits

from course_utils.data import digits


@pytest.fixture(scope="module")
def original():
    return digits.load_digits(upsample=1)


def test_the_bundled_csv_reads_as_scikit_learn_loads_it():
    bunch = sklearn_digits()
    images, labels = digits.bundled_digits()
    assert images.dtype == bunch.images.dtype and labels.dtype == bunch.target.dtype
    np.testing.assert_array_equal(images, bunch.images)
    np.testing.assert_array_equal(labels, bunch.target)


def test_loading_does_not_import_scikit_learn():
    # Importing scikit-learn costs a notebook about 2 s; the CSV it ships is all we need.
    code = ("import sys; from course_utils.data import digits; digits.load_digits(); "
            "assert 'sklearn' not in sys.modules, sorted(m for m in sys.modules if 'sklearn' in m)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_shapes_range_and_split_sizes(original):
    x_train, y_train, x_test, y_test = original
    assert x_train.shape == (1437, 1, 8, 8) and x_test.shape == (360, 1, 8, 8)
    assert x_train.dtype == torch.float32 and y_train.dtype == torch.int64
    assert float(x_train.min()) >= 0.0 and float(x_train.max()) <= 1.0
    assert torch.bincount(y_test).tolist() == [digits.TEST_PER_CLASS] * 10


def test_split_is_fixed_disjoint_and_covers_everything():
    labels = sklearn_digits().target
    train, test = digits.split_indices(labels)
    again_train, again_test = digits.split_indices(labels)
    np.testing.assert_array_equal(train, again_train)
    np.testing.assert_array_equal(test, again_test)
    assert not set(train) & set(test)
    assert sorted(set(train) | set(test)) == list(range(len(labels)))
    with pytest.raises(ValueError):
        digits.split_indices(labels, test_per_class=1000)


def test_upsample_1_is_the_original_pixels(original):
    bunch = sklearn_digits()
    _, test = digits.split_indices(bunch.target)
    x_test = original[2]
    np.testing.assert_allclose(x_test[:, 0].numpy(), bunch.images[test] / 16.0, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(original[3].numpy(), bunch.target[test])


def test_upsample_2_keeps_labels_and_the_picture(original):
    x_train, y_train, x_test, y_test = digits.load_digits(upsample=2)
    assert x_train.shape == (1437, 1, 16, 16) and x_test.shape == (360, 1, 16, 16)
    assert torch.equal(y_train, original[1]) and torch.equal(y_test, original[3])
    # Averaging 2 x 2 blocks of the upsampled image gives back a blurred original.
    pooled = torch.nn.functional.avg_pool2d(x_test, 2)
    assert float((pooled - original[2]).abs().mean()) < 0.1
    assert np.corrcoef(pooled.flatten().numpy(), original[2].flatten().numpy())[0, 1] > 0.95
    with pytest.raises(ValueError):
        digits.load_digits(upsample=1.5)


def test_subset_is_balanced_and_seeded(original):
    x_train, y_train = original[0], original[1]
    xs, ys = digits.subset(x_train, y_train, 0.1, seed=0)
    again_x, again_y = digits.subset(x_train, y_train, 0.1, seed=0)
    assert torch.equal(xs, again_x) and torch.equal(ys, again_y)
    counts = torch.bincount(ys, minlength=10)
    full = torch.bincount(y_train, minlength=10)
    assert torch.all((counts - 0.1 * full).abs() <= 1)
    assert digits.subset(x_train, y_train, 1.0)[0] is x_train
    with pytest.raises(ValueError):
        digits.subset(x_train, y_train, 0.0)
