"""course_utils.optim trains bit for bit as torch.optim does, in every way the course uses it,
and without importing TorchDynamo (the reason it exists)."""
import subprocess
import sys

import pytest
import torch

from course_utils import optim

STEPS = 40


def small_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 3), torch.nn.Linear(3, 5, bias=False))


def train(model, optimizer, schedule=None, lr_at=None, frozen=()):
    """STEPS seeded steps; parameters named in `frozen` get no gradient (torch.optim skips them).
    Returns the (lr, betas) the optimiser held at each step."""
    generator = torch.Generator().manual_seed(1)
    for name, p in model.named_parameters():
        p.requires_grad_(name not in frozen)
    seen = []
    for step in range(STEPS):
        if lr_at is not None:
            optimizer.param_groups[0]["lr"] = lr_at(step)
        x = torch.randn(8, 6, generator=generator)
        loss = (model(x) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seen.append((optimizer.param_groups[0]["lr"], optimizer.param_groups[0]["betas"]))
        if schedule is not None:
            schedule.step()
    return seen


def assert_same_weights(ours, theirs):
    for (name, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert torch.equal(a, b), f"{name} differs by {(a - b).abs().max().item():.3g}"


CASES = {
    "adam": (lambda p: optim.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01)),
    "adam_fused_betas": (lambda p: optim.Adam(p, lr=3e-3, betas=(0.9, 0.98), fused=True),
                         lambda p: torch.optim.Adam(p, lr=3e-3, betas=(0.9, 0.98), fused=True)),
    "adam_weight_decay": (lambda p: optim.Adam(p, lr=0.01, weight_decay=0.1),
                          lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1)),
    "adamw": (lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.05),
              lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.05)),
    "adamw_fused": (lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.05, fused=True),
                    lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.05, fused=True)),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("variant", ["plain", "lr_changed_each_step", "a_frozen_layer"])
def test_the_same_weights_as_torch_optim_after_every_step(case, variant):
    ours_of, theirs_of = CASES[case]
    options = {"plain": {}, "lr_changed_each_step": {"lr_at": lambda step: 0.02 / (1 + step)},
               "a_frozen_layer": {"frozen": ("3.weight", "3.bias")}}[variant]
    ours, theirs = small_model(), small_model()
    train(ours, ours_of(ours.parameters()), **options)
    train(theirs, theirs_of(theirs.parameters()), **options)
    assert_same_weights(ours, theirs)
    if variant == "a_frozen_layer":  # untouched, as torch.optim leaves them
        assert_same_weights(ours[3], small_model()[3])


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("total, pct_start", [(STEPS, 0.15), (STEPS, 0.3), (7 * STEPS, 0.5)])
def test_one_cycle_gives_torch_optim_s_learning_rates_momenta_and_weights(fused, total, pct_start):
    ours, theirs = small_model(), small_model()
    ours_optimizer = optim.AdamW(ours.parameters(), lr=3e-3, weight_decay=0.05, fused=fused)
    theirs_optimizer = torch.optim.AdamW(theirs.parameters(), lr=3e-3, weight_decay=0.05, fused=fused)
    ours_seen = train(ours, ours_optimizer, optim.OneCycle(ours_optimizer, 3e-3, total, pct_start=pct_start))
    theirs_seen = train(theirs, theirs_optimizer, torch.optim.lr_scheduler.OneCycleLR(
        theirs_optimizer, max_lr=3e-3, total_steps=total, pct_start=pct_start))
    assert ours_seen == theirs_seen  # floats compared exactly
    assert_same_weights(ours, theirs)


def test_one_cycle_refuses_a_step_past_its_end():
    optimizer = optim.Adam(small_model().parameters())
    schedule = optim.OneCycle(optimizer, 0.01, 3)
    for _ in range(3):
        schedule.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        schedule.step()


@pytest.mark.slow
def test_training_with_it_never_imports_torchdynamo():
    script = """
import sys, torch
from course_utils import optim
model = torch.nn.Linear(3, 2)
for make in (lambda p: optim.Adam(p, fused=True), lambda p: optim.AdamW(p), optim.Adam):
    optimizer = make(model.parameters())
    schedule = optim.OneCycle(optimizer, 0.01, 5)
    for _ in range(5):
        optimizer.zero_grad()
        model(torch.ones(4, 3)).sum().backward()
        optimizer.step()
        schedule.step()
print("torch._dynamo" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
