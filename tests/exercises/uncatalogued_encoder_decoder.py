"""Wrong answers to notebook 10's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.data import dates
from course_utils.models.transformer_seq2seq import Attention


# ---------------------------------------------------------------- cross_weights_count = 8*4*11*29
class cross_weights_count_values:  # noqa: N801  (a namespace of wrong numbers)
    no_heads = 8 * 11 * 29
    t_squared = 8 * 4 * 11 * 11
    s_squared = 8 * 4 * 29 * 29
    no_batch = 4 * 11 * 29
    twelve_positions = 8 * 4 * 12 * 29
    ten_positions = 8 * 4 * 10 * 29
    as_string = "10208"
    as_bool = True
    as_nan = float("nan")


# ---------------------------------------------------------------- cross_attention
def _ca(x, memory, W_q, W_k, W_v, src_mask=None, scale=None, fill=float("-inf"), dim=-1):
    q, k, v = x @ W_q, memory @ W_k, memory @ W_v
    scores = q @ k.transpose(-2, -1) / (scale if scale is not None else math.sqrt(W_q.shape[-1]))
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask[:, None, :], fill)
    w = torch.softmax(scores, dim=dim)
    return w @ v, w


def ca_scale_sqrt_d_model(x, memory, W_q, W_k, W_v, src_mask=None):
    """Divides by sqrt(d_model) instead of sqrt(d_k)."""
    return _ca(x, memory, W_q, W_k, W_v, src_mask, scale=math.sqrt(x.shape[-1]))


def ca_scale_sqrt_d_v(x, memory, W_q, W_k, W_v, src_mask=None):
    """Divides by sqrt(d_v) (W_v's width) instead of sqrt(d_k)."""
    return _ca(x, memory, W_q, W_k, W_v, src_mask, scale=math.sqrt(W_v.shape[-1]))


def ca_softmax_over_queries(x, memory, W_q, W_k, W_v, src_mask=None):
    """Softmax over the decoder positions (dim=1) instead of the source positions."""
    return _ca(x, memory, W_q, W_k, W_v, src_mask, dim=1)


def ca_mask_on_query_axis(x, memory, W_q, W_k, W_v, src_mask=None):
    """Unsqueezes the mask to (B, S, 1), as if it hid queries."""
    q, k, v = x @ W_q, memory @ W_k, memory @ W_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(W_q.shape[-1])
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask[:, :, None], float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def ca_mask_inverted(x, memory, W_q, W_k, W_v, src_mask=None):
    """Reads src_mask as True = padding."""
    return _ca(x, memory, W_q, W_k, W_v, None if src_mask is None else ~src_mask)


def ca_ignores_mask(x, memory, W_q, W_k, W_v, src_mask=None):
    """Never masks the padding."""
    return _ca(x, memory, W_q, W_k, W_v, None)


def ca_mask_after_softmax(x, memory, W_q, W_k, W_v, src_mask=None):
    """Zeroes padded weights after the softmax without renormalising."""
    out, w = _ca(x, memory, W_q, W_k, W_v, None)
    if src_mask is not None:
        w = w * src_mask[:, None, :]
    return w @ (memory @ W_v), w


def ca_causal_too(x, memory, W_q, W_k, W_v, src_mask=None):
    """Adds a causal (T, S) triangle to cross-attention."""
    q, k, v = x @ W_q, memory @ W_k, memory @ W_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(W_q.shape[-1])
    T, S = scores.shape[-2:]
    allowed = torch.ones(T, S, dtype=torch.bool).tril()
    if src_mask is not None:
        allowed = allowed & src_mask[:, None, :]
    w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return w @ v, w


def ca_values_from_x(x, memory, W_q, W_k, W_v, src_mask=None):
    """Values from the decoder stream instead of the memory."""
    _, w = _ca(x, memory, W_q, W_k, W_v, src_mask)
    return w @ (x @ W_v)[:, : w.shape[-1]] if x.shape[1] >= w.shape[-1] else (x @ W_v, w)


def ca_keys_from_x(x, memory, W_q, W_k, W_v, src_mask=None):
    """Queries and keys both from x (self-attention), values from memory."""
    q, k, v = x @ W_q, x @ W_k, memory @ W_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(W_q.shape[-1])
    w = torch.softmax(scores, dim=-1)
    return w @ v[:, : w.shape[-1]], w


def ca_weights_float32(x, memory, W_q, W_k, W_v, src_mask=None):
    """Returns float32 weights and output for float64 inputs (accepted: the dtype policy)."""
    out, w = _ca(x, memory, W_q, W_k, W_v, src_mask)
    return out.float(), w.float()


def ca_zeroes_memory_in_place(x, memory, W_q, W_k, W_v, src_mask=None):
    """Also writes zeros into the caller's memory at the padding (modifies an input in place)."""
    if src_mask is not None:
        memory[~src_mask] = 0.0
    return _ca(x, memory, W_q, W_k, W_v, src_mask)


def ca_scales_W_q_in_place(x, memory, W_q, W_k, W_v, src_mask=None):
    """Folds 1/sqrt(d_k) into W_q in place (modifies an input)."""
    W_q /= math.sqrt(W_q.shape[-1])
    return _ca(x, memory, W_q, W_k, W_v, src_mask, scale=1.0)


def ca_sdpa_in_disguise(x, memory, W_q, W_k, W_v, src_mask=None):
    """Output from PyTorch's attention reached through getattr (forbidden)."""
    q, k, v = x @ W_q, memory @ W_k, memory @ W_v
    fn = getattr(__import__("torch").nn.functional, "scaled_dot_" + "product_attention")
    mask = None if src_mask is None else src_mask[:, None, :]
    out = fn(q, k, v, attn_mask=mask)
    _, w = _ca(x, memory, W_q, W_k, W_v, src_mask)
    return out, w


def ca_batch_one_only(x, memory, W_q, W_k, W_v, src_mask=None):
    """Uses sentence 0's mask for every sentence."""
    return _ca(x, memory, W_q, W_k, W_v, None if src_mask is None else src_mask[:1].expand_as(src_mask))


def ca_weights_transposed(x, memory, W_q, W_k, W_v, src_mask=None):
    """Returns the weights as (B, S, T)."""
    out, w = _ca(x, memory, W_q, W_k, W_v, src_mask)
    return out, w.transpose(-2, -1)


def ca_fill_min_float32(x, memory, W_q, W_k, W_v, src_mask=None):
    """Fills padded scores with -1e4 (a 'large' negative number), not -inf."""
    return _ca(x, memory, W_q, W_k, W_v, src_mask, fill=-1e4)


# ---------------------------------------------------------------- DecoderBlock
class _Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = Attention(d_model, num_heads)
        self.cross_attn = Attention(d_model, num_heads)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def sa(self, h):
        return self.self_attn(h, h, causal=True)

    def ca(self, h, memory, src_mask):
        return self.cross_attn(h, memory, src_mask)

    def forward(self, x, memory, src_mask=None):
        if self.norm_first:
            x = x + self.sa(self.norm1(x))
            x = x + self.ca(self.norm2(x), memory, src_mask)
            return x + self.mlp(self.norm3(x))
        x = self.norm1(x + self.sa(x))
        x = self.norm2(x + self.ca(x, memory, src_mask))
        return self.norm3(x + self.mlp(x))


class BlockAlwaysPreNorm(_Block):
    """Ignores norm_first: always pre-norm."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, True)


class BlockNormsAfterResidualWrong(_Block):
    """Post-norm written as x + LN(f(x))."""

    def forward(self, x, memory, src_mask=None):
        if self.norm_first:
            return super().forward(x, memory, src_mask)
        x = x + self.norm1(self.sa(x))
        x = x + self.norm2(self.ca(x, memory, src_mask))
        return x + self.norm3(self.mlp(x))


class BlockNormalisesMemory(_Block):
    """Pre-norm cross-attention reads norm2(memory) as keys and values."""

    def forward(self, x, memory, src_mask=None):
        if self.norm_first:
            x = x + self.sa(self.norm1(x))
            x = x + self.ca(self.norm2(x), self.norm2(memory), src_mask)
            return x + self.mlp(self.norm3(x))
        return super().forward(x, memory, src_mask)


class BlockOneNorm(_Block):
    """Uses norm1 for all three sub-layers."""

    def forward(self, x, memory, src_mask=None):
        n = self.norm1
        if self.norm_first:
            x = x + self.sa(n(x))
            x = x + self.ca(n(x), memory, src_mask)
            return x + self.mlp(n(x))
        x = n(x + self.sa(x))
        x = n(x + self.ca(x, memory, src_mask))
        return n(x + self.mlp(x))


class BlockCrossFirst(_Block):
    """Cross-attention before self-attention."""

    def forward(self, x, memory, src_mask=None):
        if self.norm_first:
            x = x + self.ca(self.norm2(x), memory, src_mask)
            x = x + self.sa(self.norm1(x))
            return x + self.mlp(self.norm3(x))
        x = self.norm2(x + self.ca(x, memory, src_mask))
        x = self.norm1(x + self.sa(x))
        return self.norm3(x + self.mlp(x))


class BlockNotCausal(_Block):
    """Self-attention without the causal mask."""

    def sa(self, h):
        return self.self_attn(h, h)


class BlockNoSrcMask(_Block):
    """Cross-attention without src_mask."""

    def ca(self, h, memory, src_mask):
        return self.cross_attn(h, memory)


class BlockGelu(_Block):
    """GELU in the MLP instead of ReLU."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, norm_first)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))


class BlockNoMlpResidual(_Block):
    """No residual around the MLP."""

    def forward(self, x, memory, src_mask=None):
        if self.norm_first:
            x = x + self.sa(self.norm1(x))
            x = x + self.ca(self.norm2(x), memory, src_mask)
            return self.mlp(self.norm3(x))
        x = self.norm1(x + self.sa(x))
        x = self.norm2(x + self.ca(x, memory, src_mask))
        return self.norm3(self.mlp(x))


class BlockSelfAttendsTwice(_Block):
    """The second sub-layer attends to the decoder stream again (memory ignored)."""

    def ca(self, h, memory, src_mask):
        return self.cross_attn(h, h)


class BlockMemoryAsQuery(_Block):
    """Calls cross_attn(memory, h): queries from the encoder."""

    def ca(self, h, memory, src_mask):
        return self.cross_attn(memory, h)


class BlockDropout(_Block):
    """Adds dropout 0.1 after each sub-layer (the test module is in training mode)."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__(d_model, num_heads, d_ff, norm_first)
        self.drop = nn.Dropout(0.1)

    def sa(self, h):
        return self.drop(super().sa(h))

    def ca(self, h, memory, src_mask):
        return self.drop(super().ca(h, memory, src_mask))


class BlockPostNormFinalOnly(_Block):
    """Post-norm with a single LayerNorm at the end of the block."""

    def forward(self, x, memory, src_mask=None):
        if self.norm_first:
            return super().forward(x, memory, src_mask)
        x = x + self.sa(x)
        x = x + self.ca(x, memory, src_mask)
        return self.norm3(x + self.mlp(x))


class BlockInPlaceResidual(_Block):
    """Adds the residuals into the caller's x in place."""

    def forward(self, x, memory, src_mask=None):
        if self.norm_first:
            x += self.sa(self.norm1(x))
            x += self.ca(self.norm2(x), memory, src_mask)
            x += self.mlp(self.norm3(x))
            return x
        return super().forward(x, memory, src_mask)


# ---------------------------------------------------------------- teacher_forcing_loss
def _tf(model, src, src_mask, tgt, bos, inputs=None, labels=None):
    B = tgt.shape[0]
    if inputs is None:
        inputs = torch.cat([torch.full((B, 1), bos, dtype=tgt.dtype), tgt[:, :-1]], dim=1)
    labels = tgt if labels is None else labels
    logits = model(src, src_mask, inputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def tf_no_shift(model, src, src_mask, tgt, bos):
    """Feeds the target unshifted (the model sees its own label)."""
    return _tf(model, src, src_mask, tgt, bos, inputs=tgt)


def tf_no_bos(model, src, src_mask, tgt, bos):
    """Drops BOS: input tgt[:, :-1], labels tgt[:, 1:]."""
    return _tf(model, src, src_mask, tgt, bos, inputs=tgt[:, :-1], labels=tgt[:, 1:])


def tf_no_mask(model, src, src_mask, tgt, bos):
    """Calls the model with src_mask=None."""
    return _tf(model, src, None, tgt, bos)


def tf_sum(model, src, src_mask, tgt, bos):
    """Sums the token losses instead of averaging."""
    inputs = torch.cat([torch.full((tgt.shape[0], 1), bos), tgt[:, :-1]], dim=1)
    logits = model(src, src_mask, inputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="sum")


def tf_softmax_first(model, src, src_mask, tgt, bos):
    """Passes probabilities instead of logits to cross_entropy."""
    inputs = torch.cat([torch.full((tgt.shape[0], 1), bos), tgt[:, :-1]], dim=1)
    probs = torch.softmax(model(src, src_mask, inputs), dim=-1)
    return F.cross_entropy(probs.reshape(-1, probs.shape[-1]), tgt.reshape(-1))


def tf_labels_transposed(model, src, src_mask, tgt, bos):
    """Flattens the logits time-major but the labels batch-major."""
    inputs = torch.cat([torch.full((tgt.shape[0], 1), bos), tgt[:, :-1]], dim=1)
    logits = model(src, src_mask, inputs)
    return F.cross_entropy(logits.transpose(0, 1).reshape(-1, logits.shape[-1]), tgt.reshape(-1))


def tf_bos_at_end(model, src, src_mask, tgt, bos):
    """Shifts left: input [y_2..y_L, bos]."""
    inputs = torch.cat([tgt[:, 1:], torch.full((tgt.shape[0], 1), bos)], dim=1)
    return _tf(model, src, src_mask, tgt, bos, inputs=inputs)


def tf_ignores_bos_argument(model, src, src_mask, tgt, bos):
    """Uses dates.BOS instead of the bos it is given."""
    return _tf(model, src, src_mask, tgt, dates.BOS)


def tf_detached(model, src, src_mask, tgt, bos):
    """Returns a loss with no gradient (torch.tensor(loss.item())): training cannot use it."""
    return torch.tensor(_tf(model, src, src_mask, tgt, bos).item())


def tf_under_no_grad(model, src, src_mask, tgt, bos):
    """Computes the loss under torch.no_grad(): nothing to backpropagate."""
    with torch.no_grad():
        return _tf(model, src, src_mask, tgt, bos)


def tf_label_smoothing(model, src, src_mask, tgt, bos):
    """Adds label smoothing 0.1."""
    inputs = torch.cat([torch.full((tgt.shape[0], 1), bos), tgt[:, :-1]], dim=1)
    logits = model(src, src_mask, inputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), label_smoothing=0.1)


def tf_float32(model, src, src_mask, tgt, bos):
    """Returns the loss as float32 whatever the model's dtype."""
    return _tf(model, src, src_mask, tgt, bos).float()


def tf_mean_of_last_position(model, src, src_mask, tgt, bos):
    """Scores only the last position."""
    inputs = torch.cat([torch.full((tgt.shape[0], 1), bos), tgt[:, :-1]], dim=1)
    logits = model(src, src_mask, inputs)
    return F.cross_entropy(logits[:, -1], tgt[:, -1])


# ---------------------------------------------------------------- greedy_decode
def _gd(model, src, src_mask, bos, steps, pick=None, enc_mask="same", dec_mask="same", window=None, eos_stop=False):
    memory = model.encode(src, src_mask if enc_mask == "same" else enc_mask)
    tokens = torch.full((src.shape[0], 1), bos, dtype=torch.long)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(steps):
        inp = tokens if window is None else tokens[:, -window:]
        logits = model.decode(inp, memory, src_mask if dec_mask == "same" else dec_mask)
        nxt = (pick or (lambda l: l[:, -1].argmax(-1)))(logits)
        if eos_stop:
            nxt = torch.where(done, torch.full_like(nxt, dates.EOS), nxt)
            done = done | (nxt == dates.EOS)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    return tokens[:, 1:]


def gd_first_position(model, src, src_mask, bos, steps):
    """Reads position 0's logits instead of the last."""
    return _gd(model, src, src_mask, bos, steps, pick=lambda l: l[:, 0].argmax(-1))


def gd_keeps_bos(model, src, src_mask, bos, steps):
    """Returns the BOS column too."""
    out = _gd(model, src, src_mask, bos, steps)
    return torch.cat([torch.full((out.shape[0], 1), bos), out], dim=1)


def gd_encodes_every_step(model, src, src_mask, bos, steps):
    """Runs the encoder at every step."""
    tokens = torch.full((src.shape[0], 1), bos, dtype=torch.long)
    for _ in range(steps):
        logits = model.decode(tokens, model.encode(src, src_mask), src_mask)
        tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokens[:, 1:]


def gd_no_mask_in_decode(model, src, src_mask, bos, steps):
    """Passes src_mask to the encoder but None to the decoder."""
    return _gd(model, src, src_mask, bos, steps, dec_mask=None)


def gd_no_mask_in_encode(model, src, src_mask, bos, steps):
    """Passes None to the encoder, src_mask to the decoder."""
    return _gd(model, src, src_mask, bos, steps, enc_mask=None)


def gd_last_token_only(model, src, src_mask, bos, steps):
    """Feeds only the last token at each step (no cache to make up for it)."""
    return _gd(model, src, src_mask, bos, steps, window=1)


def gd_ignores_bos_argument(model, src, src_mask, bos, steps):
    """Starts from dates.BOS instead of the bos it is given."""
    return _gd(model, src, src_mask, dates.BOS, steps)


def gd_sampling(model, src, src_mask, bos, steps):
    """Samples from the softmax instead of taking the argmax."""
    return _gd(model, src, src_mask, bos, steps,
               pick=lambda l: torch.multinomial(torch.softmax(l[:, -1], -1), 1)[:, 0])


def gd_float_ids(model, src, src_mask, bos, steps):
    """Returns the ids as floats."""
    return _gd(model, src, src_mask, bos, steps).double()


def gd_one_step_short(model, src, src_mask, bos, steps):
    """Loops steps - 1 times (counts BOS as a step)."""
    return _gd(model, src, src_mask, bos, steps - 1)


def gd_eos_sticks(model, src, src_mask, bos, steps):
    """After a sentence writes EOS, writes EOS forever (the exercise says: no stopping at EOS)."""
    return _gd(model, src, src_mask, bos, steps, eos_stop=True)


def gd_int32(model, src, src_mask, bos, steps):
    """Returns int32 ids instead of a long tensor."""
    return _gd(model, src, src_mask, bos, steps).int()


def gd_argmax_wrong_axis(model, src, src_mask, bos, steps):
    """argmax over the positions of the last step's (t, V) logits, per sentence."""
    return _gd(model, src, src_mask, bos, steps, pick=lambda l: l.argmax(-1)[:, -1] * 0 + l[:, -1].argmin(-1))


class BlockSwappedModules(_Block):
    """Uses self.cross_attn for the self-attention and self.self_attn for the cross-attention."""

    def sa(self, h):
        return self.cross_attn(h, h, causal=True)

    def ca(self, h, memory, src_mask):
        return self.self_attn(h, memory, src_mask)


def tf_mask_only_in_decoder(model, src, src_mask, tgt, bos):
    """Encodes without src_mask, decodes with it."""
    inputs = torch.cat([torch.full((tgt.shape[0], 1), bos), tgt[:, :-1]], dim=1)
    logits = model.decode(inputs, model.encode(src, None), src_mask)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))


