"""The counting references of notebook 05 (course_utils.reference.self_attention) against
PyTorch's own FLOP counter, and the crossover length against the counts it comes from."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from course_utils.reference import self_attention as ref


def _counted(n, d, projections):
    """FLOPs of a single-head attention layer (W_Q, W_K, W_V, W_O when projections), counted."""
    x = torch.zeros(1, n, d, device="meta")
    W = [torch.zeros(d, d, device="meta") for _ in range(4)]
    with FlopCounterMode(display=False) as counter:
        q, k, v = (x @ W[0], x @ W[1], x @ W[2]) if projections else (x, x, x)
        out = torch.softmax(q @ k.transpose(1, 2), dim=-1) @ v
        if projections:
            out @ W[3]
    return counter.get_total_flops()


@pytest.mark.parametrize("n, d", [(7, 5), (3, 11), (1000, 1000), (64, 768)])
@pytest.mark.parametrize("projections", [True, False])
def test_attention_flops_equals_the_counter(n, d, projections):
    got = ref.attention_flops(n, d, projections=projections)
    assert isinstance(got, int)
    assert got == _counted(n, d, projections)


def test_attention_flops_reproduces_the_slide_and_adds_the_projections():
    assert ref.attention_flops(1000, 1000, projections=False) == 4 * 10**9  # the slide's figure
    assert ref.attention_flops(1000, 1000) == 12 * 10**9


@pytest.mark.parametrize("d", [64, 1000, 768])
def test_crossover_length_is_where_products_and_projections_cost_the_same(d):
    n = ref.crossover_length(d)
    both = ref.attention_flops(n, d)
    products = ref.attention_flops(n, d, projections=False)
    assert products == both - products
    assert ref.attention_flops(n - 1, d, projections=False) < ref.attention_flops(n - 1, d) / 2
    assert ref.crossover_length() == 2 * ref.CROSSOVER_WIDTH
