"""Property checks: what must hold of any correct answer, whatever its numbers.

Visible tests speak through these (and small worked examples), since the student's release
has no reference answers to compare with. Both take tensors, so PyTorch is loaded by then:
it is imported inside them, so that importing `course_utils.grading` does not load it.
"""
from . import tamper
from .checks import mismatch
from .errors import GradingError


def assert_permutation_equivariant(fn, x, seed=0, name="your self-attention", atol=1e-5):
    """fn maps a sequence x of shape (..., T, d) to (..., T, d'); permuting the T positions of the
    input must permute the output rows the same way and change nothing else."""
    import torch

    tamper.verify()
    generator = torch.Generator().manual_seed(seed)
    perm = torch.randperm(x.shape[-2], generator=generator)
    out = fn(x)
    out_of_permuted = fn(x[..., perm, :])
    problem = mismatch(out_of_permuted, out[..., perm, :], atol=atol, name="f(permuted x)")
    if problem:
        raise GradingError(
            f"{name} is not permutation-equivariant: shuffling the input positions should shuffle "
            f"the output rows in the same way. {problem}"
        )


def assert_causal(fn, x, name="your layer", seed=0, atol=1e-6):
    """fn maps (B, T, d) to (B, T, d'); the output at position t may depend only on inputs at
    positions <= t. Perturbs every future step in turn and checks that the past does not move."""
    import torch

    tamper.verify()
    generator = torch.Generator().manual_seed(seed)
    base = fn(x)
    T = x.shape[-2]
    for t in range(T - 1):
        changed = x.clone()
        changed[..., t + 1:, :] += torch.randn(changed[..., t + 1:, :].shape, generator=generator, dtype=x.dtype)
        after = fn(changed)
        problem = mismatch(after[..., : t + 1, :], base[..., : t + 1, :], atol=atol, name="the past outputs")
        if problem:
            raise GradingError(
                f"{name} looks into the future: changing inputs after position {t} changed the output "
                f"at or before position {t}. {problem}"
            )
