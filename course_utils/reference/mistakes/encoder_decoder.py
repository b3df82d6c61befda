"""Mistake catalogue of notebook 10 (the encoder–decoder Transformer).

Instructor side, as secret as the reference. Each mistake's `compute` is a function or class
written out here (the forbidden-API guard counts every function of `course_utils.reference`
as the answer, so a mistake never calls the reference).

Why the cases look the way they do (every mistake must run on every case, and differ from the
reference and from every other mistake):

* every exercise follows the course's dtype policy (`Exercise.tolerances`): a floating-point result may
  be float32 or float64 whatever the inputs' floating dtype, and is compared at float32's
  tolerances whenever either side of the comparison is float32.
* cross_attention: float64, but for the last case, in float32 (a float64 result for float32
  inputs is accepted, at float32's tolerances); the first three cases are also backpropagated through (section 5's
  model trains through the student's function, so one computed under torch.no_grad(), detached
  or in NumPy must fail); d_k differs from d_model and d_v (dividing by sqrt(d_model), or
  not projecting the values, shows); cases without a mask have T != S (keys from the decoder
  give weights of the wrong width); cases with a mask have T == S, so that a mask put on the
  query side or keys taken from the decoder still run, as they do in a student's notebook
  whenever the two lengths agree; every masked row has padding, and no row is all padding. One
  case has real scores near -3e4, so that padding filled with -1e4 instead of -inf shows.
* block: both arrangements; LayerNorms with random weights and biases (a norm in the wrong
  place, or one norm reused, shows); cases with a source mask have T == S for the same reason.
  It is worth 3 points, one per part (BLOCK_PARTS): the last six cases silence all sub-layers
  but one (their last weights zero), so that each part is judged with the others out of the way.
* teacher_forcing: a random float64 `TransformerSeq2Seq` (weights larger than at
  initialisation, so every input changes the loss), padded sources, targets ending in EOS; the
  last case's BOS is not dates.BOS (an answer ignoring its `bos` argument shows).
* greedy: a random float64 `EncoderCountingSeq2Seq`, which raises, with the mistake's own
  message, when the encoder runs a second time; padded sources, so a dropped source mask shows;
  the third case's BOS is not dates.BOS; ids must be long (`DtypeKindExercise`); the last two
  cases are twins (the same inputs), on which an answer that samples gives two different results
  (`GreedyExercise`).
"""
import dataclasses
import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.grading import probe
from course_utils.grading.guards import ATTENTION_BUILTINS
from course_utils.models import transformer_seq2seq as library
from course_utils.models.transformer_seq2seq import Attention, EncoderCountingSeq2Seq, TransformerSeq2Seq
from course_utils.reference import encoder_decoder as reference
from course_utils.reference import mistakes as framework
from course_utils.reference.mistakes import DtypeKindExercise, Exercise, Mistake, ValueExercise
from course_utils.reference.mistakes.gradients import GradientExercise

__all__ = ["EXERCISES", "HIDDEN_ONLY", "BlockExercise", "check", "diagnose"]

DT = torch.float64


TRANSFORMER_BUILTINS = (
    "torch.nn:TransformerEncoderLayer",
    "torch.nn:TransformerDecoderLayer",
    "torch.nn:TransformerEncoder",
    "torch.nn:TransformerDecoder",
    "torch.nn:Transformer",
)
# The course model's own parts that compute an answer (its Attention layer is the tool the
# block exercise builds with, so only the cross-attention exercise forbids it).
# residual_sublayers runs every layer of a course model, so the exercises that call a model allow
# it; the block exercise forbids it: a subclass of the model's DecoderLayer would run it.
MODEL_PARTS = tuple(name for name in library.FORBIDDEN if not name.endswith(":Attention")) + (
    "course_utils.models.transformer_seq2seq:residual_sublayers",)

# The prediction's visible test can only check that the answer is a positive whole number: the
# number itself is the question.
HIDDEN_ONLY = {"count_source_self", "count_decoder_self", "count_one_head", "count_one_sentence",
               "count_without_eos", "count_with_extra",
               # The visible tests pass bos=dates.BOS, so using dates.BOS instead of the argument shows only
               # on the hidden case whose BOS is another id.
               "bos_ignored",
               # The visible scores are small, so -1e4 already gives the padding weight 0 there.
               "mask_large_finite",
               # The visible targets are dates, which never contain the id 0: leaving it out changes nothing
               # there; the hidden case whose targets use 0 as an ordinary token shows it.
               "pad_ignored"}


# --------------------------------------------------------------------------- 1. cross_attention

def cross_attention_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def case(B, T, S, d_model, d_k, d_v, lengths=None, scale=1.0, dtype=DT):
        x = scale * torch.randn(B, T, d_model, generator=g, dtype=dtype)
        memory = scale * torch.randn(B, S, d_model, generator=g, dtype=dtype)
        W = [torch.randn(d_model, d, generator=g, dtype=dtype) / math.sqrt(d_model) for d in (d_k, d_k, d_v)]
        mask = None if lengths is None else torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]
        return ((x, memory, *W), {"src_mask": mask})

    def very_negative_case():
        # Every real score near -2e4: padding filled with a large finite number (-1e4, as some
        # libraries do) instead of -inf then outweighs every real key.
        B, T, d_model, d_k, d_v = 2, 4, 5, 2, 3
        x = 30.0 + 0.02 * torch.randn(B, T, d_model, generator=g, dtype=DT)
        memory = -30.0 + 0.02 * torch.randn(B, T, d_model, generator=g, dtype=DT)
        W_q = torch.ones(d_model, d_k, dtype=DT) + 0.01 * torch.randn(d_model, d_k, generator=g, dtype=DT)
        W_k = torch.ones(d_model, d_k, dtype=DT) + 0.01 * torch.randn(d_model, d_k, generator=g, dtype=DT)
        W_v = torch.randn(d_model, d_v, generator=g, dtype=DT)
        mask = torch.arange(T)[None, :] < torch.tensor([3, 2])[:, None]
        return ((x, memory, W_q, W_k, W_v), {"src_mask": mask})

    return [
        case(2, 3, 5, 6, 4, 3),
        case(3, 4, 4, 5, 3, 2, lengths=[3, 2, 1]),
        case(2, 5, 5, 8, 6, 4, lengths=[4, 2], scale=2.0),
        case(1, 2, 6, 4, 2, 5),
        very_negative_case(),
        # float32 inputs: a float32 or a float64 result is accepted (the dtype policy)
        case(3, 5, 5, 6, 4, 3, lengths=[5, 3, 2], dtype=torch.float32),
        # scores in the thousands: exp overflows without the maximum (issue 39, item 1)
        case(2, 4, 4, 6, 4, 3, lengths=[4, 2], scale=60.0),
        # the smallest the prompt allows (issue 39, item 3): one sentence, one position, one source
        # token, d_k = 1
        case(1, 1, 1, 3, 1, 2, lengths=[1]),
    ]


