"""Train several small models of the same shape at once, as one batched model.

Why: a comparison over seeds and designs (notebook 10's warm-up experiment: four arms, five
starting points each) trains many copies of a model far too small to keep a CPU busy; one step
of one copy is mostly Python and per-operation overhead, not arithmetic. Stacked along a new
leading dimension (`torch.func.stack_module_state`) and run through `torch.vmap`, N copies cost
one step's worth of operations on tensors N times as large: several times faster on one core
than N separate runs, and no worker processes.

The copies stay independent: each has its own weights, its own batches and its own learning
rate, and the loss that is differentiated is the *sum* of the copies' losses, so copy i's
gradient is exactly the gradient of its own loss. Adam is applied element by element, so one
Adam over the stacked weights is N Adams (`adam_step`, written out here because each copy may
have its own learning rate). What a copy computes equals what it computes alone up to float
rounding (a batched kernel adds in another order), not bit for bit.
"""
import copy

import torch
from torch.func import functional_call, stack_module_state

__all__ = ["Stack", "seeded_models", "adam_step", "pad_stack"]


class Stack:
    """N modules of identical structure as one: `params` and `buffers` are dicts of tensors with a
    leading dimension N (the parameters are leaves that require grad), `base` is a module of the
    same structure on the meta device, used only for its code. Sub-modules with an `explicit`
    attribute (`transformer_seq2seq.Attention`) compute attention written out in the stack, since
    vmap runs PyTorch's fused attention kernel once per copy."""

    def __init__(self, modules):
        modules = list(modules)
        if not modules:
            raise ValueError("Stack needs at least one module")
        self.params, self.buffers = stack_module_state(modules)
        self.base = copy.deepcopy(modules[0]).to("meta")
        for module in self.base.modules():
            if hasattr(module, "explicit"):  # the course's Attention: vmap batches its written-out form
                module.explicit = True
        self.size = len(modules)

    def __len__(self):
        return self.size

    def __call__(self, *args):
        """Every copy's forward at once: each argument has the leading dimension N (copy i gets
        args[...][i]), and so does the result."""
        def one(params, buffers, *inputs):
            return functional_call(self.base, (params, buffers), inputs, strict=True)
        return torch.vmap(one, randomness="different")(self.params, self.buffers, *args)

    def unstack(self, modules):
        """Copy the stacked weights back into `modules` (N modules of the same structure)."""
        with torch.no_grad():
            for i, module in enumerate(modules):
                for name, tensor in module.named_parameters():
                    tensor.copy_(self.params[name][i])
                for name, tensor in module.named_buffers():
                    tensor.copy_(self.buffers[name][i])
        return modules


def seeded_models(seeds, make):
    """[make() with PyTorch's generator seeded with each seed in turn]: one model per seed, its
    initial weights decided by that seed alone, without touching the caller's random state."""
    models = []
    with torch.random.fork_rng(devices=[]):
        for seed in seeds:
            torch.manual_seed(seed)
            models.append(make())
    return models


def adam_step(params, state, lr, betas=(0.9, 0.999), eps=1e-8):
    """One Adam step (Kingma & Ba 2015, as torch.optim.Adam without weight decay) on stacked
    weights, in place. `params`: the Stack's dict (their .grad set); `lr`: a tensor (N,) of each
    copy's learning rate; `state`: a dict kept between steps (start with {})."""
    beta1, beta2 = betas
    step = state["step"] = state.get("step", 0) + 1
    bias1, bias2 = 1 - beta1 ** step, 1 - beta2 ** step
    with torch.no_grad():
        for name, p in params.items():
            if p.grad is None:
                continue
            m = state.setdefault(("m", name), torch.zeros_like(p))
            v = state.setdefault(("v", name), torch.zeros_like(p))
            m.lerp_(p.grad, 1 - beta1)
            v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            denominator = (v / bias2).sqrt_().add_(eps)
            rate = (lr / bias1).to(p.dtype).reshape((-1,) + (1,) * (p.dim() - 1))
            p.addcdiv_(m * rate, denominator, value=-1.0)
            p.grad = None


def pad_stack(tensors, value=0):
    """Stack tensors whose shapes differ only in their last dimension, padding it with `value` to
    the longest: a batch per copy (copies draw batches of different source lengths)."""
    width = max(t.shape[-1] for t in tensors)
    return torch.stack([torch.nn.functional.pad(t, (0, width - t.shape[-1]), value=value) for t in tensors])
