"""Student-safe building blocks for notebook 08 (masking and the transformer block).

* `MaskedSelfAttention`: multi-head self-attention with a boolean mask (True = may attend),
  the attention sub-layer students put inside their own transformer block. It is built on
  PyTorch's `torch.nn.functional.scaled_dot_product_attention` (off limits in notebooks 05 and
  07, whose guards catch it), so it gives nothing away there. Given a masked softmax (its
  attribute `masked_softmax`), it computes its weights with that function instead: that is how
  the student's own `masked_softmax` gets inside the language model.
* `choose_parts`: checks the student's `causal_mask`, `masked_softmax` and `TransformerBlock`
  the way their visible tests do (properties and a comparison with PyTorch's layer given the
  same weights), and says in one sentence which parts the language model will be built from.
  A part that does not pass yet (not written, raises, or computes something else) is replaced
  by PyTorch's; nothing the student wrote can stop the model from training.
* `CharLM`: a tiny causal character-level language model for the notebook's demos, built from
  the chosen parts: the student's blocks, mask and softmax where they pass, else PyTorch's own
  `torch.nn.TransformerEncoderLayer` (pre-norm, ReLU, the same computation as the exercise's
  block) and PyTorch's masking.

Nothing here is one of notebook 08's answers in a form its exercises could call: there is no
function that returns a causal or padding mask, the only softmax is PyTorch's (off limits in the
masked-softmax exercise, whose guard catches it), and the only transformer block is PyTorch's
`nn.TransformerEncoderLayer` (off limits in the block exercise).
"""
import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MaskedSelfAttention", "CharLM", "LMParts", "choose_parts", "copy_layer_weights"]


class MaskedSelfAttention(nn.Module):
    """Multi-head self-attention (notebook 07) that takes a boolean mask.

    Attributes ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``: ``nn.Linear(d_model, d_model)``;
    ``masked_softmax``: None (PyTorch's fused attention), or a function ``masked_softmax(scores,
    mask)`` (notebook 08's exercise 3) that turns the scaled scores into the weights.
    """

    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.masked_softmax = None

    def forward(self, x, mask=None):
        """Shape of x: (batch_size, T, d_model).
        Shape of mask (optional, boolean, True = may attend): broadcastable to (batch_size, T, T),
        e.g. (T, T) for a causal mask or (batch_size, 1, T) for padding.
        Returns the output, shape (batch_size, T, d_model). A query with no allowed key gets a
        zero attention output."""
        batch_size, T, d_model = x.shape

        def heads(t):  # (B, T, d_model) -> (B, h, T, d_k)
            return t.reshape(batch_size, T, self.num_heads, d_model // self.num_heads).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        if mask is not None:
            if mask.dtype != torch.bool:
                raise ValueError(f"mask must be boolean (True = may attend), got {mask.dtype}")
            if mask.dim() == 3:  # (B, Tq, Tk) or (B, 1, Tk): one mask for every head
                mask = mask.unsqueeze(1)
        if self.masked_softmax is not None:  # the weights written out, through the given softmax
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            allowed = mask if mask is not None else torch.ones(T, T, dtype=torch.bool)
            out = self.masked_softmax(scores, allowed) @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            if mask is not None:  # a fully masked query: zero output, whatever the backend does
                out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return self.out_proj(out.transpose(1, 2).reshape(batch_size, T, d_model))


# --------------------------------------------------------------------------- which parts to use

def library_layer(d_model, num_heads, d_ff):
    """PyTorch's pre-norm encoder layer with the exercise's block's arithmetic (ReLU, no dropout)."""
    return nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="relu",
                                      batch_first=True, norm_first=True)


@torch.no_grad()
def copy_layer_weights(layer, block):
    """Copy `nn.TransformerEncoderLayer` `layer`'s weights into a block with the exercise's
    attributes (attn.q_proj/k_proj/v_proj/out_proj, norm1, norm2, mlp[0], mlp[2]). PyTorch keeps
    W_Q, W_K, W_V stacked in one matrix `in_proj_weight`, in that order."""
    d_model = layer.self_attn.embed_dim
    for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
        getattr(block.attn, name).weight.copy_(layer.self_attn.in_proj_weight[i * d_model:(i + 1) * d_model])
        getattr(block.attn, name).bias.copy_(layer.self_attn.in_proj_bias[i * d_model:(i + 1) * d_model])
    for to, frm in ((block.attn.out_proj, layer.self_attn.out_proj), (block.norm1, layer.norm1),
                    (block.norm2, layer.norm2), (block.mlp[0], layer.linear1), (block.mlp[2], layer.linear2)):
        to.weight.copy_(frm.weight)
        to.bias.copy_(frm.bias)


