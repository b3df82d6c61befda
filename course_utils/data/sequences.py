"""Toy sequence-to-sequence tasks made on the fly: copy a sequence, or reverse it.

Made for the seq2seq bottleneck demo (notebook 01) and reusable by the attention notebooks:
the source is a random string of symbols, the target is the same string (copy) or the string
read backwards (reverse). Both are trivial for a model that can look back at the source, and
hard for one that must squeeze the whole source into a single fixed-size vector first.

Tokens are integers. Symbols are 0 .. n_symbols - 1; the one extra token `bos(n_symbols)`
(= n_symbols) starts the decoder. Every batch holds sequences of one length, so there is no
padding. Everything is seeded: the same seed gives the same tensors on every machine.
"""
import torch

__all__ = ["TASKS", "bos", "target_for", "make_batch", "batches", "fixed_test_set"]

TASKS = ("copy", "reverse")


def bos(n_symbols):
    """The begin-of-sequence token that the decoder reads first (one past the last symbol)."""
    return n_symbols


def target_for(task, source):
    """The target of `task` for a (B, T) source: the same tokens, or the tokens reversed in time."""
    if task == "copy":
        return source.clone()
    if task == "reverse":
        return source.flip(-1)
    raise ValueError(f"unknown task {task!r}; choose one of {TASKS}")


def make_batch(task, batch_size, length, n_symbols, generator):
    """One batch of (source, target), both int64 of shape (batch_size, length)."""
    if length < 1 or batch_size < 1 or n_symbols < 2:
        raise ValueError("need length >= 1, batch_size >= 1 and n_symbols >= 2")
    source = torch.randint(0, n_symbols, (batch_size, length), generator=generator)
    return source, target_for(task, source)


def batches(task, batch_size, lengths, n_symbols, seed=0):
    """An endless, seeded stream of batches; each batch's length is drawn from `lengths`."""
    generator = torch.Generator().manual_seed(seed)
    lengths = list(lengths)
    while True:
        length = lengths[int(torch.randint(0, len(lengths), (1,), generator=generator))]
        yield make_batch(task, batch_size, length, n_symbols, generator)


def fixed_test_set(task, lengths, per_length, n_symbols, seed=12345):
    """{length: (source, target)}: the same held-out sequences on every call."""
    generator = torch.Generator().manual_seed(seed)
    return {length: make_batch(task, per_length, length, n_symbols, generator) for length in lengths}
