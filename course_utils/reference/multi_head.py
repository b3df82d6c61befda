"""Reference answers of notebook 07 (multi-head attention) not already in `attention.py`.

Instructor side. `split_heads`, `merge_heads` and `MultiHeadAttention` are in
`course_utils.reference.attention`; this module adds the parameter count.
"""

__all__ = ["attention_weight_count", "attention_parameter_count"]


def attention_parameter_count(d_model, num_heads, bias=True):
    """The number of trainable parameters of multi-head attention with d_model features.

    W_Q, W_K, W_V each map d_model to num_heads * d_k = d_model features (the heads' slices
    side by side), and W_O maps d_model to d_model: 4 d_model^2 weights, plus 4 d_model biases
    when bias=True. The count does not depend on num_heads, which only decides how the
    d_model features are cut into heads; it equals single-head attention of the same d_model.
    Raises ValueError if num_heads does not divide d_model.
    """
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def attention_weight_count(batch, tokens, num_heads):
    """Attention weights a self-attention layer computes: per sentence and head, one per (query,
    key) pair, whatever the head width. Notebook 07's think-first question: 2 * 8 * 10 * 10."""
    return batch * num_heads * tokens * tokens
