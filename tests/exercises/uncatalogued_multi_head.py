"""Wrong answers to notebook 07's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import math

import numpy as np
import torch
from torch import nn


# ---------------------------------------------------------------- split_heads
def split_plain_reshape(x, num_heads):
    """Reshapes straight to (B, h, T, d_k): whole tokens go to head 0."""
    B, T, d = x.shape
    return x.reshape(B, num_heads, T, d // num_heads)


def split_interleaved(x, num_heads):
    """Cuts the features as (d_k, h): head i gets features i, i + h, i + 2h, ..."""
    B, T, d = x.shape
    return x.reshape(B, T, d // num_heads, num_heads).permute(0, 3, 1, 2)


def split_no_transpose(x, num_heads):
    """Forgets the transpose: (B, T, h, d_k)."""
    B, T, d = x.shape
    return x.reshape(B, T, num_heads, d // num_heads)


def split_batch_mixed(x, num_heads):
    """Folds batch and tokens together and unfolds them in the wrong order: right only for B = 1."""
    B, T, d = x.shape
    return x.reshape(B * T, num_heads, d // num_heads).transpose(0, 1).reshape(B, num_heads, T, d // num_heads)


def split_chunk_tokens(x, num_heads):
    """Chunks along the token axis instead of the features."""
    return torch.stack(x.chunk(num_heads, dim=1), dim=1)


def split_reversed_heads(x, num_heads):
    """Numbers the heads from the last block of features: head 0 gets the last d_k features."""
    B, T, d = x.shape
    return x.reshape(B, T, num_heads, d // num_heads).transpose(1, 2).flip(1)


def split_hardcoded(x, num_heads):
    """Gaming: the visible worked example hard-coded, a right-shaped zero tensor otherwise."""
    B, T, d = x.shape
    if tuple(x.shape) == (1, 2, 6) and num_heads == 3:
        return torch.tensor([[[[0.0, 1], [6, 7]], [[2, 3], [8, 9]], [[4, 5], [10, 11]]]])
    return torch.zeros(B, num_heads, T, d // num_heads)


def split_detached(x, num_heads):
    """Right numbers, but goes through NumPy: the gradient no longer reaches x."""
    B, T, d = x.shape
    arr = x.detach().numpy().reshape(B, T, num_heads, d // num_heads).transpose(0, 2, 1, 3)
    return torch.from_numpy(np.ascontiguousarray(arr))


def split_float32(x, num_heads):
    """Right numbers, but always float32: a float64 input loses its precision."""
    B, T, d = x.shape
    return x.float().reshape(B, T, num_heads, d // num_heads).transpose(1, 2)


def split_dk_T_swapped(x, num_heads):
    """Returns (B, h, d_k, T): the right shape only when d_k == T, as in the worked example."""
    B, T, d = x.shape
    return x.reshape(B, T, num_heads, d // num_heads).permute(0, 2, 3, 1)


def split_silences_grading(x, num_heads):
    """Gaming: replaces the grading's comparisons with no-ops, then returns a plain reshape."""
    import course_utils.grading as grading
    for name in ("assert_close", "assert_shape", "assert_true"):
        setattr(grading, name, lambda *args, **kwargs: None)
    B, T, d = x.shape
    return x.reshape(B, num_heads, T, d // num_heads)


def split_patches_allclose(x, num_heads):
    """Gaming: monkeypatches torch.allclose and numpy.allclose to always say True."""
    torch.allclose = lambda *args, **kwargs: True
    np.allclose = lambda *args, **kwargs: True
    B, T, d = x.shape
    return x.reshape(B, num_heads, T, d // num_heads)


class _Agreeable(torch.Tensor):
    """A tensor whose comparisons all say 'equal'."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("allclose", "equal"):
            return True
        if name in ("isclose", "eq", "__eq__"):
            return torch.ones(args[0].shape, dtype=torch.bool)
        return super().__torch_function__(func, types, args, kwargs or {})


def split_agreeable_subclass(x, num_heads):
    """Gaming: a zero tensor of the right shape, of a subclass whose comparisons always agree."""
    B, T, d = x.shape
    return torch.zeros(B, num_heads, T, d // num_heads).as_subclass(_Agreeable)


# ---------------------------------------------------------------- merge_heads
def merge_plain_reshape(x):
    """Reshapes straight to (B, T, h*d_k) without bringing the tokens in front."""
    B, h, T, dk = x.shape
    return x.reshape(B, T, h * dk)


def merge_interleaved(x):
    """Concatenates the features as (d_k, h): interleaves the heads."""
    B, h, T, dk = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, h * dk)


def merge_view_after_transpose(x):
    """view after a transpose: refuses a non-contiguous tensor."""
    B, h, T, dk = x.shape
    return x.transpose(1, 2).view(B, T, h * dk)


def merge_batch_one(x):
    """Right for batch 1 only: merges x[0] and adds the batch axis back."""
    B, h, T, dk = x.shape
    return x[0].transpose(0, 1).reshape(1, T, h * dk).expand(B, T, h * dk)


def merge_hardcoded(x):
    """Gaming: the visible example hard-coded, the written-out inverse of the visible split otherwise."""
    if tuple(x.shape) == (1, 3, 2, 2):
        return torch.tensor([[[0.0, 1, 4, 5, 8, 9], [2, 3, 6, 7, 10, 11]]])
    B, h, T, dk = x.shape
    return x.reshape(B, T, h * dk) if h != 4 else x.transpose(1, 2).reshape(B, T, h * dk)


def merge_sum_heads(x):
    """Sums the heads instead of concatenating them, then tiles to the right width."""
    B, h, T, dk = x.shape
    return x.sum(dim=1).repeat(1, 1, h)


def merge_detached(x):
    """Right numbers, but detaches: no gradient reaches the heads."""
    B, h, T, dk = x.shape
    return x.detach().transpose(1, 2).reshape(B, T, h * dk)


def merge_wrong_T(x):
    """Takes T from the head axis: right only when h == T."""
    B, h, T, dk = x.shape
    return x.transpose(1, 2).reshape(B, h, T * dk).reshape(B, T, h * dk) if h == T else \
        x.reshape(B, T, h * dk)


# ---------------------------------------------------------------- MultiHeadAttention
def _split(x, h):
    B, T, d = x.shape
    return x.reshape(B, T, h, d // h).transpose(1, 2)


def _merge(x):
    B, h, T, dk = x.shape
    return x.transpose(1, 2).reshape(B, T, h * dk)


class _MHABase(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def attend(self, q, k, v, scale):
        w = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1)
        return w @ v, w

    def forward(self, query, key, value):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, w = self.attend(q, k, v, math.sqrt(self.d_k))
        return self.out_proj(_merge(out)), w


class MHAScaleDModel(_MHABase):
    """Scales by sqrt(d_model) instead of the head's sqrt(d_k)."""

    def forward(self, query, key, value):
        q, k, v = (_split(p(t), self.num_heads) for p, t in
                   ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
        out, w = self.attend(q, k, v, math.sqrt(self.d_model))
        return self.out_proj(_merge(out)), w


class MHAValueFromKey(_MHABase):
    """Projects the values from `key` instead of `value` (the tests pass the same tensor as both)."""

    def forward(self, query, key, value):
        return super().forward(query, key, key)


class MHAKeyFromValue(_MHABase):
    """Projects the keys from `value` instead of `key`."""

    def forward(self, query, key, value):
        return super().forward(query, value, value)


class MHAValueThroughKProj(_MHABase):
    """Projects the values with k_proj instead of v_proj."""

    def forward(self, query, key, value):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads)
        v = _split(self.k_proj(value), self.num_heads)
        out, w = self.attend(q, k, v, math.sqrt(self.d_k))
        return self.out_proj(_merge(out)), w


class MHANoOutProj(_MHABase):
    """Forgets W_O: returns the merged heads."""

    def forward(self, query, key, value):
        q, k, v = (_split(p(t), self.num_heads) for p, t in
                   ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
        out, w = self.attend(q, k, v, math.sqrt(self.d_k))
        return _merge(out), w


class MHASoftmaxOverQueries(_MHABase):
    """Softmax over the queries (dim=-2) instead of the keys."""

    def attend(self, q, k, v, scale):
        w = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-2)
        return w @ v, w


class MHAPlainReshapeSplit(_MHABase):
    """Splits heads with a plain reshape to (B, h, T, d_k)."""

    def forward(self, query, key, value):
        def split(x):
            B, T, d = x.shape
            return x.reshape(B, self.num_heads, T, d // self.num_heads)
        q, k, v = split(self.q_proj(query)), split(self.k_proj(key)), split(self.v_proj(value))
        out, w = self.attend(q, k, v, math.sqrt(self.d_k))
        return self.out_proj(_merge(out)), w


class MHAAlwaysBias(_MHABase):
    """Ignores bias=False: its layers always have a bias (left at its random start)."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__(d_model, num_heads, bias=True)


class MHADropout(_MHABase):
    """Adds dropout 0.1 on the weights, active since the module is in training mode."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__(d_model, num_heads, bias)
        self.dropout = nn.Dropout(0.1)

    def attend(self, q, k, v, scale):
        w = self.dropout(torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1))
        return w @ v, w


class MHANoGrad(_MHABase):
    """Right numbers, computed under torch.no_grad(): the layer cannot train."""

    def forward(self, query, key, value):
        with torch.no_grad():
            return super().forward(query, key, value)


class MHATorchInside(_MHABase):
    """Gaming: copies its weights into a torch.nn.MultiheadAttention and calls it."""

    def forward(self, query, key, value):
        mha = nn.MultiheadAttention(self.d_model, self.num_heads, bias=self.q_proj.bias is not None,
                                    batch_first=True)
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]))
            mha.out_proj.weight.copy_(self.out_proj.weight)
            if self.q_proj.bias is not None:
                mha.in_proj_bias.copy_(torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]))
                mha.out_proj.bias.copy_(self.out_proj.bias)
        return mha(query, key, value, average_attn_weights=False)