def _cross_variant(kind):
    def compute(x, memory, W_q, W_k, W_v, src_mask=None):
        q_from, kv_from = (memory, x) if kind == "queries_from_encoder" else (x, memory)
        if kind == "keys_values_from_decoder":
            kv_from = x
        q, k = q_from @ W_q, kv_from @ W_k
        v = kv_from if kind == "values_unprojected" else kv_from @ W_v
        scores = q @ k.transpose(-2, -1)
        if kind == "scaled_by_d_model":
            scores = scores / math.sqrt(x.shape[-1])
        elif kind != "not_scaled":
            scores = scores / math.sqrt(W_q.shape[-1])
        if kind == "causal_mask":
            T, S = scores.shape[-2:]
            scores = scores.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(), float("-inf"))
        after = None
        if src_mask is not None:
            if kind == "mask_query_side":
                scores = scores.masked_fill(~src_mask[:, :, None], float("-inf"))
            elif kind == "mask_inverted":
                scores = scores.masked_fill(src_mask[:, None, :], float("-inf"))
            elif kind == "mask_zero":
                scores = scores.masked_fill(~src_mask[:, None, :], 0.0)
            elif kind == "mask_large_finite":
                scores = scores.masked_fill(~src_mask[:, None, :], -1e4)
            elif kind == "mask_after_softmax":
                after = src_mask[:, None, :].to(scores.dtype)
            elif kind != "mask_ignored":
                scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-2 if kind == "softmax_over_queries" else -1)
        if after is not None:
            weights = weights * after
        return weights @ v, weights
    return compute


CROSS_MISTAKES = tuple(
    Mistake(kind, message, _cross_variant(kind)) for kind, message in [
        ("keys_values_from_decoder",
         "your keys and values come from the decoder's input x: that is self-attention. In "
         "cross-attention only the queries come from the decoder (x @ W_q); the keys and values come "
         "from the encoder's output (memory @ W_k, memory @ W_v), so the weights have shape (B, T, S)."),
        ("queries_from_encoder",
         "your roles are swapped: the queries come from the encoder's output and the keys and values "
         "from the decoder. The decoder asks (queries = x @ W_q) and the source answers "
         "(keys = memory @ W_k, values = memory @ W_v)."),
        ("values_unprojected",
         "you averaged the memory itself: the values are projected too, memory @ W_v."),
        ("not_scaled",
         "your scores are not scaled: divide q k^T by sqrt(d_k) before the softmax (d_k = W_q.shape[-1])."),
        ("scaled_by_d_model",
         "you divided the scores by sqrt(d_model); the scale is sqrt(d_k), the size of one query "
         "(W_q.shape[-1]), which differs from d_model."),
        ("softmax_over_queries",
         "your softmax runs over the wrong axis (the queries, dim=-2): each decoder position's weights "
         "must sum to one over the source positions, dim=-1."),
        ("causal_mask",
         "you applied a causal mask to cross-attention: the whole source is known before decoding "
         "starts, so every decoder position may look at every real source token; only padding is hidden."),
        ("mask_query_side",
         "your source mask hides decoder positions (it is on the query axis, src_mask[:, :, None]); it "
         "must hide padded keys: src_mask[:, None, :], which broadcasts over the decoder's positions."),
        ("mask_inverted",
         "your mask is inverted: src_mask is True at real source tokens, so the scores to fill with -inf "
         "are where it is False (~src_mask)."),
        ("mask_zero",
         "you set the padded scores to 0 instead of -inf: exp(0) = 1, so padding still gets weight."),
        ("mask_large_finite",
         "you filled the padded scores with a finite number (such as -1e4) instead of -inf: when the real "
         "scores are lower still, the padding takes the weight. float(\"-inf\") gives it exactly 0 always."),
        ("mask_after_softmax",
         "you zeroed the padding's weights after the softmax, so the rows no longer sum to one: set the "
         "padded scores to -inf before the softmax."),
        ("mask_ignored",
         "your weights ignore src_mask: padded source positions must get weight exactly 0."),
    ]
)


# --------------------------------------------------------------------------- 2. DecoderBlock

