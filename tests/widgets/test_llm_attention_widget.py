"""The pure functions behind notebook 13's demos: the head grouping, and an exact count of the
bytes autograd saves for the backward pass."""
import math

import matplotlib
import pytest
import torch

from course_utils.widgets import llm_attention as demo

matplotlib.use("Agg")


@pytest.mark.parametrize("h, h_kv, expected", [(8, 2, [0, 0, 0, 0, 1, 1, 1, 1]), (4, 4, [0, 1, 2, 3]),
                                               (6, 1, [0] * 6), (6, 3, [0, 0, 1, 1, 2, 2])])
def test_query_heads_read_their_group_s_kv_head(h, h_kv, expected):
    assert demo.kv_head_of_query(h, h_kv) == expected


def test_kv_heads_must_divide_the_query_heads():
    with pytest.raises(ValueError, match="multiple"):
        demo.kv_head_of_query(6, 4)


def _naive(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


@pytest.mark.parametrize("T, d", [(16, 4), (64, 8), (128, 2)])
def test_naive_attention_saves_the_inputs_and_one_t_by_t_matrix(T, d):
    q, k, v = (torch.randn(T, d, requires_grad=True) for _ in range(3))
    out, saved = demo.saved_tensor_bytes(_naive, q, k, v)
    assert saved == 3 * 4 * T * d + 4 * T * T  # q, k, v and the weights, float32, each storage once
    assert torch.equal(out, _naive(q, k, v))


def test_a_function_saving_only_out_and_lse_is_counted_exactly():
    from course_utils.reference import llm_attention as ref

    Saved = ref.OutAndLseAttention

    T, d = 256, 8
    q, k, v = (torch.randn(1, 1, T, d, requires_grad=True) for _ in range(3))
    _, saved = demo.saved_tensor_bytes(Saved.apply, q, k, v)
    assert saved == 4 * 4 * T * d + 4 * T


def test_the_count_is_the_same_every_time_and_nothing_is_saved_without_grad():
    q, k, v = (torch.randn(32, 4, requires_grad=True) for _ in range(3))
    assert demo.saved_tensor_bytes(_naive, q, k, v)[1] == demo.saved_tensor_bytes(_naive, q, k, v)[1]
    with torch.no_grad():
        assert demo.saved_tensor_bytes(_naive, q, k, v)[1] == 0


def test_views_of_one_storage_count_once():
    x = torch.randn(100, requires_grad=True)
    _, saved = demo.saved_tensor_bytes(lambda t: (t[:50] * t[50:]).sum(), x)
    assert saved == 400


def test_drawing_with_and_without_a_mask():
    import matplotlib.pyplot as plt
    mask = torch.ones(8, 8, dtype=torch.bool).tril() & ~torch.ones(8, 8, dtype=torch.bool).tril(-3)
    axes = demo.draw_heads_and_window(8, 2, mask, 3)
    assert "3" in axes[1].get_title() and len(axes[1].images) == 1
    axes = demo.draw_heads_and_window(4, 1, None, 3, message="solve exercise 2")
    assert axes[1].texts[0].get_text() == "solve exercise 2"
    plt.close("all")


def test_blocked_function_calls_the_given_backward_once_per_block_pair():
    """The notebook's promise: the student's attention_backward runs on every (query block, key
    block) pair, with causal=True only on the square diagonal blocks, and the sums are the
    gradients (here with the reference's attention_backward as the per-block function)."""
    from course_utils.reference import llm_attention as ref

    calls = []

    def counting(q, k, v, out, lse, grad_out, causal=False):
        calls.append((q.shape[-2], k.shape[-2], causal))
        return ref.attention_backward(q, k, v, out, lse, grad_out, causal)

    Blocked = demo.blocked_attention_function(counting, block_size=4)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 10, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    grad_out = torch.randn(1, 2, 10, 3, generator=g, dtype=torch.float64)
    got = torch.autograd.grad(Blocked.apply(q, k, v, True), (q, k, v), grad_out)
    assert sorted(calls) == sorted([(4, 4, True), (4, 4, False), (4, 4, True), (2, 4, False), (2, 4, False),
                                    (2, 2, True)])
    s = (q @ k.transpose(-2, -1) / math.sqrt(3)).masked_fill(~torch.ones(10, 10, dtype=torch.bool).tril(), -math.inf)
    want = torch.autograd.grad(torch.softmax(s, -1) @ v, (q, k, v), grad_out)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