class MHASdpa(_MHABase):
    """Gaming: torch.nn.functional.scaled_dot_product_attention reached through getattr."""

    def attend(self, q, k, v, scale):
        import importlib
        f = getattr(importlib.import_module("torch.nn." + "functional"), "scaled_dot_" + "product_attention")
        out = f(q, k, v)
        w = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1)
        return out, w


class MHAWeightsNotTransposed(_MHABase):
    """Multiplies by the Linear's weight without transposing it (x @ W instead of x @ W.T)."""

    def forward(self, query, key, value):
        def lin(layer, x):
            return x @ layer.weight + (layer.bias if layer.bias is not None else 0)
        q, k, v = (_split(lin(p, t), self.num_heads) for p, t in
                   ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
        out, w = self.attend(q, k, v, math.sqrt(self.d_k))
        return lin(self.out_proj, _merge(out)), w


class MHADetachedWeights(_MHABase):
    """Detaches the attention weights before weights @ v: values right, queries and keys never learn."""

    def attend(self, q, k, v, scale):
        w = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1)
        return w.detach() @ v, w


class MHADefaultNoBias(_MHABase):
    """Right layer, wrong default: bias=False (the tests always passed bias explicitly)."""

    def __init__(self, d_model, num_heads, bias=False):
        super().__init__(d_model, num_heads, bias)