class _WrongBlock(nn.Module):
    """A decoder block with one catalogued mistake (`kind`); self-contained on purpose."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True, *, kind):
        super().__init__()
        self.kind = kind
        self.norm_first = {"always_pre": True, "always_post": False}.get(kind, norm_first)
        self.self_attn = Attention(d_model, num_heads)
        self.cross_attn = Attention(d_model, num_heads)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU() if kind == "gelu" else nn.ReLU(),
                                 nn.Linear(d_ff, d_model))

    def forward(self, x, memory, src_mask=None):
        kind = self.kind
        self_layer, cross_layer = ((self.cross_attn, self.self_attn) if kind == "swapped_attention_layers"
                                   else (self.self_attn, self.cross_attn))

        def self_part(h):
            return self_layer(h, h, src_mask if kind == "mask_to_self" else None, causal=kind != "no_causal_mask")

        def cross_part(h, norm):
            if kind == "cross_reads_decoder":  # a second self-attention: cross_attn(h, h)
                return cross_layer(h, h)
            keys = h if kind == "keys_from_decoder" else (
                norm(memory) if kind == "memory_normed" and self.norm_first else memory)
            mask = None if kind in ("mask_not_passed", "mask_to_self") else src_mask
            return cross_layer(h, keys, mask, causal=kind == "causal_cross")

        functions = {"self": self_part, "cross": lambda h, norm: cross_part(h, norm), "mlp": self.mlp}
        if kind == "cross_first":  # the order swapped, the norms taken in their order: norm1 for the cross
            plan = [("cross", self.norm1), ("self", self.norm2), ("mlp", self.norm3)]
        elif kind == "cross_first_own_norms":  # the two lines swapped: each keeps its own norm
            plan = [("cross", self.norm2), ("self", self.norm1), ("mlp", self.norm3)]
        else:
            norms = [self.norm1] * 3 if kind == "one_norm" else [self.norm1, self.norm2, self.norm3]
            plan = list(zip(["self", "cross", "mlp"], norms))
        if kind == "mlp_skipped":
            plan = plan[:2]
        for name, norm in plan:
            def f(h, name=name, norm=norm):
                return functions[name](h, norm) if name == "cross" else functions[name](h)
            keep = 0.0 if kind == f"no_residual_{name}" else 1.0
            if self.norm_first:
                h = norm(x)
                x = h + f(h) if kind == "residual_from_normed" else keep * x + f(h)
            elif kind == "post_norm_of_sublayer":  # x + LN(f(x)) instead of LN(x + f(x))
                x = x + norm(f(x))
            elif kind == "post_norm_last_only":  # one LayerNorm, at the end of the block
                x = norm(x + f(x)) if name == "mlp" else x + f(x)
            else:
                x = norm(keep * x + f(x))
        return x


def _wrong_block(kind):
    return functools.partial(_WrongBlock, kind=kind)


def block_weights(d_model, d_ff, g):
    """Random weights for every parameter of a decoder block, by state_dict name."""
    weights = {}
    for attn in ("self_attn", "cross_attn"):
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            weights[f"{attn}.{name}.weight"] = torch.randn(d_model, d_model, generator=g) / math.sqrt(d_model)
    for name in ("norm1", "norm2", "norm3"):
        weights[f"{name}.weight"] = 1.0 + 0.5 * torch.randn(d_model, generator=g)
        weights[f"{name}.bias"] = 0.5 * torch.randn(d_model, generator=g)
    weights["mlp.0.weight"] = torch.randn(d_ff, d_model, generator=g) / math.sqrt(d_model)
    weights["mlp.0.bias"] = 0.3 * torch.randn(d_ff, generator=g)
    weights["mlp.2.weight"] = torch.randn(d_model, d_ff, generator=g) / math.sqrt(d_ff)
    weights["mlp.2.bias"] = 0.3 * torch.randn(d_model, generator=g)
    return weights


def block_cases(seed):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for d_model, num_heads, d_ff, norm_first, B, T, S, lengths in [
        (8, 2, 16, True, 2, 4, 6, None),
        (8, 2, 16, False, 2, 5, 3, None),
        (12, 3, 20, True, 3, 5, 5, [5, 3, 1]),
        (12, 3, 20, False, 3, 5, 5, [4, 5, 2]),
        (6, 1, 10, True, 2, 4, 4, [2, 3]),
    ]:
        weights = block_weights(d_model, d_ff, g)
        x = 2.0 * torch.randn(B, T, d_model, generator=g) + 1.0
        memory = 2.0 * torch.randn(B, S, d_model, generator=g) - 0.5
        mask = None if lengths is None else torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]
        describe = (f"d_model={d_model}, num_heads={num_heads}, d_ff={d_ff}, norm_first={norm_first}, "
                    f"x {tuple(x.shape)}, memory {tuple(memory.shape)}, "
                    + ("no src_mask" if mask is None else f"src_mask {tuple(mask.shape)}"))
        cases.append({"init_args": [d_model, num_heads, d_ff], "init_kwargs": {"norm_first": norm_first},
                      "weights": weights, "forward_args": [x, memory], "forward_kwargs": {"src_mask": mask},
                      "describe": describe})
    # Blocks with sub-layers silenced (their output projection set to zero, so they add nothing):
    # each judges one part of the block (BLOCK_PARTS) with the others out of the way. Both
    # arrangements, a padded source with T == S (so that a mask given to the wrong sub-layer runs).
    for keep in ("self_attn", "cross_attn", "mlp"):
        for norm_first in (True, False):
            d_model, num_heads, d_ff, B, T, S, lengths = 8, 2, 16, 2, 5, 5, [5, 3]
            weights = block_weights(d_model, d_ff, g)
            for silent in {"self_attn", "cross_attn", "mlp"} - {keep}:
                names = ["mlp.2.weight", "mlp.2.bias"] if silent == "mlp" else [f"{silent}.out_proj.weight"]
                for name in names:
                    weights[name] = torch.zeros_like(weights[name])
            x = 2.0 * torch.randn(B, T, d_model, generator=g) + 1.0
            memory = 2.0 * torch.randn(B, S, d_model, generator=g) - 0.5
            mask = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]
            only = {"self_attn": "the self-attention", "cross_attn": "the cross-attention", "mlp": "the MLP"}[keep]
            cases.append({"init_args": [d_model, num_heads, d_ff], "init_kwargs": {"norm_first": norm_first},
                          "weights": weights, "forward_args": [x, memory], "forward_kwargs": {"src_mask": mask},
                          "describe": (f"d_model={d_model}, num_heads={num_heads}, d_ff={d_ff}, norm_first={norm_first}, "
                                       f"x {tuple(x.shape)}, memory {tuple(memory.shape)}, src_mask {tuple(mask.shape)}; "
                                       f"only {only} and the norms at work, the other sub-layers' last "
                                       "weights set to zero")})
    # The smallest the prompt allows (issue 39, item 3): one sentence, one position, one source
    # token, one head, in both arrangements.
    for norm_first in (True, False):
        d_model, num_heads, d_ff = 6, 1, 10
        weights = block_weights(d_model, d_ff, g)
        x = 2.0 * torch.randn(1, 1, d_model, generator=g) + 1.0
        memory = 2.0 * torch.randn(1, 1, d_model, generator=g) - 0.5
        mask = torch.ones(1, 1, dtype=torch.bool)
        cases.append({"init_args": [d_model, num_heads, d_ff], "init_kwargs": {"norm_first": norm_first},
                      "weights": weights, "forward_args": [x, memory], "forward_kwargs": {"src_mask": mask},
                      "describe": (f"d_model={d_model}, num_heads={num_heads}, d_ff={d_ff}, norm_first={norm_first}, "
                                   "x (1, 1, 6), memory (1, 1, 6), src_mask (1, 1)")})
    return cases


# The attention parts are judged on the pre-norm cases, where a norm touches only its sub-layer's
# input (so a post-norm arrangement mistake, the last part's, does not cost them too); the
# post-norm ones still count for the whole answer.
BLOCK_SELF_CASES, BLOCK_CROSS_CASES, BLOCK_MLP_CASES = (5,), (7,), (9, 10)


@dataclasses.dataclass(frozen=True)
class BlockExercise(Exercise):
    """An answer that is a decoder block class DecoderBlock(d_model, num_heads, d_ff,
    norm_first=...) with submodules self_attn and cross_attn (Attention layers), norm1, norm2,
    norm3 and mlp; cases in the layout of probe.run_module."""

    runner: str = "module"
    module_hint: str = ("attributes self_attn and cross_attn = Attention(d_model, num_heads), norm1, norm2, "
                        "norm3 and mlp = nn.Sequential(Linear, ReLU, Linear)")

    def describe_case(self, case):
        return f" ({case['describe']})"


BLOCK_MISTAKES = tuple(
    Mistake(kind, message, _wrong_block(kind)) for kind, message in [
        ("no_causal_mask",
         "your self-attention is not causal: a decoder position must not see the target tokens after "
         "it (they are the answers it is trained to predict); call self.self_attn(h, h, causal=True)."),
        ("causal_cross",
         "you made the cross-attention causal: decoder position t may read every source position, "
         "so call self.cross_attn(h, memory, src_mask) without causal=True."),
        ("keys_from_decoder",
         "your cross-attention reads the decoder's own stream as keys and values (a second "
         "self-attention); its keys and values are the encoder's output: self.cross_attn(h, memory, src_mask)."),
        ("cross_reads_decoder",
         "your cross-attention is called as self.cross_attn(h, h), without the memory or src_mask: it "
         "attends to the decoder's own positions, so the block never reads the source. Call "
         "self.cross_attn(h, memory, src_mask)."),
        ("memory_normed",
         "you passed the memory through the decoder's LayerNorm: the encoder's output is used as it "
         "is; only the decoder's stream is normalised, self.cross_attn(norm2(x), memory, src_mask)."),
        ("mask_not_passed",
         "your cross-attention does not get src_mask, so the decoder reads the source's padding: "
         "self.cross_attn(h, memory, src_mask)."),
        ("mask_to_self",
         "you gave src_mask to the self-attention instead of the cross-attention: the mask hides the "
         "*source's* padding, so it belongs to self.cross_attn(h, memory, src_mask)."),
        ("cross_first",
         "your block runs the cross-attention before the self-attention: the order is masked "
         "self-attention (norm1), then cross-attention (norm2), then the MLP (norm3)."),
        ("swapped_attention_layers",
         "you swapped the two attention layers: self.self_attn does the masked self-attention and "
         "self.cross_attn the cross-attention (each has its own weights, loaded by name)."),
        ("cross_first_own_norms",
         "your block runs the cross-attention (with norm2) before the masked self-attention (with norm1): "
         "the decoder first attends to the tokens written so far, then to the source: self-attention, "
         "cross-attention, MLP."),
        ("no_residual_self",
         "there is no residual connection around your masked self-attention: add its input back, "
         "x + self_attn(...) (inside norm1 for post-norm)."),
        ("no_residual_cross",
         "there is no residual connection around your cross-attention: add its input back, "
         "x + cross_attn(...)."),
        ("no_residual_mlp",
         "there is no residual connection around your MLP: add its input back, x + mlp(...) (inside "
         "norm3 for post-norm)."),
        ("residual_from_normed",
         "your pre-norm residuals start from the normalised stream, h + f(h) with h = norm(x): the "
         "residual adds to x itself, x = x + f(norm(x)), so that the norm touches only the sub-layer's input."),
        ("post_norm_of_sublayer",
         "your post-norm block normalises each sub-layer's output and then adds it, x + norm(f(x)): "
         "post-norm normalises the sum, x = norm1(x + self_attn(x, x, causal=True)), and so on."),
        ("post_norm_last_only",
         "your post-norm block has a LayerNorm only at its end: post-norm normalises after every "
         "sub-layer, norm1 after the self-attention, norm2 after the cross-attention, norm3 after the MLP."),
        ("mlp_skipped",
         "your block has no MLP (feed-forward) sub-layer: after the cross-attention comes "
         "x + mlp(norm3(x)) (pre-norm) or norm3(x + mlp(x)) (post-norm)."),
        ("gelu",
         "your MLP uses GELU; this block's MLP is nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), "
         "nn.Linear(d_ff, d_model))."),
        ("one_norm",
         "you used norm1 for all three sub-layers: each sub-layer has its own LayerNorm, norm1 for "
         "the self-attention, norm2 for the cross-attention, norm3 for the MLP."),
        ("always_pre",
         "your block computes the pre-norm arrangement even when norm_first=False; post-norm adds "
         "first and normalises after: x = norm1(x + self_attn(x, x, causal=True)), and so on."),
        ("always_post",
         "your block computes the post-norm arrangement even when norm_first=True; pre-norm "
         "normalises each sub-layer's input only: x = x + self_attn(h, h, causal=True) with h = norm1(x)."),
    ]
)


# The three points of the decoder block, one per part (see mistakes.Part). A part's evidence is
# the cases where it is the only sub-layer at work; the norms and the residuals are at work in
# every case, so an uncatalogued mistake in them (a residual taken from the wrong stream) can cost more than their
# part, while a wrong attention costs its own part only. A catalogued mistake costs the one part it is charged to:
# giving src_mask to the self-attention is charged to the cross-attention, which lacks it; swapping
# the two attention layers, to the self-attention, the first of the two it gets wrong.
BLOCK_PARTS = (
    framework.Part("self_attention", 1 / 3, "the masked self-attention sub-layer (causal, over the decoder's "
                   "own stream)", mistakes=("no_causal_mask", "swapped_attention_layers"), cases=BLOCK_SELF_CASES),
    framework.Part("cross_attention", 1 / 3, "the cross-attention sub-layer (queries from the decoder, keys and "
                   "values from the encoder's output as it is, src_mask on the source)",
                   mistakes=("causal_cross", "keys_from_decoder", "cross_reads_decoder", "memory_normed",
                             "mask_not_passed", "mask_to_self"), cases=BLOCK_CROSS_CASES),
    framework.Part("arrangement", 1 / 3, "the MLP, the residual connections, the three LayerNorms and the "
                   "order of the sub-layers, pre-norm and post-norm",
                   mistakes=("cross_first", "cross_first_own_norms", "no_residual_self", "no_residual_cross",
                             "no_residual_mlp", "residual_from_normed", "post_norm_of_sublayer",
                             "post_norm_last_only", "mlp_skipped", "gelu", "one_norm", "always_pre",
                             "always_post"),
                   cases=BLOCK_MLP_CASES),
)


# --------------------------------------------------------------------------- 3. teacher forcing

TOY_CONFIG = dict(d_model=8, num_heads=2, num_layers=1, d_ff=16, source_vocab=7, target_vocab=6,
                  max_source=8, max_target=8)
TOY_PAD, TOY_BOS, TOY_EOS = 0, 1, 2
# The last case of each exercise calls its BOS 5 (the toy vocabulary's last id), not 1: an answer that
# ignores its `bos` argument and uses dates.BOS (= 1) would otherwise give the right result.
TOY_BOS_OTHER = 5
DATES_BOS = 1  # course_utils.data.dates.BOS, the id the notebook's visible tests use


def toy_model(cls, seed, noise=0.5, **extra):
    """A random float64 course model, portable into the sandbox, with weights large enough that
    every input token and position changes its outputs (`noise`: how much is added to them)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = probe.portable(cls, **TOY_CONFIG, **extra).double()
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(noise * torch.randn(parameter.shape, generator=g, dtype=DT))
    model.eval()
    return model


