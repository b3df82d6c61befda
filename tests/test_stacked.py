"""course_utils.stacked: N copies of a model trained as one batched model stay N independent models."""
import pytest
import torch
from torch import nn

from course_utils.models import transformer_seq2seq as ts
from course_utils.stacked import Stack, adam_step, pad_stack


def _copies(n, **config):
    models = []
    for seed in range(n):
        torch.manual_seed(seed)
        models.append(ts.TransformerSeq2Seq(**config))
    return models


def _batch(n, B=3, S=7, T=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 20, (n, B, S), generator=g)
    lengths = torch.randint(2, S + 1, (n, B), generator=g)
    mask = torch.arange(S) < lengths[..., None]
    return src.masked_fill(~mask, 0), mask, torch.randint(0, 14, (n, B, T), generator=g)


@pytest.mark.parametrize("norm_first", [True, False])
def test_stack_forward_equals_each_copy_alone(norm_first):
    models = _copies(3, d_model=16, num_heads=2, num_layers=1, d_ff=32, norm_first=norm_first, positions_from_end=True)
    stack = Stack(models)
    src, mask, tgt = _batch(3)
    together = stack(src, mask, tgt)
    assert together.shape == (3, 3, 4, 14)
    for i, model in enumerate(models):
        torch.testing.assert_close(together[i], model(src[i], mask[i], tgt[i]), atol=1e-5, rtol=1e-5)


def test_explicit_attention_equals_the_fused_kernel():
    torch.manual_seed(0)
    layer = ts.Attention(8, 2)
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    fused = layer(x, memory, mask)
    layer.explicit = True
    torch.testing.assert_close(layer(x, memory, mask), fused, atol=1e-6, rtol=1e-5)
    assert layer.weights is None  # explicit is not keep_weights


def test_summed_loss_gives_each_copy_its_own_gradient_and_adam_equals_torch_adam():
    models = _copies(2, d_model=8, num_heads=2, num_layers=1, d_ff=16)
    alone = _copies(2, d_model=8, num_heads=2, num_layers=1, d_ff=16)
    stack = Stack(models)
    rates = torch.tensor([1e-2, 3e-3])  # each copy its own learning rate
    optimisers = [torch.optim.Adam(m.parameters(), lr=float(r), betas=(0.9, 0.98)) for m, r in zip(alone, rates)]
    state = {}
    for step in range(3):
        src, mask, tgt = _batch(2, seed=step)
        losses = torch.stack([nn.functional.cross_entropy(out.transpose(1, 2), t)
                              for out, t in zip(stack(src, mask, tgt), tgt)])
        losses.sum().backward()
        adam_step(stack.params, state, rates, betas=(0.9, 0.98))
        for i, (model, optimiser) in enumerate(zip(alone, optimisers)):
            loss = nn.functional.cross_entropy(model(src[i], mask[i], tgt[i]).transpose(1, 2), tgt[i])
            torch.testing.assert_close(losses[i].detach(), loss.detach(), atol=1e-5, rtol=1e-5)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    for i, model in enumerate(alone):
        for name, tensor in model.named_parameters():
            torch.testing.assert_close(stack.params[name][i].detach(), tensor.detach(), atol=1e-5, rtol=1e-4)
    # and the weights go back into modules
    back = stack.unstack(_copies(2, d_model=8, num_heads=2, num_layers=1, d_ff=16))
    for name, tensor in back[1].named_parameters():
        assert torch.equal(tensor, stack.params[name][1].detach())


def test_pad_stack_pads_the_last_dimension():
    out = pad_stack([torch.ones(2, 3, dtype=torch.long), torch.ones(2, 5, dtype=torch.long)], value=0)
    assert out.shape == (2, 2, 5)
    assert out[0, :, 3:].eq(0).all() and out[1].eq(1).all()


def test_stack_refuses_nothing():
    with pytest.raises(ValueError):
        Stack([])