def _failure(name, error):
    """Why calling the student's `name` failed, in a few words."""
    if isinstance(error, NotImplementedError):
        return "not written yet"
    text = str(error).strip().splitlines()
    text = text[0] if text else ""
    text = text if len(text) <= 90 else text[:87] + "..."
    return f"it raises {type(error).__name__}" + (f": {text}" if text else "")


def check_causal_mask(causal_mask):
    """None if `causal_mask(T)` is the boolean (T, T) lower triangle, diagonal included, for the
    lengths the model uses; else a short reason."""
    if causal_mask is None:
        return "its cell has not been run"
    for T in range(1, 33):  # every length the model meets (its context is 32 in the notebook)
        try:
            m = causal_mask(T)
        except Exception as error:  # the student's code: say what happened, never raise
            return _failure("causal_mask", error)
        if not isinstance(m, torch.Tensor) or m.dtype != torch.bool:
            return f"causal_mask({T}) is not a boolean tensor"
        if tuple(m.shape) != (T, T):
            return f"causal_mask({T}) has shape {tuple(m.shape)}, not ({T}, {T})"
        positions = torch.arange(T)
        if not torch.equal(m, positions[None, :] <= positions[:, None]):
            return f"causal_mask({T}) is not True exactly on and below the diagonal"
    return None


def check_masked_softmax(masked_softmax):
    """None if `masked_softmax` passes the properties its visible tests check (a worked example,
    blocked keys at 0, rows summing to 1, large scores, a fully masked row, finite gradients, no
    softmax built-in); else a short reason."""
    if masked_softmax is None:
        return "its cell has not been run"
    from course_utils.grading import SOFTMAX_BUILTINS, GradingError, call_without

    try:
        w = masked_softmax(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[True, False, True]]))
        if not isinstance(w, torch.Tensor) or not torch.allclose(w, torch.tensor([[0.1192, 0.0, 0.8808]]), atol=1e-4):
            return "its weights for [[1, 2, 3]] with key 1 blocked are not [[0.12, 0, 0.88]]"
        g = torch.Generator().manual_seed(0)
        mask = torch.ones(4, 5, dtype=torch.bool).tril()
        w = masked_softmax(3.0 * torch.randn(2, 3, 4, 5, generator=g), mask)
        if tuple(w.shape) != (2, 3, 4, 5) or (w[..., ~mask] != 0).any() \
                or not torch.allclose(w.sum(-1), torch.ones(2, 3, 4), atol=1e-5):
            return "its weights for a batch of heads are not 0 on the blocked keys and summing to 1"
        w = masked_softmax(torch.tensor([[300.0, 200.0, 400.0]]), torch.tensor([[True, True, False]]))
        if not torch.allclose(w, torch.tensor([[1.0, 0.0, 0.0]]), atol=1e-4):
            return "scores in the hundreds overflow"
        scores = torch.randn(3, 4, generator=g, requires_grad=True)
        w = masked_softmax(scores, torch.tensor([[True, False, True, True], [False] * 4, [False, False, True, False]]))
        if not torch.isfinite(w).all() or (w[1] != 0).any():
            return "a row with no allowed key does not get zero weights"
        (w * torch.arange(4.0)).sum().backward()
        if not torch.isfinite(scores.grad).all():
            return "its gradient has nan where a row has no allowed key"
        scores = torch.tensor([[0.0, 1.0, 1e4]], requires_grad=True)
        w = masked_softmax(scores, torch.tensor([[True, True, False]]))
        (w * torch.arange(3.0)).sum().backward()
        if not torch.allclose(w.detach(), torch.tensor([[0.2689, 0.7311, 0.0]]), atol=1e-4) \
                or not torch.isfinite(scores.grad).all():
            return "a huge blocked score changes its weights or makes its gradient nan"
        w = masked_softmax(torch.tensor([[-30000.0, -30001.0, 0.0]]), torch.tensor([[True, True, False]]))
        if not torch.allclose(w, torch.tensor([[0.7311, 0.2689, 0.0]]), atol=1e-4):
            return "a blocked key still gets weight when the allowed scores are far below zero (fill with -inf)"
        call_without(masked_softmax, (torch.tensor([[1.0, 2.0]]), torch.tensor([[True, False]])),
                     forbidden=SOFTMAX_BUILTINS)
    except GradingError as error:  # the guard's verdict: it says itself what was used
        return str(error).replace("Your code", "it", 1).rstrip(".")
    except Exception as error:  # the student's code: say what happened, never raise
        return _failure("masked_softmax", error)
    return None