def toy_batch(g, B, S, lengths, L):
    """Padded source ids and mask, and targets of L tokens ending in EOS."""
    src = torch.randint(1, TOY_CONFIG["source_vocab"], (B, S), generator=g)
    mask = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]
    src = src.masked_fill(~mask, TOY_PAD)
    tgt = torch.randint(3, TOY_CONFIG["target_vocab"], (B, L), generator=g)
    tgt[:, -1] = TOY_EOS
    return src, mask, tgt


def teacher_forcing_cases(seed):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i, (B, S, lengths, L) in enumerate([(3, 6, [6, 4, 2], 5), (2, 5, [3, 5], 4), (4, 7, [7, 1, 5, 3], 6)]):
        src, mask, tgt = toy_batch(g, B, S, lengths, L)
        bos = TOY_BOS_OTHER if i == 2 else TOY_BOS
        cases.append(((toy_model(TransformerSeq2Seq, seed + i), src, mask, tgt, bos), {}))
    # Targets that use ids 0 and 1 as ordinary tokens: the loss is the mean over all B * L tokens, so an
    # answer that leaves out a padding id (ignore_index=0) or the BOS id shows.
    src, mask, tgt = toy_batch(g, 3, 5, [5, 3, 4], 5)
    tgt[:, :-1] = torch.randint(0, TOY_CONFIG["target_vocab"], (3, 4), generator=g)
    tgt[0, 0], tgt[1, 1], tgt[2, 2] = 0, 1, 0
    cases.append(((toy_model(TransformerSeq2Seq, seed + 3), src, mask, tgt, TOY_BOS), {}))
    # Logits in the thousands (the output layer scaled up; issue 39, item 1): a log-softmax written
    # as log(softmax(...)) gives log(0) = -inf, and exp without the maximum overflows (e^710 is inf
    # in float64); F.cross_entropy and log_softmax do neither.
    src, mask, tgt = toy_batch(g, 2, 5, [5, 3], 4)
    model = toy_model(TransformerSeq2Seq, seed + 4)
    with torch.no_grad():
        model.out.weight.mul_(300.0)
        model.out.bias.mul_(300.0)
    cases.append(((model, src, mask, tgt, TOY_BOS), {}))
    # The smallest the prompt allows (issue 39, item 3): one sentence, one source token, a target
    # of one token (EOS alone): the decoder reads BOS only.
    src, mask, tgt = toy_batch(g, 1, 1, [1], 1)
    cases.append(((toy_model(TransformerSeq2Seq, seed + 5), src, mask, tgt, TOY_BOS), {}))
    return cases


