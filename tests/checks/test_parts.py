"""One mistake, one penalty (course_utils/grading/parts.py): a later exercise whose prompt says to
use an earlier answer is judged with a correct earlier piece in its place; the piece itself is
forbidden as an answer to the earlier exercise; the student's own piece is back afterwards."""
import numpy as np
import pytest
import torch

from course_utils.grading import GradingError, parts
from course_utils.reference import rnn_limits as rnn_reference
from course_utils.reference import vision_transformer as vit_reference
from course_utils.reference.mistakes import multi_head, rnn_limits, self_attention, vision_transformer

CORRECT_ATTENTION = '''
def attention_numpy(Q, K, V):
    weights = softmax(Q @ K.T / np.sqrt(Q.shape[-1]), axis=-1)
    return weights @ V, weights
'''
WRONG_SOFTMAX = '''
def softmax(x, axis=-1):
    e = np.exp(x)
    return e / e.sum()          # over the whole array, not along the axis
'''


def _notebook(*sources):
    namespace = {"np": np, "torch": torch, "__name__": "__main__"}
    for source in sources:
        exec(source, namespace)
    return namespace


def test_a_right_attention_with_a_wrong_softmax_loses_only_the_softmax_points():
    notebook = _notebook(WRONG_SOFTMAX, CORRECT_ATTENTION)
    self_attention.EXERCISES["self_attention_attention_numpy"].check(notebook["attention_numpy"])
    with pytest.raises(GradingError):
        self_attention.EXERCISES["self_attention_softmax"].check(notebook["softmax"])
    assert notebook["softmax"].__module__ == "__main__", "the student's own softmax is back afterwards"


def test_without_the_substitution_the_same_attention_fails():
    """The check above passes *because of* the substitution (it can fail on this input)."""
    notebook = _notebook(WRONG_SOFTMAX, CORRECT_ATTENTION)
    exercise = self_attention.EXERCISES["self_attention_attention_numpy"]
    import dataclasses
    with pytest.raises(GradingError):
        dataclasses.replace(exercise, earlier=()).check(notebook["attention_numpy"])


def test_a_wrong_attention_is_still_named_with_a_right_softmax_in_place():
    notebook = _notebook(WRONG_SOFTMAX, CORRECT_ATTENTION.replace(" / np.sqrt(Q.shape[-1])", ""))
    with pytest.raises(GradingError, match="sqrt"):
        self_attention.EXERCISES["self_attention_attention_numpy"].check(notebook["attention_numpy"])


def test_rnn_forward_with_a_wrong_rnn_step():
    notebook = _notebook('''
def rnn_step(x_t, h_prev, W_xh, W_hh, b):
    return torch.sigmoid(x_t @ W_xh + h_prev @ W_hh + b)
def rnn_forward(x, h0, W_xh, W_hh, b):
    h = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype) if h0 is None else h0
    states = []
    for t in range(x.shape[1]):
        h = rnn_step(x[:, t], h, W_xh, W_hh, b)
        states.append(h)
    return torch.stack(states, dim=1)
''')
    rnn_limits.EXERCISES["rnn_limits_forward"].check(notebook["rnn_forward"])
    with pytest.raises(GradingError):
        rnn_limits.EXERCISES["rnn_limits_step"].check(notebook["rnn_step"])


def test_multi_head_attention_with_wrong_split_and_merge():
    notebook = _notebook('''
from torch import nn
def split_heads(x, num_heads):
    B, T, d = x.shape
    return x.reshape(B, num_heads, T, d // num_heads)      # no transpose: heads mix tokens
def merge_heads(x):
    B, h, T, d_k = x.shape
    return x.reshape(B, T, h * d_k)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
    def forward(self, query, key, value):
        q, k, v = (split_heads(p(x), self.num_heads) for p, x in ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
        weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        return self.out_proj(merge_heads(weights @ v)), weights
''')
    multi_head.EXERCISES["multi_head_attention"].check(notebook["MultiHeadAttention"])
    with pytest.raises(GradingError):
        multi_head.EXERCISES["multi_head_split_heads"].check(notebook["split_heads"])


def test_patch_embedding_and_vit_forward_with_wrong_earlier_pieces():
    notebook = _notebook('''
def patchify(images, patch_size):
    B, C, H, W = images.shape
    return images.reshape(B, -1, C * patch_size * patch_size)          # not patches at all
def patch_embedding(images, weight, bias, patch_size):
    tokens = patchify(images, patch_size) @ weight.T
    return tokens if bias is None else tokens + bias
''')
    vision_transformer.EXERCISES["vision_transformer_patch_embedding"].check(notebook["patch_embedding"])
    with pytest.raises(GradingError):
        vision_transformer.EXERCISES["vision_transformer_patchify"].check(notebook["patchify"])


@pytest.mark.parametrize("grade_id,catalogue,piece", [
    ("self_attention_softmax", self_attention, "softmax"),
    ("rnn_limits_step", rnn_limits, "rnn_step"),
    ("multi_head_split_heads", multi_head, "split_heads"),
    ("multi_head_merge_heads", multi_head, "merge_heads"),
    ("vision_transformer_patchify", vision_transformer, "patchify"),
    ("vision_transformer_patch_embedding", vision_transformer, "patch_embedding"),
    ("vision_transformer_class_token", vision_transformer, "prepend_class_token"),
])
def test_a_piece_cannot_answer_its_own_exercise(grade_id, catalogue, piece):
    notebook = _notebook(f"from course_utils.grading import parts\n"
                         f"def answer(*args, **kwargs):\n    return parts.{piece}(*args, **kwargs)\n")
    with pytest.raises(GradingError, match="not allowed|forbidden|may not|off limits|must not"):
        catalogue.EXERCISES[grade_id].check(notebook["answer"])


@pytest.mark.parametrize("piece,reference,args", [
    ("rnn_step", rnn_reference.rnn_step, (torch.randn(2, 3), torch.randn(2, 4), torch.randn(3, 4),
                                          torch.randn(4, 4), torch.randn(4))),
    ("patchify", vit_reference.patchify, (torch.randn(2, 3, 4, 6), 2)),
    ("patch_embedding", vit_reference.patch_embedding, (torch.randn(2, 3, 4, 6), torch.randn(5, 12),
                                                        torch.randn(5), 2)),
])
def test_each_piece_equals_the_reference(piece, reference, args):
    torch.testing.assert_close(parts.PIECES[piece](*args), reference(*args))


def test_a_stand_in_launders_nothing_outside_a_substitution():
    """The exemption from the guard holds only inside a substitution and only for the course's
    pieces: wrapping a piece, or a forbidden function, by hand gains a student nothing."""
    notebook = _notebook("from course_utils.grading import parts\n"
                         "def softmax(x, axis=-1):\n"
                         "    return parts._in_place_of(parts.PIECES['softmax'])(x, axis)\n")
    with pytest.raises(GradingError, match="not allowed|forbidden|may not|off limits|must not"):
        self_attention.EXERCISES["self_attention_softmax"].check(notebook["softmax"])
    notebook = _notebook(WRONG_SOFTMAX, "import scipy.special\nfrom course_utils.grading import parts\n"
                         "def attention_numpy(Q, K, V):\n"
                         "    w = parts._in_place_of(scipy.special.softmax)(Q @ K.T / np.sqrt(Q.shape[-1]), axis=-1)\n"
                         "    return w @ V, w\n")
    with pytest.raises(GradingError, match="not allowed|forbidden|may not|off limits|must not"):
        self_attention.EXERCISES["self_attention_attention_numpy"].check(notebook["attention_numpy"])