class AlwaysEqualFloat(float):
    """A number whose == is always True, so that any comparison with the answer 'matches'."""

    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


def gd_src_in_place(model, src, src_mask, bos, steps):
    """Right ids, but zeroes the caller's src afterwards (writes into an input)."""
    out = _gd(model, src, src_mask, bos, steps)
    src.zero_()
    return out


# ---------------------------------------------------------------- red team a (2026-11-25)
def ca_softmax_detached(x, memory, W_q, W_k, W_v, src_mask=None):
    """Detaches the weights before multiplying the values: right numbers, no gradient to W_q, W_k."""
    out, w = _ca(x, memory, W_q, W_k, W_v, src_mask)
    return w.detach() @ (memory @ W_v), w


def ca_scores_under_no_grad(x, memory, W_q, W_k, W_v, src_mask=None):
    """Computes the scores and weights under torch.no_grad(): right numbers, no gradient through them."""
    with torch.no_grad():
        _, w = _ca(x, memory, W_q, W_k, W_v, src_mask)
    return w @ (memory @ W_v), w


def ca_numpy_roundtrip(x, memory, W_q, W_k, W_v, src_mask=None):
    """Computes everything in NumPy and converts back: right numbers, nothing to train through."""
    X, M, Q, K, V = (t.detach().numpy() for t in (x, memory, W_q, W_k, W_v))
    s = (X @ Q) @ np.swapaxes(M @ K, -1, -2) / np.sqrt(Q.shape[-1])
    if src_mask is not None:
        s = np.where(src_mask.numpy()[:, None, :], s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    a = e / e.sum(-1, keepdims=True)
    return torch.from_numpy(a @ (M @ V)), torch.from_numpy(a)


def ca_scale_d_k(x, memory, W_q, W_k, W_v, src_mask=None):
    """Divides by d_k instead of sqrt(d_k)."""
    return _ca(x, memory, W_q, W_k, W_v, src_mask, scale=W_q.shape[-1])


def ca_scale_hardcoded(x, memory, W_q, W_k, W_v, src_mask=None):
    """Divides by 2.0, sqrt(d_k) of the visible test (d_k = 4), whatever d_k is."""
    return _ca(x, memory, W_q, W_k, W_v, src_mask, scale=2.0)


def ca_fill_small_negative(x, memory, W_q, W_k, W_v, src_mask=None):
    """Fills padded scores with -30 (exp(-30) is 'small enough'), not -inf."""
    return _ca(x, memory, W_q, W_k, W_v, src_mask, fill=-30.0)


class BlockCachesMemory(_Block):
    """Keeps the first memory it is called with and reuses it for every later batch."""

    def forward(self, x, memory, src_mask=None):
        if not hasattr(self, "cached_memory"):
            self.cached_memory = memory
        return super().forward(x, self.cached_memory, src_mask)


class BlockResidualFromNormed(_Block):
    """Pre-norm residuals added to the normalised stream: h + f(h) with h = LN(x)."""

    def forward(self, x, memory, src_mask=None):
        if not self.norm_first:
            return super().forward(x, memory, src_mask)
        h = self.norm1(x)
        x = h + self.sa(h)
        h = self.norm2(x)
        x = h + self.ca(h, memory, src_mask)
        h = self.norm3(x)
        return h + self.mlp(h)


class BlockUnderNoGrad(_Block):
    """Runs forward under torch.no_grad(): right values, nothing for section 5's training to learn from."""

    def forward(self, x, memory, src_mask=None):
        with torch.no_grad():
            return super().forward(x, memory, src_mask)


class BlockDetachedMlp(_Block):
    """Pre-norm MLP output detached before the residual: right values, the MLP gets no gradient."""

    def forward(self, x, memory, src_mask=None):
        if not self.norm_first:
            return super().forward(x, memory, src_mask)
        x = x + self.sa(self.norm1(x))
        x = x + self.ca(self.norm2(x), memory, src_mask)
        return x + self.mlp(self.norm3(x)).detach()


class BlockFrozenMlpWeights(_Block):
    """The MLP applied through its weights' .data: right values and input gradients, but the MLP never learns."""

    def forward(self, x, memory, src_mask=None):
        first, second = self.mlp[0], self.mlp[2]

        def mlp(h):
            return F.linear(torch.relu(F.linear(h, first.weight.data, first.bias.data)), second.weight.data, second.bias.data)

        if self.norm_first:
            x = x + self.sa(self.norm1(x))
            x = x + self.ca(self.norm2(x), memory, src_mask)
            return x + mlp(self.norm3(x))
        x = self.norm1(x + self.sa(x))
        x = self.norm2(x + self.ca(x, memory, src_mask))
        return self.norm3(x + mlp(x))


class BlockFrozenNorms(_Block):
    """LayerNorms called with detached gains (F.layer_norm on weight.detach()): right values, the gains never learn."""

    def _norm(self, norm, h):
        return F.layer_norm(h, norm.normalized_shape, norm.weight.detach(), norm.bias.detach(), norm.eps)

    def forward(self, x, memory, src_mask=None):
        if self.norm_first:
            x = x + self.sa(self._norm(self.norm1, x))
            x = x + self.ca(self._norm(self.norm2, x), memory, src_mask)
            return x + self.mlp(self._norm(self.norm3, x))
        x = self._norm(self.norm1, x + self.sa(x))
        x = self._norm(self.norm2, x + self.ca(x, memory, src_mask))
        return self._norm(self.norm3, x + self.mlp(x))


def tf_bos_appended_scores_last(model, src, src_mask, tgt, bos):
    """Feeds [bos, y_1..y_L] and scores the last L positions (each sees the token it predicts)."""
    inputs = torch.cat([torch.full((tgt.shape[0], 1), bos, dtype=tgt.dtype), tgt], dim=1)
    logits = model(src, src_mask, inputs)[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))


