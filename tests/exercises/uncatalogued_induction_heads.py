"""Wrong answers to notebook 14's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import torch
import torch.nn.functional as F


# ---------------------------------------------------------------- previous_token_score
def prev_max_not_mean(patterns):
    """The largest attention one step back instead of the average."""
    return torch.diagonal(patterns, offset=-1, dim1=-2, dim2=-1).amax(-1)


def prev_two_back(patterns):
    """Two positions back."""
    return torch.diagonal(patterns, offset=-2, dim1=-2, dim2=-1).mean(-1)


def prev_last_query_only(patterns):
    """Only the last query's attention on the key before it."""
    return patterns[..., -1, -2]


def prev_argmax_fraction(patterns):
    """The fraction of queries whose strongest key is the one before (a hard count)."""
    T = patterns.shape[-1]
    hits = patterns[..., 1:, :].argmax(-1) == torch.arange(T - 1)
    return hits.to(patterns.dtype).mean(-1)


# ---------------------------------------------------------------- induction_score
def ind_whole_band(patterns, span):
    """The whole band span - 1 below the diagonal, all of its entries."""
    return torch.diagonal(patterns, offset=1 - span, dim1=-2, dim2=-1).mean(-1)


def ind_offset_span_plus_one(patterns, span):
    """Looks at t - span - 1."""
    rows = torch.arange(span + 1, 2 * span)
    return patterns[..., rows, rows - span - 1].mean(-1)


def ind_max(patterns, span):
    """The largest attention on the token to copy over the second copy."""
    rows = torch.arange(span, 2 * span)
    return patterns[..., rows, rows - span + 1].amax(-1)


def ind_first_copy_mass(patterns, span):
    """All the attention the second copy puts anywhere in the first copy."""
    return patterns[..., span:, :span].sum(-1).mean(-1)


# ---------------------------------------------------------------- per_token_loss
def loss_log2(logits, tokens):
    """In bits instead of nats."""
    log_probs = torch.log_softmax(logits[..., :-1, :], dim=-1) / torch.log(torch.tensor(2.0))
    return -log_probs.gather(-1, tokens[..., 1:, None]).squeeze(-1)


def loss_all_positions_padded(logits, tokens):
    """T values: the last position given a loss of 0."""
    log_probs = torch.log_softmax(logits[..., :-1, :], dim=-1)
    losses = -log_probs.gather(-1, tokens[..., 1:, None]).squeeze(-1)
    return torch.cat([losses, torch.zeros_like(losses[..., :1])], dim=-1)


def loss_one_minus_probability(logits, tokens):
    """1 - p of the next token."""
    probs = torch.softmax(logits[..., :-1, :], dim=-1)
    return 1 - probs.gather(-1, tokens[..., 1:, None]).squeeze(-1)


def loss_sigmoid(logits, tokens):
    """Binary cross-entropy of the next token's logit alone."""
    picked = logits[..., :-1, :].gather(-1, tokens[..., 1:, None]).squeeze(-1)
    return F.softplus(-picked)


# ---------------------------------------------------------------- ablated_loss
def _losses(logits, tokens):
    log_probs = torch.log_softmax(logits[..., :-1, :], dim=-1)
    return -log_probs.gather(-1, tokens[..., 1:, None]).squeeze(-1)


def abl_returns_float(model, tokens, span, layer, head):
    """The right number, as a Python float."""
    mask = torch.ones(len(model.layers), model.layers[0].num_heads)
    mask[layer, head] = 0.0
    with torch.no_grad():
        return _losses(model(tokens, head_mask=mask), tokens)[..., span:].mean().item()


def abl_difference(model, tokens, span, layer, head):
    """How much the loss rises, instead of the loss itself."""
    mask = torch.ones(len(model.layers), model.layers[0].num_heads)
    with torch.no_grad():
        clean = _losses(model(tokens), tokens)[..., span:].mean()
        mask[layer, head] = 0.0
        return _losses(model(tokens, head_mask=mask), tokens)[..., span:].mean() - clean


def abl_half_mask(model, tokens, span, layer, head):
    """Halves the head instead of removing it."""
    mask = torch.ones(len(model.layers), model.layers[0].num_heads)
    mask[layer, head] = 0.5
    with torch.no_grad():
        return _losses(model(tokens, head_mask=mask), tokens)[..., span:].mean()


def abl_median(model, tokens, span, layer, head):
    """The median of the losses instead of their mean."""
    mask = torch.ones(len(model.layers), model.layers[0].num_heads)
    mask[layer, head] = 0.0
    with torch.no_grad():
        return _losses(model(tokens, head_mask=mask), tokens)[..., span:].median()


def abl_zeroes_weights_in_place(model, tokens, span, layer, head):
    """Silences the head by zeroing the model's own W_O columns (the model is changed for good)."""
    d = model.layers[layer].head_dim
    with torch.no_grad():
        model.layers[layer].W_O.weight[:, head * d:(head + 1) * d] = 0.0
        return _losses(model(tokens), tokens)[..., span:].mean()


UNCATALOGUED = {
    "induction_heads_previous_token": [prev_max_not_mean, prev_two_back, prev_last_query_only, prev_argmax_fraction],
    "induction_heads_induction_score": [ind_whole_band, ind_offset_span_plus_one, ind_max, ind_first_copy_mass],
    # key 6 is right for the example (L = 12, t = 17): negative, fractional, off by two, the next token's position
    "induction_heads_position_guess": [-6, 6.5, 8, 18, "6"],
    "induction_heads_per_token_loss": [loss_log2, loss_all_positions_padded, loss_one_minus_probability, loss_sigmoid],
    "induction_heads_ablation": [abl_returns_float, abl_difference, abl_half_mask, abl_median,
                                 abl_zeroes_weights_in_place],
}
WRONG_ANSWERS = UNCATALOGUED

# Wrong answers that PASS their test cell today (holes in the hidden tests): (grade_id, answer).
HOLES = []