def _tf_variant(kind):
    def compute(model, src, src_mask, tgt, bos):
        start = torch.full_like(tgt[:, :1], bos)
        shifted = torch.cat([start, tgt[:, :-1]], dim=1)
        labels = tgt
        if kind == "no_shift":
            decoder_in = tgt
        elif kind == "shifted_left":
            decoder_in = torch.cat([tgt[:, 1:], start], dim=1)
        elif kind == "rolled_without_bos":
            decoder_in = torch.roll(tgt, 1, dims=1)
        elif kind == "labels_shifted":
            decoder_in, labels = shifted, shifted
        elif kind == "bos_not_trimmed":
            decoder_in = torch.cat([start, tgt], dim=1)
        elif kind == "bos_ignored":
            decoder_in = torch.cat([torch.full_like(tgt[:, :1], DATES_BOS), tgt[:, :-1]], dim=1)
        elif kind == "no_bos":  # y_1..y_{L-1} in, y_2..y_L out
            decoder_in, labels = tgt[:, :-1], tgt[:, 1:]
        elif kind == "eos_dropped":  # the last target token (EOS) neither read nor predicted
            decoder_in, labels = shifted[:, :-1], tgt[:, :-1]
        else:
            decoder_in = shifted
        if kind == "encoder_unmasked":
            logits = model.decode(decoder_in, model.encode(src, None), src_mask)
        else:
            logits = model(src, None if kind == "no_src_mask" else src_mask, decoder_in)
        if kind == "bos_not_trimmed":
            logits = logits[:, 1:]
        if kind == "last_position_only":
            logits, labels = logits[:, -1:], labels[:, -1:]
        if kind == "softmax_first":
            logits = torch.softmax(logits, dim=-1)
        if kind == "summed_per_sentence":
            return F.cross_entropy(logits.transpose(1, 2), labels, reduction="none").sum(dim=1).mean()
        if kind == "labels_misaligned":  # the logits flattened time-major, the labels batch-major
            logits = logits.transpose(0, 1)
        flat_logits, flat_labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
        return F.cross_entropy(flat_logits, flat_labels, reduction="sum" if kind == "summed" else "mean",
                               label_smoothing=0.1 if kind == "label_smoothing" else 0.0,
                               ignore_index=TOY_PAD if kind == "pad_ignored" else -100)
    return compute