def gd_preallocated_reads_last(model, src, src_mask, bos, steps):
    """Preallocates (B, steps + 1) tokens and reads the last position, which is still BOS padding."""
    memory = model.encode(src, src_mask)
    tokens = torch.full((src.shape[0], steps + 1), bos, dtype=torch.long)
    for t in range(steps):
        tokens[:, t + 1] = model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)
    return tokens[:, 1:]


def tf_ignores_pad_id(model, src, src_mask, tgt, bos):
    """Leaves out the labels equal to the padding id 0 (ignore_index=dates.PAD): not the mean over all B * L."""
    decoder_in = torch.cat([torch.full_like(tgt[:, :1], bos), tgt[:, :-1]], dim=1)
    logits = model(src, src_mask, decoder_in)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=dates.PAD)


def ca_returns_float64(x, memory, W_q, W_k, W_v, src_mask=None):
    """Computes in float64 and returns float64 for float32 inputs (accepted: the dtype policy)."""
    x, memory, W_q, W_k, W_v = (t.double() for t in (x, memory, W_q, W_k, W_v))
    scores = (x @ W_q) @ (memory @ W_k).transpose(-2, -1) / math.sqrt(W_q.shape[-1])
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ (memory @ W_v), weights


WRONG_ANSWERS = {
    "encoder_decoder_cross_weights": [AlwaysEqualFloat(5.0)] + [
        v for k, v in vars(cross_weights_count_values).items() if not k.startswith("_")],
    "encoder_decoder_cross_attention": [
        ca_softmax_detached, ca_scores_under_no_grad, ca_numpy_roundtrip, ca_scale_d_k, ca_scale_hardcoded,
        ca_fill_small_negative,
        ca_fill_min_float32,
        ca_scale_sqrt_d_model, ca_scale_sqrt_d_v, ca_softmax_over_queries, ca_mask_on_query_axis, ca_mask_inverted,
        ca_ignores_mask, ca_mask_after_softmax, ca_causal_too, ca_values_from_x, ca_keys_from_x,
        ca_zeroes_memory_in_place, ca_scales_W_q_in_place, ca_sdpa_in_disguise, ca_batch_one_only,
        ca_weights_transposed, ],
    "encoder_decoder_block": [
        BlockCachesMemory, BlockResidualFromNormed, BlockUnderNoGrad, BlockDetachedMlp,
        BlockFrozenMlpWeights, BlockFrozenNorms,
        BlockSwappedModules,
        BlockAlwaysPreNorm, BlockNormsAfterResidualWrong, BlockNormalisesMemory, BlockOneNorm, BlockCrossFirst,
        BlockNotCausal, BlockNoSrcMask, BlockGelu, BlockNoMlpResidual, BlockSelfAttendsTwice, BlockMemoryAsQuery,
        BlockDropout, BlockPostNormFinalOnly, BlockInPlaceResidual,
    ],
    "encoder_decoder_teacher_forcing": [
        tf_bos_appended_scores_last,
        tf_mask_only_in_decoder,
        tf_under_no_grad,
        tf_detached,
        tf_ignores_bos_argument,
        tf_no_shift, tf_no_bos, tf_no_mask, tf_sum, tf_softmax_first, tf_labels_transposed, tf_bos_at_end,
        tf_label_smoothing, tf_mean_of_last_position,
        tf_ignores_pad_id,
    ],
    "encoder_decoder_greedy": [
        gd_preallocated_reads_last,
        gd_src_in_place,
        gd_int32,
        gd_ignores_bos_argument,
        gd_first_position, gd_keeps_bos, gd_encodes_every_step, gd_no_mask_in_decode, gd_no_mask_in_encode,
        gd_last_token_only, gd_sampling, gd_float_ids, gd_one_step_short, gd_eos_sticks,
        gd_argmax_wrong_axis,
    ],
}

