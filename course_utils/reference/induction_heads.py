"""Reference answers of notebook 14 (induction heads).

Instructor side. The measurements the student writes to find induction heads in a trained
model (`course_utils.induction`), all taken on a *repeated* sequence: `span` random tokens
followed by the same `span` tokens again, so the sequence has T = 2 * span positions.

* `previous_token_score`: how much of its attention each query puts on the position just before
  it; 1 for a head that only looks one step back.
* `induction_score`: in the second copy, how much of its attention the query at t puts on
  t - span + 1, the position right after the earlier occurrence of its own token (the token to
  copy); 1 for a perfect induction head.
* `per_token_loss`: the cross-entropy of every next token, and `in_context_loss` its mean over
  the second copy's predictable tokens.
* `ablated_loss` / `ablation_table`: the in-context loss with one head's output set to zero.

Attention patterns are (..., T, T) with rows = queries summing to one (causal: zero above the
diagonal); scores average over the queries they concern and keep the leading dimensions.
"""
import torch
import torch.nn.functional as F

__all__ = ["previous_token_score", "induction_score", "per_token_loss", "in_context_loss",
           "ablated_loss", "ablation_table"]


def previous_token_score(patterns):
    """Mean over query positions t = 1 ... T - 1 of patterns[..., t, t - 1]. Shape (...,)."""
    return torch.diagonal(patterns, offset=-1, dim1=-2, dim2=-1).mean(dim=-1)


def induction_score(patterns, span):
    """Mean over the second copy's queries t = span ... 2 span - 1 of patterns[..., t, t - span + 1].

    Shape of patterns: (..., 2 span, 2 span), measured on a sequence made of `span` tokens and
    their copy. Returns shape (...,)."""
    T = patterns.shape[-1]
    if T != 2 * span:
        raise ValueError(f"a repeated sequence of span {span} has {2 * span} positions, the patterns have {T}")
    # Diagonal offset -(span - 1) holds patterns[t, t - span + 1] for t = span - 1 ... T - 1; keep t >= span.
    return torch.diagonal(patterns, offset=-(span - 1), dim1=-2, dim2=-1)[..., 1:].mean(dim=-1)


def per_token_loss(logits, tokens):
    """loss[..., t] = -log softmax(logits[..., t, :])[tokens[..., t + 1]]: how surprised the model
    is by each next token. Shapes: logits (..., T, V), tokens (..., T); returns (..., T - 1)."""
    log_probs = F.log_softmax(logits[..., :-1, :].float(), dim=-1)
    return -log_probs.gather(-1, tokens[..., 1:, None]).squeeze(-1)


def in_context_loss(logits, tokens, span):
    """Mean per-token loss over the second copy's tokens that copying can predict: the targets at
    positions span + 1 ... 2 span - 1 (the copy's first token follows the first copy's last and
    is not predictable). A single number (a 0-d tensor), averaged over every sequence."""
    return per_token_loss(logits, tokens)[..., span:].mean()


def ablated_loss(model, tokens, span, layer, head):
    """`in_context_loss` of `model` (an `AttentionOnlyTransformer`) on `tokens` with the output of
    head `head` of layer `layer` set to zero, every other head untouched."""
    head_mask = torch.ones(len(model.layers), model.layers[0].num_heads)
    head_mask[layer, head] = 0.0
    with torch.no_grad():
        return in_context_loss(model(tokens, head_mask=head_mask), tokens, span)


def ablation_table(model, tokens, span):
    """(layers, heads): `ablated_loss` of every head."""
    return torch.stack([torch.stack([ablated_loss(model, tokens, span, layer, head)
                                     for head in range(block.num_heads)])
                        for layer, block in enumerate(model.layers)])