TF_MISTAKES = tuple(
    Mistake(kind, message, _tf_variant(kind)) for kind, message in [
        ("no_shift",
         "your decoder reads the target itself: position t then sees y_t, the token it must predict, "
         "and learns to copy it. Feed the target shifted right behind BOS: [bos, y_1, ..., y_{L-1}]."),
        ("shifted_left",
         "you shifted the target the wrong way (to the left, dropping y_1): the decoder input is "
         "[bos, y_1, ..., y_{L-1}], the target moved one place to the right with BOS in front."),
        ("rolled_without_bos",
         "your decoder input starts with the target's last token (torch.roll wraps it around): put "
         "BOS in the first place, [bos, y_1, ..., y_{L-1}]."),
        ("labels_shifted",
         "you compared the logits with the shifted decoder input: the labels are the unshifted target "
         "y_1..y_L, the tokens each position must predict."),
        ("bos_not_trimmed",
         "your decoder reads [bos, y_1, ..., y_L] and you scored its last L positions: those see the "
         "token they predict. Drop the target's last token from the input and score all L positions."),
        ("bos_ignored",
         "your decoder input starts with dates.BOS, not with the `bos` you were given: use the "
         "argument, so that the function works for any vocabulary."),
        ("no_bos",
         "you left BOS out: your decoder reads y_1..y_{L-1} and predicts y_2..y_L, so the first target "
         "token is never predicted. Put bos in front, [bos, y_1, ..., y_{L-1}], and score all L target tokens."),
        ("eos_dropped",
         "your loss leaves out the last target token, EOS, so the model never learns to stop: score all L "
         "positions against the whole target y_1..y_L, EOS included (the decoder input is still "
         "[bos, y_1, ..., y_{L-1}])."),
        ("summed",
         "your loss is the sum over the tokens: the exercise asks for the mean cross-entropy over all "
         "B * L target tokens (F.cross_entropy's default)."),
        ("summed_per_sentence",
         "your loss adds up each sentence's token losses and averages over the sentences: the exercise asks "
         "for the mean over all B * L tokens, so divide by L too (F.cross_entropy's default reduction, on "
         "the flattened logits and labels)."),
        ("label_smoothing",
         "you used label smoothing (label_smoothing=0.1): the exercise asks for the plain cross-entropy of "
         "the true next tokens, F.cross_entropy(logits, labels) without it."),
        ("labels_misaligned",
         "your logits and labels are flattened in different orders (one of them transposed to (L, B) "
         "first), so each position is scored against another position's label: reshape both from their "
         "(B, L, ...) layout, logits.reshape(-1, V) and tgt.reshape(-1)."),
        ("pad_ignored",
         "you left out the labels with id 0 (ignore_index): these targets have no padding, and the loss is "
         "the mean over all B * L target tokens; call F.cross_entropy without ignore_index."),
        ("last_position_only",
         "you scored only the last position: teacher forcing scores every position t against the token "
         "after it, all L positions in one pass, and averages their losses."),
        ("encoder_unmasked",
         "you encoded the source without src_mask, so the encoder's self-attention reads the padding: "
         "model(src, src_mask, decoder_input) gives the mask to the encoder and to the decoder."),
        ("softmax_first",
         "you applied a softmax before the cross-entropy: F.cross_entropy takes raw logits and applies "
         "log-softmax itself."),
        ("no_src_mask",
         "you did not pass src_mask to the model, so it attends to the padding of the source."),
    ]
)