def check_block(block):
    """None if `block(d_model, num_heads, d_ff, norm_first=...)` computes what PyTorch's
    `nn.TransformerEncoderLayer` computes given the same weights, in both arrangements, with and
    without a causal mask (the comparison its visible tests make); else a short reason."""
    if block is None:
        return "its cell has not been run"
    g = torch.Generator().manual_seed(0)
    T, d_model = 6, 12
    allowed = torch.arange(T)[None, :] <= torch.arange(T)[:, None]
    try:
        for norm_first in (True, False):
            arrangement = "pre-norm" if norm_first else "post-norm"
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(1)
                mine = block(d_model, 3, 20, norm_first=norm_first)
                layer = nn.TransformerEncoderLayer(d_model, 3, 20, dropout=0.0, activation="relu",
                                                   batch_first=True, norm_first=norm_first)
            with torch.no_grad():  # LayerNorms away from gamma = 1, beta = 0 show where they are applied
                for p in (*layer.norm1.parameters(), *layer.norm2.parameters(), layer.self_attn.in_proj_bias):
                    p.add_(0.5 * torch.randn(p.shape, generator=g))
            try:
                copy_layer_weights(layer, mine)
            except Exception:
                return "it lacks the attributes attn, norm1, norm2 and mlp of the exercise"
            layer.train()  # dropout is 0; training mode keeps PyTorch on its plain path
            x = 2.0 * torch.randn(2, T, d_model, generator=g) + 1.0
            with torch.no_grad():
                for mask in (None, allowed):
                    got = mine(x) if mask is None else mine(x, mask=mask)
                    expected = layer(x) if mask is None else layer(x, src_mask=~mask)
                    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
                        return f"its {arrangement} output does not have the shape (B, T, d_model)"
                    gap = float((got - expected).abs().max())
                    if not gap <= 1e-4:
                        where = "with a causal mask" if mask is not None else "without a mask"
                        return (f"its {arrangement} output {where} differs from PyTorch's layer with the same "
                                f"weights (by up to {gap:.2g})")
    except Exception as error:  # the student's code: say what happened, never raise
        return _failure("TransformerBlock", error)
    return None


@dataclasses.dataclass
class LMParts:
    """What `CharLM` is built from: the student's functions and class where they passed their
    checks, None where PyTorch's stand in; `reasons` says why each missing one is missing."""

    block: object = None
    masked_softmax: object = None
    causal_mask: object = None
    reasons: dict = dataclasses.field(default_factory=dict)

    @property
    def yours(self):
        """Names of the student's parts the model uses (the softmax only inside the student's block)."""
        used = {"TransformerBlock": self.block is not None,
                "masked_softmax": self.block is not None and self.masked_softmax is not None,
                "causal_mask": self.causal_mask is not None}
        return [name for name, yes in used.items() if yes]

    def without_student_code(self, reason):
        """PyTorch's parts only, each missing one with `reason` (e.g. the student's code failed
        in training)."""
        return LMParts(reasons={name: self.reasons.get(name, reason)
                                for name in ("TransformerBlock", "masked_softmax", "causal_mask")})

    @property
    def sentence(self):
        """One sentence: which parts the model trains, and why PyTorch's stand in where they do."""
        def part(name, library):
            if name in self.yours:
                return f"YOUR {name}"
            if name == "masked_softmax" and self.masked_softmax is not None:
                return f"{library} inside it (your masked_softmax passes its checks, but only your block can call it)"
            return library + (f" (your {name} {self.reasons[name]})" if name in self.reasons else "")

        block = part("TransformerBlock", "PyTorch's nn.TransformerEncoderLayer")
        softmax = part("masked_softmax", "PyTorch's softmax")
        mask = part("causal_mask", "PyTorch's causal mask")
        ending = " (each passes the checks its tests make)" if len(self.yours) == 3 else ""
        return f"This model trains with {block}, {softmax} and {mask}{ending}."


