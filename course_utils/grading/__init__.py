"""Student-safe helpers that every test cell calls.

Importing this module (the locked setup cell of every notebook does it first) captures the
original comparison functions for the tamper guard and makes grading errors show as one
sentence in JupyterLab, and starts recording which cells pass (`progress`, for the summary at
the end of every notebook). Nothing here knows an answer: answers and the mistake catalogue live in
`course_utils.reference`, which students never receive.
"""
from . import progress, questions, tamper
from .checks import (
    assert_close,
    assert_finite,
    assert_answered,
    assert_shape,
    assert_sums_to_one,
    assert_true,
    assert_type,
    mismatch,
    to_numpy,
)
from .errors import GradingError, TamperError, install_notebook_display
from .guards import (
    ATTENTION_BUILTINS,
    AUTOGRAD_BUILTINS,
    CONV_BUILTINS,
    SOFTMAX_BUILTINS,
    UNFOLD_BUILTINS,
    call_without,
)
from .properties import assert_causal, assert_permutation_equivariant

tamper.capture()
install_notebook_display()
progress.install()

__all__ = [
    "GradingError", "TamperError", "assert_answered", "assert_close", "assert_finite", "assert_shape",
    "assert_sums_to_one", "assert_true", "assert_type", "mismatch", "to_numpy", "call_without",
    "ATTENTION_BUILTINS", "AUTOGRAD_BUILTINS", "CONV_BUILTINS", "SOFTMAX_BUILTINS", "UNFOLD_BUILTINS",
    "assert_causal", "assert_permutation_equivariant",
]
