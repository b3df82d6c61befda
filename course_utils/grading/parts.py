"""Correct versions of the pieces a later exercise builds on, made of library calls only.

Why: a prompt that says "use your `softmax` from exercise 1" makes the later exercise depend on
the earlier one. A wrong softmax would then cost its own points *and* the later exercise's, with
a message blaming the later one ("did you divide by sqrt(d_k)?"). So the later exercise is judged
with a correct piece in place of the student's (`substituted`): each mistake is charged once,
where it was made. The pairs (later exercise <- the pieces its prompt tells it to use):

    01 rnn_forward        <- rnn_step
    05 attention_numpy    <- softmax
    07 MultiHeadAttention <- split_heads, merge_heads
    09 patch_embedding    <- patchify
    09 vit_forward        <- patchify, patch_embedding, prepend_class_token
    14 ablated_loss       <- per_token_loss

The pieces are public library code (SciPy, PyTorch), never the course's reference. Each earlier
exercise forbids the piece that would answer it (its catalogue lists
`course_utils.grading.parts:<name>`), and outside a substitution a piece runs in plain sight of
the forbidden-API guard. Inside one, the library calls a piece makes are not charged to the
student: the guard's recorder sees them one level down, as calls inside a recorded call.
"""
import contextlib
import functools

import numpy as np
import scipy.special
import torch
from torch.nn import functional as F

from . import guards, ipython_hooks

HOOK = "parts: give the student's own pieces back"
_MISSING = object()


def softmax(x, axis=-1):
    """Exercise 05.1's softmax: SciPy's (stable) softmax along `axis`."""
    return scipy.special.softmax(x, axis=axis)


def rnn_step(x_t, h_prev, W_xh, W_hh, b):
    """Exercise 01.1's step, tanh(x W_xh + h W_hh + b): PyTorch's RNN cell (weights transposed)."""
    return torch.rnn_tanh_cell(x_t, h_prev, W_xh.T, W_hh.T, b, None)


def split_heads(x, num_heads):
    """Exercise 07.1: (B, T, d_model) -> (B, num_heads, T, d_k)."""
    return x.unflatten(-1, (num_heads, -1)).movedim(-2, -3)


def merge_heads(x):
    """Exercise 07.2: (B, h, T, d_k) -> (B, T, h * d_k)."""
    return x.movedim(-3, -2).flatten(-2)


def patchify(images, patch_size):
    """Exercise 09.1: (B, C, H, W) -> (B, N, C*P*P), PyTorch's unfold (row-major, channel-first)."""
    return F.unfold(images, kernel_size=patch_size, stride=patch_size).transpose(1, 2)


def patch_embedding(images, weight, bias, patch_size):
    """Exercise 09.3: every patch through one linear map, (B, C, H, W) -> (B, N, d_model): PyTorch's
    strided convolution with the linear weight laid out as its kernel."""
    kernel = weight.reshape(weight.shape[0], images.shape[1], patch_size, patch_size)
    return F.conv2d(images, kernel, bias, stride=patch_size).flatten(2).transpose(1, 2)


def prepend_class_token(tokens, cls_token):
    """Exercise 09.4: (B, N, d) -> (B, N + 1, d), the same class token first in every sequence."""
    return torch.cat([cls_token.expand(tokens.shape[0], -1, -1), tokens], dim=1)


