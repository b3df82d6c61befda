"""Second correct implementations of notebook 14's exercises, written differently from the
reference (course_utils/reference/induction_heads.py): the exercise's tests must pass them too
(tests/exercises/test_mutations.py)."""
import torch
import torch.nn.functional as F


# ---------------------------------------------------------------- previous_token_score
def previous_by_slicing(patterns):
    """The sub-diagonal read by slicing rows 1.. and columns ..T-1 and taking their diagonal."""
    return patterns[..., 1:, :-1].diagonal(dim1=-2, dim2=-1).mean(-1)


def previous_by_mask(patterns):
    """A boolean mask of the (t, t - 1) entries, summed and divided by T - 1."""
    T = patterns.shape[-1]
    below = torch.eye(T, dtype=torch.bool).roll(-1, dims=-1).tril(-1)  # True at (t, t - 1)
    return (patterns * below).sum((-2, -1)) / (T - 1)


# ---------------------------------------------------------------- induction_score
def induction_by_diagonal(patterns, span):
    """The diagonal span - 1 below the main one, from its second entry on (queries span ... 2 span - 1)."""
    return torch.diagonal(patterns, offset=1 - span, dim1=-2, dim2=-1)[..., 1:].mean(-1)


def induction_by_loop(patterns, span):
    """A Python loop over the queries of the second copy."""
    total = 0.0
    for t in range(span, 2 * span):
        total = total + patterns[..., t, t - span + 1]
    return total / span


# ---------------------------------------------------------------- per_token_loss
def loss_with_cross_entropy(logits, tokens):
    """PyTorch's cross_entropy, unreduced, with the vocabulary moved to dim 1 as it expects."""
    return F.cross_entropy(logits[..., :-1, :].movedim(-1, 1) if logits.dim() > 2 else logits[:-1],
                           tokens[..., 1:], reduction="none")


def loss_logsumexp(logits, tokens):
    """logsumexp over the vocabulary minus the logit of the next token."""
    scores = logits[..., :-1, :]
    picked = torch.take_along_dim(scores, tokens[..., 1:, None], dim=-1)[..., 0]
    return torch.logsumexp(scores, dim=-1) - picked


# ---------------------------------------------------------------- ablated_loss
def ablation_by_silencing_a_copy(model, tokens, span, layer, head):
    """A deep copy of the model whose head writes nothing (its columns of W_O zeroed), and the loss
    of the second copy's targets from F.cross_entropy."""
    import copy
    other = copy.deepcopy(model)
    d = other.layers[layer].head_dim
    with torch.no_grad():
        other.layers[layer].W_O.weight[:, head * d:(head + 1) * d] = 0.0
        logits = other(tokens)
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, span:-1].reshape(-1, V), tokens[:, span + 1:].reshape(-1))


def ablation_with_mask_from_eye(model, tokens, span, layer, head):
    """The mask as one minus a one-hot matrix; the per-token loss of the notebook's exercise 3,
    averaged over the targets after the second copy's first."""
    layers, heads = len(model.layers), model.layers[0].num_heads
    mask = 1.0 - F.one_hot(torch.tensor(layer * heads + head), layers * heads).float().view(layers, heads)
    with torch.no_grad():
        logits = model(tokens, head_mask=mask)
    log_probs = torch.log_softmax(logits[..., :-1, :], dim=-1)
    losses = -log_probs.gather(-1, tokens[..., 1:, None]).squeeze(-1)
    return losses[:, span:].mean()


ALTERNATIVES = {
    "induction_heads_previous_token": [previous_by_slicing, previous_by_mask],
    "induction_heads_induction_score": [induction_by_diagonal, induction_by_loop],
    # the example's numbers: L = 12, t = 17, key 17 - 12 + 1 = 6
    "induction_heads_position_guess": [6, 6.0],
    "induction_heads_per_token_loss": [loss_with_cross_entropy, loss_logsumexp],
    "induction_heads_ablation": [ablation_by_silencing_a_copy, ablation_with_mask_from_eye],
}