# --------------------------------------------------------------------------- 4. greedy decoding

def greedy_cases(seed):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i, (B, S, lengths, steps) in enumerate([(3, 6, [6, 3, 2], 5), (2, 5, [2, 5], 7), (4, 7, [7, 4, 1, 6], 6)]):
        src, mask, _ = toy_batch(g, B, S, lengths, 2)
        model = toy_model(EncoderCountingSeq2Seq, seed + 100 + i, max_encodes=1)
        cases.append(((model, src, mask, TOY_BOS_OTHER if i == 2 else TOY_BOS, steps), {}))
    # Twins: the same inputs twice (GREEDY_TWINS), a model whose next-token distributions are
    # spread out (no token above about 0.7), so that an answer that samples instead of taking the
    # argmax gives two different results (the chance of the same 28 draws twice is below 1e-6).
    src, mask, _ = toy_batch(g, 4, 6, [6, 4, 3, 5], 2)
    for _ in range(2):
        cases.append(((toy_model(EncoderCountingSeq2Seq, seed + 200, noise=0.2, max_encodes=1), src, mask, TOY_BOS,
                       7), {}))
    # The smallest the prompt allows (issue 39, item 3): steps = 0 returns a (B, 0) long tensor (no
    # token, no BOS), steps = 1 one column; one sentence of one source token.
    for i, (B, S, lengths, steps) in enumerate([(2, 4, [4, 2], 0), (1, 1, [1], 1), (1, 3, [3], 0)]):
        src, mask, _ = toy_batch(g, B, S, lengths, 2)
        model = toy_model(EncoderCountingSeq2Seq, seed + 300 + i, max_encodes=1)
        cases.append(((model, src, mask, TOY_BOS, steps), {}))
    return cases


GREEDY_TWINS = (3, 4)  # indices of the two identical cases of greedy_cases


def _greedy_variant(kind):
    def compute(model, src, src_mask, bos, steps):
        with torch.no_grad():
            memory = model.encode(src, None if kind == "encoder_unmasked" else src_mask)
            start = DATES_BOS if kind == "bos_ignored" else bos
            tokens = torch.full((src.shape[0], 1), start, dtype=torch.long)
            for _ in range(steps - 1 if kind in ("one_step_short", "one_step_short_bos_kept") else steps):
                if kind == "encoder_per_step":
                    memory = model.encode(src, src_mask)
                fed = tokens[:, -1:] if kind == "last_token_only" else tokens
                logits = model.decode(fed, memory, None if kind == "src_mask_dropped" else src_mask)
                position = 0 if kind == "first_position" else -1
                if kind == "sampled":  # random: recognised by its twin cases (GreedyExercise)
                    best = torch.multinomial(torch.softmax(logits[:, position], dim=-1), 1)
                else:
                    best = logits[:, position].argmax(dim=-1, keepdim=True)
                if kind == "eos_sticks":  # a sentence that wrote EOS writes EOS from then on
                    best = torch.where((tokens[:, 1:] == TOY_EOS).any(dim=1, keepdim=True), TOY_EOS, best)
                tokens = torch.cat([tokens, best], dim=1)
        return tokens if kind in ("bos_included", "one_step_short_bos_kept") else tokens[:, 1:]
    return compute


GREEDY_MISTAKES = (
    Mistake("encoder_per_step", EncoderCountingSeq2Seq.AGAIN, _greedy_variant("encoder_per_step")),
    Mistake("last_token_only",
            "you fed the decoder only the last token: without a cache, the decoder needs all the tokens "
            "so far (BOS first) at every step, and the next token is read from its last position.",
            _greedy_variant("last_token_only")),
    Mistake("first_position",
            "you took the next token from the decoder's first position (logits[:, 0]); the prediction "
            "for the next token is at its last position, logits[:, -1].",
            _greedy_variant("first_position")),
    Mistake("bos_included",
            "your result starts with BOS: return only the `steps` generated tokens, tokens[:, 1:].",
            _greedy_variant("bos_included")),
    Mistake("one_step_short",
            "you generated one token too few: run the decoder `steps` times, one new token each time.",
            _greedy_variant("one_step_short")),
    Mistake("one_step_short_bos_kept",
            "your loop runs one step short and your result keeps BOS in front, so it has the right shape but "
            "every token sits one place late and the last one is missing: run the decoder `steps` times and "
            "return the tokens after BOS, tokens[:, 1:].",
            _greedy_variant("one_step_short_bos_kept")),
    Mistake("sampled",
            "your tokens change from one run to the next on the same inputs: you sampled the next token "
            "(torch.multinomial) instead of taking the most probable one. Greedy decoding appends "
            "logits[:, -1].argmax(dim=-1, keepdim=True).",
            _greedy_variant("sampled")),
    Mistake("eos_sticks",
            "once a sentence wrote EOS you kept writing EOS for it: here every sentence is decoded for "
            "exactly `steps` tokens, each the most probable after all the tokens before it, EOS included.",
            _greedy_variant("eos_sticks")),
    Mistake("bos_ignored",
            "you started from dates.BOS, not from the `bos` you were given: use the argument, so that "
            "the function works for any vocabulary.",
            _greedy_variant("bos_ignored")),
    Mistake("encoder_unmasked",
            "you encoded the source without src_mask, so the encoder's self-attention reads the padding: "
            "memory = model.encode(src, src_mask), and src_mask to model.decode at every step too.",
            _greedy_variant("encoder_unmasked")),
    Mistake("src_mask_dropped",
            "you decoded without src_mask, so the cross-attention reads the source's padding: pass it to "
            "model.decode at every step.",
            _greedy_variant("src_mask_dropped")),
)