def per_token_loss(logits, tokens):
    """Exercise 14.3: the cross-entropy of each next token, (..., T, V) and (..., T) -> (..., T - 1):
    PyTorch's cross_entropy, unreduced, on the logits at t and the token at t + 1."""
    targets = tokens[..., 1:]
    losses = F.cross_entropy(logits[..., :-1, :].reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    return losses.view(targets.shape)


PIECES = {"softmax": softmax, "rnn_step": rnn_step, "split_heads": split_heads,
          "merge_heads": merge_heads, "patchify": patchify, "patch_embedding": patch_embedding,
          "prepend_class_token": prepend_class_token, "per_token_loss": per_token_loss}


_GENUINE = frozenset(id(piece) for piece in PIECES.values())
_active = []  # the substitutions in force (a stand-in is exempt from the guard only inside one)


def _in_place_of(piece):
    """The piece as the student's code will call it: a fresh function (so that no forbidden list
    names it) whose library calls run one level below the guard's recorder, while a substitution
    is in force and only for the course's own pieces. Anywhere else it is an ordinary call, in
    plain sight of the guard (so that it cannot launder a forbidden call)."""
    genuine = id(piece) in _GENUINE

    @functools.wraps(piece)
    def stand_in(*args, **kwargs):
        if not (genuine and _active):
            return piece(*args, **kwargs)
        guards._state.depth = guards._depth() + 1
        try:
            return piece(*args, **kwargs)
        finally:
            guards._state.depth -= 1
    stand_in.course_part = piece.__name__
    return stand_in


def namespace_of(answer):
    """The global namespace the student's function or class looks its names up in (the
    notebook's), or None for an answer the course itself wrote or one without one."""
    candidates = [answer]
    if isinstance(answer, type):
        candidates = [v for k, v in vars(answer).items() if callable(v) and not k.startswith("__class")]
    for candidate in candidates:
        namespace = getattr(candidate, "__globals__", None)
        if isinstance(namespace, dict):
            if str(namespace.get("__name__", "")).startswith("course_utils"):
                return None
            return namespace
    return None


@contextlib.contextmanager
def substituted(answer, names):
    """While the block runs, the notebook names in `names` (pieces of PIECES) are correct ones,
    for `answer`'s code and anything else the notebook calls; afterwards the student's own are
    back, whatever happened inside."""
    namespace = namespace_of(answer) if names else None
    if namespace is None:
        yield
        return
    saved = {name: namespace.get(name, _MISSING) for name in names}
    _active.append(answer)
    try:
        for name in names:
            namespace[name] = _in_place_of(PIECES[name])
        yield
    finally:
        _active.pop()
        for name, value in saved.items():
            if value is _MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = value


# --------------------------------------------------------------------------- in a test cell

def _examples():
    """Small inputs on which a student's own piece is compared with the correct one."""
    g = torch.Generator().manual_seed(0)
    images = torch.randn(2, 3, 4, 6, generator=g, dtype=torch.float64)
    return {
        "softmax": (np.random.default_rng(0).standard_normal((2, 5)),),
        "rnn_step": tuple(torch.randn(*shape, generator=g, dtype=torch.float64)
                          for shape in ((2, 3), (2, 4), (3, 4), (4, 4), (4,))),
        "split_heads": (torch.randn(2, 3, 8, generator=g), 2),
        "merge_heads": (torch.randn(2, 2, 3, 4, generator=g),),
        "patchify": (images, 2),
        "patch_embedding": (images, torch.randn(5, 12, generator=g, dtype=torch.float64),
                            torch.randn(5, generator=g, dtype=torch.float64), 2),
        "prepend_class_token": (torch.randn(2, 3, 4, generator=g), torch.randn(1, 1, 4, generator=g)),
        "per_token_loss": (torch.randn(2, 5, 7, generator=g), torch.randint(7, (2, 5), generator=g)),
    }


def _agrees(own, name):
    """Whether the student's own piece gives the correct piece's result on a small example."""
    if not callable(own):
        return False
    args = _examples()[name]
    try:
        mine, right = own(*args), PIECES[name](*args)
        return bool(np.allclose(np.asarray(mine, dtype=np.float64), np.asarray(right, dtype=np.float64),
                                atol=1e-5, rtol=1e-4)) and np.shape(mine) == np.shape(right)
    except Exception:  # noqa: BLE001 - the student's piece is wrong or not written: say so below
        return False


_pending = []  # (namespace, the student's own pieces) to give back when the cell ends


def _give_back(*_):
    while _pending:
        namespace, own = _pending.pop()
        for name, value in own.items():
            if value is _MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = value
        if _active:
            _active.pop()


def use_correct(answer, pieces):
    """From here to the end of this test cell, `answer` (the later exercise) runs with correct
    versions of `pieces` ({name: "Exercise 1"}) in place of the student's; the student's own are
    given back when the cell ends (an IPython post_run_cell hook), whatever happened in it. When
    the student's own piece disagrees with the correct one, one line says which exercise to fix.
    Outside an IPython kernel (plain scripts) it changes nothing."""
    namespace = namespace_of(answer)
    if ipython_hooks.running_shell() is None or namespace is None:
        return
    _give_back()
    own = {name: namespace.get(name, _MISSING) for name in pieces}
    to_fix = [f"`{name}` ({label})" for name, label in pieces.items() if not _agrees(own[name], name)]
    for name in pieces:
        namespace[name] = _in_place_of(PIECES[name])
    _pending.append((namespace, own))
    _active.append(answer)
    ipython_hooks.on_cell_end(HOOK, _give_back)
    if to_fix:
        used = " and ".join(f"`{name}`" for name in pieces)
        print(f"Note: this cell tests `{getattr(answer, '__name__', 'your answer')}` with a correct {used} in place "
              f"of yours, so that one mistake costs points once. Your own {' and '.join(to_fix)} does not give the "
              "right result yet: fix it there, or the rest of this notebook will run with it as it is.")
