"""Wrong answers to notebook 05's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import numpy as np


def softmax_no_max_subtracted(x, axis=-1):
    """Right on small scores; overflows to nan on large ones."""
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


WRONG_ANSWERS = {
    "self_attention_softmax": [softmax_no_max_subtracted],
}