@dataclasses.dataclass(frozen=True)
class GreedyExercise(DtypeKindExercise):
    """Greedy decoding: a mistake that samples (`RANDOM_MISTAKES`) cannot be recomputed draw for
    draw, so it is recognised by what sampling does to the twin cases (GREEDY_TWINS, the same
    inputs twice): two different results. Every other mistake by its outputs, as always."""

    def matching_mistake(self, results):
        random = [m for m in self.mistakes if m.name in RANDOM_MISTAKES]
        if random and len(results) > max(GREEDY_TWINS):
            first, second = (results[i][1] for i in GREEDY_TWINS)
            if self.difference(first, second) is not None:
                return random[0]
        return super().matching_mistake(results, [m for m in self.mistakes if m.name not in RANDOM_MISTAKES])


RANDOM_MISTAKES = {"sampled"}


# --------------------------------------------------------------------------- 5. think first

def _count(**change):
    question = dict(reference.CROSS_WEIGHTS_QUESTION, **change)
    return reference.cross_weights_count(**question)


_Q = reference.CROSS_WEIGHTS_QUESTION
COUNT_MISTAKES = (
    Mistake("count_source_self",
            "that is the size of the encoder's self-attention weights (source against source); "
            "in cross-attention the queries come from the decoder and the keys from the source.",
            _count(target_positions=_Q["source_length"])),
    Mistake("count_decoder_self",
            "that is the size of the decoder's self-attention weights (target against target); "
            "in cross-attention the queries come from the decoder and the keys from the source.",
            _count(source_length=_Q["target_positions"])),
    Mistake("count_one_head",
            "that is one head's weights: every head computes weights of its own.",
            _count(heads=1)),
    Mistake("count_one_sentence",
            "that is one sentence: every sentence of the batch has its own weights.",
            _count(batch=1)),
    Mistake("count_without_eos",
            "you counted one decoder position too few: the decoder reads BOS and then the target's "
            "characters, one position per token it predicts (the characters and EOS).",
            _count(target_positions=_Q["target_positions"] - 1)),
    Mistake("count_with_extra",
            "you counted one decoder position too many: the last target token (EOS) is predicted, "
            "never read.",
            _count(target_positions=_Q["target_positions"] + 1)),
)


EXERCISES = {exercise.grade_id: exercise for exercise in (
    GradientExercise(  # section 5's model trains through the student's function: a detached one must fail
        grade_id="encoder_decoder_cross_attention",
        function_name="cross_attention",
        reference=reference.cross_attention,
        make_cases=cross_attention_cases,
        make_gradient_cases=lambda seed: cross_attention_cases(seed)[:3],
        mistakes=CROSS_MISTAKES,
        forbidden=ATTENTION_BUILTINS + library.FORBIDDEN,
        output_names=("your output", "your weights"),
        atol=1e-8, rtol=1e-6,
        crash_hint="x is (B, T, d_model) and memory (B, S, d_model): q = x @ W_q, k = memory @ W_k, "
                   "v = memory @ W_v; the scores q @ k.transpose(-2, -1) are (B, T, S), and "
                   "src_mask[:, None, :] is (B, 1, S)",
    ),
    BlockExercise(
        grade_id="encoder_decoder_block",
        function_name="DecoderBlock",
        reference=reference.DecoderBlock,
        make_cases=block_cases,
        mistakes=BLOCK_MISTAKES,
        parts=BLOCK_PARTS,
        forbidden=TRANSFORMER_BUILTINS + ATTENTION_BUILTINS[2:] + MODEL_PARTS,
        output_names=("your block's output",),
        crash_hint="x is (B, T, d_model) and memory (B, S, d_model); self.self_attn(h, h, causal=True) and "
                   "self.cross_attn(h, memory, src_mask) return (B, T, d_model), and so does self.mlp(h)",
    ),
    Exercise(
        grade_id="encoder_decoder_teacher_forcing",
        function_name="teacher_forcing_loss",
        reference=reference.teacher_forcing_loss,
        make_cases=teacher_forcing_cases,
        mistakes=TF_MISTAKES,
        forbidden=library.FORBIDDEN,
        output_names=("your loss",),
        atol=1e-8, rtol=1e-6,
        crash_hint="tgt is (B, L): the decoder input torch.cat([a (B, 1) column of bos, tgt[:, :-1]], dim=1) "
                   "is (B, L) too, model(src, src_mask, decoder_input) gives logits (B, L, V), and "
                   "F.cross_entropy wants (N, V) logits and (N,) labels",
    ),
    GreedyExercise(
        grade_id="encoder_decoder_greedy",
        function_name="greedy_decode",
        reference=reference.greedy_decode,
        make_cases=greedy_cases,
        mistakes=GREEDY_MISTAKES,
        forbidden=library.FORBIDDEN,
        output_names=("your tokens",),
        atol=0.0, rtol=0.0,
        crash_hint="memory = model.encode(src, src_mask) once; tokens starts as a (B, 1) long tensor of bos; "
                   "model.decode(tokens, memory, src_mask) gives (B, t, V); append "
                   "logits[:, -1].argmax(dim=-1, keepdim=True) along dim=1",
    ),
    ValueExercise(
        grade_id="encoder_decoder_cross_weights",
        function_name="cross_weights_count",
        reference=reference.cross_weights_count(**reference.CROSS_WEIGHTS_QUESTION),
        make_cases=lambda seed: [((), {})],
        mistakes=COUNT_MISTAKES,
        output_names=("your count",),
        atol=0.0, rtol=0.0,
    ),
)}


def check(grade_id, answer):
    """The hidden test of one exercise: GradingError naming the mistake, or None when right."""
    return framework.check(EXERCISES, grade_id, answer)


def diagnose(grade_id, answer):
    """The first hidden block of a test cell: names a catalogued mistake (or a crash, a forbidden
    call, an input changed in place), silent on an unexplained wrong answer."""
    return framework.diagnose(EXERCISES, grade_id, answer)