def choose_parts(causal_mask=None, masked_softmax=None, block=None):
    """Check the student's `causal_mask`, `masked_softmax` and `TransformerBlock` class (None: not
    defined yet) as their visible tests do, and return the `LMParts` to build `CharLM` from:
    each one that passes, and PyTorch's in place of each one that does not. Never raises."""
    reasons = {}
    for name, part, check in (("TransformerBlock", block, check_block),
                              ("masked_softmax", masked_softmax, check_masked_softmax),
                              ("causal_mask", causal_mask, check_causal_mask)):
        if part is None:
            reasons[name] = "is not defined: run its cell"
        else:
            reason = check(part)
            if reason == "not written yet":
                reasons[name] = "is not written yet"
            elif reason is not None:
                reasons[name] = f"does not pass its tests yet: {reason}"
    if "TransformerBlock" not in reasons and "masked_softmax" not in reasons:
        with torch.random.fork_rng(devices=[]):
            attention = getattr(block(8, 2, 16, norm_first=True), "attn", None)
        if not isinstance(attention, MaskedSelfAttention):  # only the provided attention takes a softmax
            reasons["masked_softmax"] = "cannot be used: your block's attn is not the provided MaskedSelfAttention"
    return LMParts(block=None if "TransformerBlock" in reasons else block,
                   masked_softmax=None if "masked_softmax" in reasons else masked_softmax,
                   causal_mask=None if "causal_mask" in reasons else causal_mask,
                   reasons=reasons)


# --------------------------------------------------------------------------- the model

class CharLM(nn.Module):
    """A causal character-level language model: token and learned position embeddings, a stack
    of pre-norm transformer blocks under a causal mask, a final LayerNorm and a linear read-out
    to one logit per character of the vocabulary.

    `parts` (an `LMParts`, default: PyTorch's only) says what the blocks are: the student's
    `TransformerBlock` (with the student's `masked_softmax` inside its attention, if given), or
    PyTorch's `nn.TransformerEncoderLayer`; and whose causal mask they get. Either way every
    block starts from the weights PyTorch's layer would get with the same seed (copied into the
    student's block), so the two can be compared step by step."""

    def __init__(self, vocab_size, context=32, d_model=64, num_heads=4, num_layers=2, d_ff=128, parts=None):
        super().__init__()
        self.parts = parts if parts is not None else LMParts()
        self.context = context
        self.token = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(context, d_model)
        blocks = []
        for _ in range(num_layers):
            layer = library_layer(d_model, num_heads, d_ff)
            if self.parts.block is not None:
                with torch.random.fork_rng(devices=[]):  # the random numbers PyTorch's model would get
                    mine = self.parts.block(d_model, num_heads, d_ff, norm_first=True)
                copy_layer_weights(layer, mine)
                if self.parts.masked_softmax is not None and isinstance(getattr(mine, "attn", None),
                                                                        MaskedSelfAttention):
                    mine.attn.masked_softmax = self.parts.masked_softmax
                layer = mine
            blocks.append(layer)
        self.blocks = nn.ModuleList(blocks)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        self.d_model = d_model

    @property
    def uses_library_blocks(self):
        return self.parts.block is None

    def forward(self, tokens):
        """Shape of tokens: (batch_size, T) with T <= context. Returns logits (batch_size, T,
        vocab_size): position t's logits predict token t + 1 from tokens 0..t only."""
        T = tokens.shape[-1]
        if T > self.context:
            raise ValueError(f"at most {self.context} tokens fit in the context, got {T}")
        x = self.token(tokens) + self.position(torch.arange(T, device=tokens.device))
        if self.parts.causal_mask is not None:
            allowed = self.parts.causal_mask(T)
        else:
            allowed = torch.ones(T, T, dtype=torch.bool).tril()
        for block in self.blocks:
            if self.uses_library_blocks:  # PyTorch's convention is the opposite: True = blocked
                x = block(x, src_mask=~allowed)
            else:
                x = block(x, allowed)
        return self.head(self.norm(x))