# Wrong answers that PASS their test cell today (holes in the hidden tests), kept out of
# WRONG_ANSWERS so that the suite stays green until the tests are fixed: (grade_id, answer).
HOLES = []


# Answers that pass on purpose. The dtype policy (issue 30 item 5): a floating-point result may be float32
# or float64 whatever the inputs' floating dtype, and a float32 one is compared at float32's tolerances
# (tests/exercises/test_categories.py): computed in float32 what the prompt gives in float64, or in float64
# what it gives in float32 (once a hole, when the prompt asked for the inputs' dtype). The right count as
# a NumPy integer (np.prod of the axes): accepted, as in notebooks 01-03.
ACCEPTED = [
    ('encoder_decoder_cross_attention', ca_weights_float32),
    ('encoder_decoder_cross_attention', ca_returns_float64),
    ('encoder_decoder_teacher_forcing', tf_float32),
    ('encoder_decoder_cross_weights', np.int64(8 * 4 * 11 * 29)),
]


# --- issue 39: extreme values -----------------------------------------------------------------

def cross_softmax_without_max(x, memory, W_q, W_k, W_v, src_mask=None):
    """Right cross-attention, but exp(scores) / sum without the maximum: large scores give nan."""
    q, k, v = x @ W_q, memory @ W_k, memory @ W_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
    e = torch.exp(scores)
    return (e / e.sum(dim=-1, keepdim=True)) @ v


