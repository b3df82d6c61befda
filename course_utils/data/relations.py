"""A toy task with several relations to find at once, for the multi-head demo (notebook 07).

A sequence of random tokens; at every position the model must name three other tokens:

* "previous": the token just before it (position t - 1),
* "next": the token just after it (position t + 1),
* "first": the first token of the sequence (position 0).

Each answer sits at a different place, so one attention pattern cannot fetch all three: a model
with one head per relation can give each head one job. Positions where a relation has no
answer (the previous token of position 0, the next token of the last position) are marked
with IGNORE and left out of the loss.
"""
import torch

__all__ = ["RELATIONS", "IGNORE", "make_batch", "relation_targets", "source_positions"]

RELATIONS = ("previous", "next", "first")
IGNORE = -100  # the default ignore_index of torch.nn.functional.cross_entropy


def source_positions(relation, seq_len):
    """For each position t, the position that `relation` points at (or -1 where there is none).

    Returns a list of length seq_len, e.g. source_positions("previous", 4) == [-1, 0, 1, 2].
    """
    if relation == "previous":
        return [t - 1 for t in range(seq_len)]
    if relation == "next":
        return [t + 1 if t + 1 < seq_len else -1 for t in range(seq_len)]
    if relation == "first":
        return [0] * seq_len
    raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")


def relation_targets(tokens):
    """The answer of every relation at every position.

    Shape of tokens: (batch_size, seq_len) integers. Returns {relation: (batch_size, seq_len)}
    with IGNORE where the relation has no answer.
    """
    seq_len = tokens.shape[-1]
    targets = {}
    for relation in RELATIONS:
        source = torch.tensor(source_positions(relation, seq_len))
        target = tokens[:, source.clamp_min(0)]
        targets[relation] = target.masked_fill(source < 0, IGNORE)
    return targets


def make_batch(batch_size, seq_len=8, vocab_size=10, generator=None):
    """Random tokens (batch_size, seq_len) in 0..vocab_size-1 and their relation targets."""
    tokens = torch.randint(vocab_size, (batch_size, seq_len), generator=generator)
    return tokens, relation_targets(tokens)