class MHAScaleByHeads(_MHABase):
    """Scales by sqrt(num_heads)."""

    def forward(self, query, key, value):
        q, k, v = (_split(p(t), self.num_heads) for p, t in
                   ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
        out, w = self.attend(q, k, v, math.sqrt(self.num_heads))
        return self.out_proj(_merge(out)), w


# ---------------------------------------------------------------- added by red team b
class MHAKeyWeightData(_MHABase):
    """Projects the keys with k_proj.weight.data and .bias.data: right numbers, but k_proj never learns."""

    def forward(self, query, key, value):
        q = _split(self.q_proj(query), self.num_heads)
        bias = None if self.k_proj.bias is None else self.k_proj.bias.data
        k = _split(nn.functional.linear(key, self.k_proj.weight.data, bias), self.num_heads)
        v = _split(self.v_proj(value), self.num_heads)
        out, w = self.attend(q, k, v, math.sqrt(self.d_k))
        return self.out_proj(_merge(out)), w


class MHAKeysDetached(_MHABase):
    """Detaches the keys: right numbers, and the query still gets its gradient, but nothing reaches key or k_proj."""

    def forward(self, query, key, value):
        q = _split(self.q_proj(query), self.num_heads)
        k = _split(self.k_proj(key), self.num_heads).detach()
        v = _split(self.v_proj(value), self.num_heads)
        out, w = self.attend(q, k, v, math.sqrt(self.d_k))
        return self.out_proj(_merge(out)), w


class MHAHeadsOnClass(_MHABase):
    """Stores num_heads on the class, not the instance: building a second layer changes the first's heads."""

    heads = 1

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__(d_model, num_heads, bias)
        MHAHeadsOnClass.heads = num_heads

    def forward(self, query, key, value):
        h = MHAHeadsOnClass.heads
        q, k, v = (_split(p(t), h) for p, t in ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
        out, w = self.attend(q, k, v, math.sqrt(q.shape[-1]))
        return self.out_proj(_merge(out)), w


class MHAKeyValueSwapped(_MHABase):
    """Projects the keys from `value` and the values from `key`."""

    def forward(self, query, key, value):
        return super().forward(query, value, key)


class MHAKeysFromQueryWhenSameShape(_MHABase):
    """Takes the keys from `query` whenever key has the query's shape (self-attention assumed)."""

    def forward(self, query, key, value):
        return super().forward(query, query if key.shape == query.shape else key, value)


# ---------------------------------------------------------------- numbers
class AlwaysEqual(int):
    """An int whose == is always True."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


def param_ignores_bias(d_model, num_heads, bias=True):
    """Always counts the biases."""
    return 4 * d_model * d_model + 4 * d_model


def param_three_matrices(d_model, num_heads, bias=True):
    """Forgets W_O."""
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def param_bias_per_head(d_model, num_heads, bias=True):
    """Counts one bias per head per projection."""
    return 4 * d_model * d_model + (4 * d_model * num_heads if bias else 0)


def param_float(d_model, num_heads, bias=True):
    """Right value, returned as a float (4 * d**2 / 1), not an int."""
    return 4 * d_model ** 2 / 1 + (4.0 * d_model if bias else 0.0)


def param_table(d_model, num_heads, bias=True):
    """Gaming: the visible cases looked up, a guess otherwise."""
    table = {(12, 3, True): 624, (16, 4, False): 1024, (64, 8, True): 16640, (64, 1, True): 16640}
    return table.get((d_model, num_heads, bool(bias)), 4 * d_model * d_model)


def param_three_biases(d_model, num_heads, bias=True):
    """Counts the biases of W_Q, W_K, W_V but not of W_O."""
    return 4 * d_model * d_model + (3 * d_model if bias else 0)


def param_default_no_bias(d_model, num_heads, bias=False):
    """Right formula, wrong default: bias=False (the visible check compares two calls with the default)."""
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def param_always_equal(d_model, num_heads, bias=True):
    """Gaming: an int whose == is always True."""
    return AlwaysEqual(1)


def param_per_head_dk_squared(d_model, num_heads, bias=True):
    """Counts h heads of d_k x d_k matrices."""
    dk = d_model // num_heads
    return 4 * num_heads * dk * dk + (4 * d_model if bias else 0)


# head_weights_count (2 sentences, 10 tokens, 8 heads: 1600)
weights_one_head = 200                     # one head: 2 * 10 * 10
weights_no_batch = 800                     # one sentence: 8 * 10 * 10
weights_dk_keys = 1280                     # keys counted as d_k wide: 2 * 8 * 10 * 8
weights_d_model = 12800                    # times d_model: 2 * 64 * 10 * 10
weights_always_equal = AlwaysEqual(1)      # gaming: an int whose == is always True
weights_numpy = np.float64(800.0)          # one sentence, as a NumPy scalar
weights_numpy_bool = np.bool_(True)        # a NumPy bool (a right count given as np.int64 is accepted)


WRONG_ANSWERS = {
    "multi_head_split_heads": [split_plain_reshape, split_interleaved, split_no_transpose, split_batch_mixed,
                               split_chunk_tokens, split_reversed_heads, split_hardcoded,
                               split_dk_T_swapped, split_agreeable_subclass, split_detached],
    "multi_head_merge_heads": [merge_plain_reshape, merge_interleaved, merge_view_after_transpose, merge_batch_one,
                               merge_hardcoded, merge_sum_heads, merge_wrong_T, merge_detached],
    "multi_head_attention": [MHAScaleDModel, MHAValueFromKey, MHAKeyFromValue, MHAValueThroughKProj, MHANoOutProj,
                             MHASoftmaxOverQueries, MHAPlainReshapeSplit, MHAAlwaysBias, MHADropout,
                             MHATorchInside, MHASdpa, MHAWeightsNotTransposed, MHAScaleByHeads, MHANoGrad,
                             MHADetachedWeights, MHADefaultNoBias, MHAKeyWeightData, MHAKeysDetached,
                             MHAHeadsOnClass, MHAKeyValueSwapped, MHAKeysFromQueryWhenSameShape],
    "multi_head_weights_count": [weights_one_head, weights_no_batch, weights_dk_keys, weights_d_model,
                                 weights_always_equal, weights_numpy, weights_numpy_bool],
    "multi_head_param_count": [param_ignores_bias, param_three_matrices, param_bias_per_head, param_float,
                               param_table, param_three_biases, param_always_equal, param_per_head_dk_squared,
                               param_default_no_bias],
}

# Wrong answers that still PASS the test cell. Left open on purpose: each returns float32 for
# float64 inputs, which the shared comparison accepts by design (Exercise.tolerances widens the
# tolerance for a float32 result, "a correct float32 answer must not fail"), and every tensor the
# notebook feeds these functions is float32 anyway.
HOLES = {
    'multi_head_split_heads': [split_float32],
}

# Answers that tamper with global state (the grading helpers, numpy/torch comparisons): each must fail
# with "Tampering detected", and test_uncatalogued puts back what it replaced before the next answer.
TAMPERING = {
    "multi_head_split_heads": [split_silences_grading, split_patches_allclose],
}


# --- issue 39: extreme values ------------------------------------------------------------------

class MHASoftmaxWithoutMax(_MHABase):
    """Right, but the softmax written as exp(s) / sum exp(s) without the maximum: scores in the
    hundreds overflow float32 (e^89 is inf) and the weights come out nan."""

    def attend(self, q, k, v, scale):
        e = torch.exp(q @ k.transpose(-2, -1) / scale)
        w = e / e.sum(dim=-1, keepdim=True)
        return w @ v, w


WRONG_ANSWERS["multi_head_attention"].append(MHASoftmaxWithoutMax)