WRONG_ANSWERS["encoder_decoder_cross_attention"].append(cross_softmax_without_max)


def tf_log_of_softmax(model, src, src_mask, tgt, bos):
    """The right loss, but the log-probabilities as log(softmax(...)): where a label's probability
    underflows to 0 (logits in the thousands) the loss is inf."""
    decoder_in = torch.cat([torch.full_like(tgt[:, :1], bos), tgt[:, :-1]], dim=1)
    logits = model(src, src_mask, decoder_in)
    logp = torch.log(torch.softmax(logits, dim=-1))
    return -logp.gather(-1, tgt[..., None]).mean()


def tf_logsumexp_without_max(model, src, src_mask, tgt, bos):
    """The right loss written out, log(sum(exp(logits))) - logit of the label, without the
    maximum: exp overflows on logits past 709 (float64) and the loss is inf or nan."""
    decoder_in = torch.cat([torch.full_like(tgt[:, :1], bos), tgt[:, :-1]], dim=1)
    logits = model(src, src_mask, decoder_in)
    lse = torch.log(torch.exp(logits).sum(dim=-1))
    return (lse - logits.gather(-1, tgt[..., None]).squeeze(-1)).mean()


def greedy_cat_of_list(model, src, src_mask, bos, steps):
    """Right, but the new tokens are collected in a list and concatenated at the end: with
    steps = 0 torch.cat gets an empty list and raises."""
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        tokens = torch.full((src.shape[0], 1), bos, dtype=torch.long)
        new = []
        for _ in range(steps):
            best = model.decode(tokens, memory, src_mask)[:, -1].argmax(dim=-1, keepdim=True)
            new.append(best)
            tokens = torch.cat([tokens, best], dim=1)
    return torch.cat(new, dim=1)


def greedy_do_while(model, src, src_mask, bos, steps):
    """Decodes once before checking the count: one token even when steps = 0."""
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        tokens = torch.full((src.shape[0], 1), bos, dtype=torch.long)
        while True:
            best = model.decode(tokens, memory, src_mask)[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, best], dim=1)
            if tokens.shape[1] - 1 >= steps:
                break
    return tokens[:, 1:]


WRONG_ANSWERS["encoder_decoder_teacher_forcing"] += [tf_log_of_softmax, tf_logsumexp_without_max]
WRONG_ANSWERS["encoder_decoder_greedy"] += [greedy_cat_of_list, greedy_do_while]
