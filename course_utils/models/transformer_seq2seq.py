"""A small encoder–decoder Transformer for notebook 10, trained on notebook 04's dates.

Student-safe, but the exercises' hidden tests forbid calling anything here that computes an
answer (`FORBIDDEN`): notebook 10 asks the student to write cross-attention, a decoder block,
the teacher-forcing loss and greedy decoding, and this module must train and decode before
they have, so it has its own versions, organised differently (a multi-head `Attention` layer
for every kind of attention, a `DecoderLayer` that loops over its sub-layers, decoding of whole
batches).

The model can be **assembled from the student's answers**: `TransformerSeq2Seq(block=...)`
builds its decoder from the student's `DecoderBlock` class (which holds `Attention` layers
under the exercise's attribute names), and `attend=...` makes every `Attention` layer that is
not causal (the encoder's self-attention and every cross-attention) run the student's
single-head `cross_attention` once per head. `parts_agree` says whether a student's parts
compute what this module's own do, on random inputs, before they are trusted with training.

Shapes: B sentences, S source characters, T target positions, d = d_model, H heads.
Masks are boolean, True = a real source character (may be attended to).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from course_utils import optim
from course_utils.data import dates
from course_utils.grading.errors import GradingError
from course_utils.models.seq2seq import steps_to  # one definition for both models' histories
from course_utils.training import fit_and_evaluate, one_thread

__all__ = ["Attention", "EncoderLayer", "DecoderLayer", "TransformerSeq2Seq", "EncoderCountingSeq2Seq",
           "source_positions", "parts_agree", "assemble", "fit", "steps_to", "greedy_translate", "exact_match",
           "cross_attention_maps", "residual_sublayers", "FORBIDDEN"]

# The functions that would answer notebook 10's exercises: off limits in their hidden tests.
# Every layer of the model runs `residual_sublayers`, so only the block exercise forbids it (a
# block that inherits DecoderLayer's forward would otherwise pass as the student's own).
FORBIDDEN = (
    "course_utils.models.transformer_seq2seq:Attention",
    "course_utils.models.transformer_seq2seq:DecoderLayer",
    "course_utils.models.transformer_seq2seq:EncoderLayer",
    "course_utils.models.transformer_seq2seq:decoder_input",
    "course_utils.models.transformer_seq2seq:teacher_forced_loss",
    "course_utils.models.transformer_seq2seq:greedy_ids",
    "course_utils.models.transformer_seq2seq:greedy_translate",
    "course_utils.models.transformer_seq2seq:cross_attention_maps",
    "course_utils.models.transformer_seq2seq:fit",
    "course_utils.models.transformer_seq2seq:exact_match",
)


class Attention(nn.Module):
    """Multi-head attention of the positions of `x` over those of `memory`.

    Self-attention is the case memory = x; cross-attention has x from the decoder and memory
    from the encoder. Projections q_proj, k_proj, v_proj, out_proj: nn.Linear(d, d, bias=False).
    `attend`: None (this module's own computation) or a single-head function
    attend(x, memory, W_q, W_k, W_v, key_mask) -> (output, weights), run once per head (the
    student's cross_attention; used only without a causal mask). With `keep_weights`, the
    weights (B, H, T, S) of the last call are kept in `self.weights`.
    """

    def __init__(self, d_model, num_heads):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.attend = None
        self.keep_weights = False
        self.weights = None
        # True: the scores, softmax and product written out instead of PyTorch's fused kernel, which
        # torch.vmap runs copy by copy (`course_utils.stacked` trains stacked copies of this model).
        self.explicit = False

    def _split(self, t):  # (B, n, d) -> (B, H, n, d_k)
        return t.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)

    def forward(self, x, memory, key_mask=None, causal=False):
        """x (B, T, d), memory (B, S, d), key_mask (B, S) or None, causal: position t attends
        only to memory positions <= t (self-attention of a decoder). Returns (B, T, d)."""
        if self.attend is not None and not causal:
            return self._per_head(x, memory, key_mask)
        q, k, v = self._split(self.q_proj(x)), self._split(self.k_proj(memory)), self._split(self.v_proj(memory))
        allowed = None
        if key_mask is not None:
            allowed = key_mask[:, None, None, :]
        if causal:
            lower = torch.ones(x.shape[1], memory.shape[1], dtype=torch.bool, device=x.device).tril()
            allowed = lower if allowed is None else allowed & lower
        if self.keep_weights or self.explicit:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
            if allowed is not None:
                scores = scores.masked_fill(~allowed, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            if self.keep_weights:
                self.weights = weights.detach()
            out = weights @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return self.out_proj(out.transpose(1, 2).flatten(-2))

    def _head_matrices(self, projection):
        """The (d, d_k) matrix of every head, as x @ W takes it: one view and one split, whose
        backward is a single stack (slicing per head costs a full-size gradient per slice)."""
        return projection.weight.view(self.num_heads, self.head_dim, -1).transpose(1, 2).unbind(0)

    def _per_head(self, x, memory, key_mask):
        outputs, weights = [], []
        for W_q, W_k, W_v in zip(self._head_matrices(self.q_proj), self._head_matrices(self.k_proj),
                                 self._head_matrices(self.v_proj)):
            out, w = self.attend(x, memory, W_q, W_k, W_v, key_mask)
            outputs.append(out)
            weights.append(w)
        if self.keep_weights:
            self.weights = torch.stack(weights, dim=1).detach()
        return self.out_proj(torch.cat(outputs, dim=-1))


def _mlp(d_model, d_ff):
    return nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))


class EncoderLayer(nn.Module):
    """Self-attention over the source (padding hidden) and an MLP, each with a residual and a
    LayerNorm, pre-norm (norm_first=True) or post-norm."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = Attention(d_model, num_heads)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.mlp = _mlp(d_model, d_ff)

    def forward(self, x, src_mask=None):
        sublayers = [(self.norm1, lambda h: self.self_attn(h, h, src_mask)), (self.norm2, self.mlp)]
        return residual_sublayers(x, sublayers, self.norm_first)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's output, MLP; attribute names
    as in notebook 10's exercise (self_attn, cross_attn, norm1-3, mlp)."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn, self.cross_attn = Attention(d_model, num_heads), Attention(d_model, num_heads)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.mlp = _mlp(d_model, d_ff)

    def forward(self, x, memory, src_mask=None):
        sublayers = [(self.norm1, lambda h: self.self_attn(h, h, causal=True)),
                     (self.norm2, lambda h: self.cross_attn(h, memory, src_mask)),
                     (self.norm3, self.mlp)]
        return residual_sublayers(x, sublayers, self.norm_first)


def residual_sublayers(x, sublayers, norm_first):
    """Each (norm, sublayer) in turn, pre-norm x + f(norm(x)) or post-norm norm(x + f(x))."""
    for norm, sublayer in sublayers:
        x = x + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))
    return x


class TransformerSeq2Seq(nn.Module):
    """Encoder–decoder Transformer over the dates' vocabularies.

    Token embeddings plus learned position embeddings (with `positions_from_end`, the source's
    counted from its end, see `source_positions`), `encoder_layers` encoder layers (default
    `num_layers`) and `num_layers` decoder layers, a final LayerNorm on each side when pre-norm, and a linear
    read-out. `block`: the decoder block class, called as block(d_model, num_heads, d_ff,
    norm_first=...) (default: this module's DecoderLayer); `attend`: see `Attention`.
    """

    def __init__(self, d_model=48, num_heads=4, num_layers=2, d_ff=96, norm_first=True, block=None,
                 attend=None, source_vocab=len(dates.SOURCE_VOCAB), target_vocab=len(dates.TARGET_VOCAB),
                 max_source=40, max_target=16, encoder_layers=None, positions_from_end=False):
        super().__init__()
        encoder_layers = num_layers if encoder_layers is None else encoder_layers
        self.config = dict(d_model=d_model, num_heads=num_heads, num_layers=num_layers, d_ff=d_ff,
                           norm_first=norm_first, source_vocab=source_vocab, target_vocab=target_vocab,
                           max_source=max_source, max_target=max_target, encoder_layers=encoder_layers,
                           positions_from_end=positions_from_end)
        self.norm_first = norm_first
        self.positions_from_end = positions_from_end
        self.source_embedding = nn.Embedding(source_vocab, d_model)
        self.source_position = nn.Embedding(max_source, d_model)
        self.target_embedding = nn.Embedding(target_vocab, d_model)
        self.target_position = nn.Embedding(max_target, d_model)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, norm_first) for _ in range(encoder_layers))
        block = block or DecoderLayer
        self.decoder = nn.ModuleList(block(d_model, num_heads, d_ff, norm_first=norm_first)
                                     for _ in range(num_layers))
        self.encoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.out = nn.Linear(d_model, target_vocab)
        if attend is not None:
            for module in self.modules():
                if isinstance(module, Attention):
                    module.attend = attend

    def encode(self, src, src_mask):
        """src (B, S) ids, src_mask (B, S) or None (no padding) -> memory (B, S, d)."""
        positions = (source_positions(src, src_mask) if self.positions_from_end
                     else torch.arange(src.shape[1], device=src.device))
        x = self.source_embedding(src) + self.source_position(positions)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return self.encoder_norm(x)

    def decode(self, tgt_in, memory, src_mask):
        """tgt_in (B, T) decoder input ids (BOS first), memory (B, S, d) -> logits (B, T, V):
        position t predicts target token t from decoder inputs 0..t and the whole source."""
        x = self.target_embedding(tgt_in) + self.target_position(torch.arange(tgt_in.shape[1], device=tgt_in.device))
        for block in self.decoder:
            x = block(x, memory, src_mask)
        return self.out(self.decoder_norm(x))

    def forward(self, src, src_mask, tgt_in):
        """Teacher-forced logits (B, T, V) for decoder inputs tgt_in (B, T)."""
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask)


def source_positions(src, src_mask=None):
    """The position of every source character counted from the end of its own sentence: the last
    real character is 0, the one before it 1, ...; padding gets 0 (it is never attended to).

    Sources are padded on the right, so a count from the start puts the end of a date (the year,
    in most formats) at a different position for every length; counted from the end, it always
    has the same positions. With the notebook's other settings and 300 steps, its held-out exact
    match went from 0.974 and 0.969 (positions from the start) to 0.993 and 0.994 (two seeds,
    measured when the choice was made)."""
    index = torch.arange(src.shape[1], device=src.device)
    if src_mask is None:
        return (src.shape[1] - 1 - index).expand_as(src)
    lengths = src_mask.sum(dim=1, keepdim=True)
    return (lengths - 1 - index).clamp(min=0)


class EncoderCountingSeq2Seq(TransformerSeq2Seq):
    """A TransformerSeq2Seq for tests of decoding: its encoder may run `max_encodes` times (once
    per decoding), and it says so when called more often."""

    AGAIN = ("your decoding ran the encoder again at a later step: the source does not change while "
             "decoding, so run model.encode once, before the loop, and give its output (the memory) "
             "to model.decode at every step.")

    def __init__(self, max_encodes=1, **config):
        super().__init__(**config)
        self.max_encodes = max_encodes
        self.encode_calls = 0

    def encode(self, src, src_mask):
        self.encode_calls += 1
        if self.encode_calls > self.max_encodes:
            raise GradingError(self.AGAIN)
        return super().encode(src, src_mask)


# --------------------------------------------------------------------------- the student's parts

def _agree(got, expected, tol=1e-4):
    return (isinstance(got, torch.Tensor) and got.shape == expected.shape
            and bool(torch.allclose(got.double(), expected.double(), atol=tol, rtol=tol)))


def parts_agree(cross_attention=None, block=None):
    """{"cross_attention": bool, "block": bool}: whether a student's single-head cross-attention
    function and decoder block class compute what this module's Attention and DecoderLayer do,
    on random inputs with padding (both arrangements of the block). A part that is None, raises
    or differs is False. Runs under torch.no_grad, with its own random numbers."""
    result = {"cross_attention": False, "block": False}
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(0)
        B, T, S, d = 3, 4, 6, 8
        x, memory = torch.randn(B, T, d, generator=g), torch.randn(B, S, d, generator=g)
        key_mask = torch.arange(S)[None, :] < torch.tensor([6, 3, 1])[:, None]
        if cross_attention is not None:
            try:
                layer = Attention(d, 2)
                expected = layer(x, memory, key_mask)
                layer.attend = cross_attention
                result["cross_attention"] = _agree(layer(x, memory, key_mask), expected)
            except Exception:  # noqa: BLE001 - an unfinished answer is simply not used
                pass
        if block is not None:
            try:
                ok = True
                for norm_first in (True, False):
                    ours = DecoderLayer(d, 2, 16, norm_first=norm_first)
                    for p in ours.parameters():
                        p.add_(0.3 * torch.randn(p.shape, generator=g))
                    theirs = block(d, 2, 16, norm_first=norm_first)
                    theirs.load_state_dict(ours.state_dict())
                    theirs.eval()
                    ok = ok and _agree(theirs(x, memory, key_mask), ours(x, memory, key_mask))
                result["block"] = ok
            except Exception:  # noqa: BLE001
                pass
    return result


def assemble(cross_attention=None, block=None, seed=0, **config):
    """A fresh TransformerSeq2Seq built from the student's parts where they agree with this
    module's own (`parts_agree`), else from this module's. Returns (model, {"cross_attention":
    bool, "block": bool}) saying which parts are the student's."""
    used = parts_agree(cross_attention, block)
    torch.manual_seed(seed)
    model = TransformerSeq2Seq(block=block if used["block"] else None,
                               attend=cross_attention if used["cross_attention"] else None, **config)
    return model, used


# --------------------------------------------------------------------------- training

def decoder_input(tgt, bos=dates.BOS):
    """The teacher-forcing input: the target shifted right by one behind BOS."""
    return torch.cat([torch.full_like(tgt[:, :1], bos), tgt[:, :-1]], dim=1)


def teacher_forced_loss(model, src, src_mask, tgt):
    logits = model(src, src_mask, decoder_input(tgt))
    return F.cross_entropy(logits.transpose(1, 2), tgt)


def _learning_rate(step, lr, warmup, steps, final=0.1):
    """Linear warm-up over `warmup` steps, then a linear decay to `final` * `lr` at `steps`."""
    if warmup and step <= warmup:
        return lr * step / warmup
    done = (step - warmup) / max(1, steps - warmup)
    return lr * (1.0 - (1.0 - final) * done)


def fit(model, steps, batch_size=64, lr=3e-3, warmup=50, seed=0, eval_pairs=(), eval_every=0,
        description="training", stop_at=None, decay_steps=None, final=0.1):
    """Train with Adam (PyTorch's fused kernel) and teacher forcing on fresh seeded batches of
    training dates (the batches of notebook 04's `seq2seq.fit` for the same seed), on one CPU thread.

    The learning rate rises linearly over `warmup` steps (0: no warm-up), then falls linearly
    to `final` * lr at `decay_steps` (default `steps`). Every `eval_every` steps (and at the end) the
    greedy exact match on `eval_pairs` is recorded; with `stop_at`, training stops at the first
    evaluation that reaches it. Returns the history: lists "step", "seconds" (training time
    only), "accuracy", "loss" (one per step), and "total_seconds".
    """
    eval_pairs = list(eval_pairs)
    decay_steps = decay_steps or steps
    with one_thread():
        torch.manual_seed(seed)
        # fused: one kernel for all the parameters, a third of the plain step's time for this small model
        optimizer = optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), fused=True)
        return fit_and_evaluate(
            model, steps, dates.training_batches(batch_size, seed=seed), teacher_forced_loss, optimizer,
            evaluate=(lambda trained: exact_match(trained, eval_pairs)) if eval_pairs else None,
            eval_every=eval_every, stop_at=stop_at, description=description,
            learning_rate=lambda step: _learning_rate(step, lr, warmup, decay_steps, final))


# --------------------------------------------------------------------------- decoding

@torch.no_grad()
def greedy_ids(model, src, src_mask, steps=dates.TARGET_LENGTH + 1, bos=dates.BOS):
    """Greedy decoding of a batch: the encoder once, then one decoder pass per output token over
    the tokens so far. Returns ids (B, steps), BOS not included."""
    was_training = model.training
    model.eval()
    memory = model.encode(src, src_mask)
    ids = torch.full((len(src), 1), bos, dtype=torch.long)
    for _ in range(steps):
        logits = model.decode(ids, memory, src_mask)
        ids = torch.cat([ids, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
    model.train(was_training)
    return ids[:, 1:]


def greedy_translate(model, texts):
    """Translate a list of strings greedily; returns the ISO strings."""
    src, mask = dates.pad_sources(texts)
    return [dates.decode_target(row) for row in greedy_ids(model, src, mask)]


def exact_match(model, pairs, batch_size=500):
    """Share of (source, ISO target) pairs translated exactly right by greedy decoding."""
    with torch.no_grad():
        right = 0
        for i in range(0, len(pairs), batch_size):
            chunk = pairs[i:i + batch_size]
            right += sum(g == t for g, (_, t) in zip(greedy_translate(model, [s for s, _ in chunk]), chunk))
    return right / len(pairs)


@torch.no_grad()
def cross_attention_maps(model, text):
    """The greedy translation of `text` and the cross-attention weights that produced it.

    Returns (source characters, output characters (the ISO date, then "<eos>"), weights):
    weights is a float tensor (layers, heads, len(output), len(source)); row t of a map is
    where the decoder's position t looked in the source while predicting output character t.
    """
    src, mask = dates.pad_sources([text])
    ids = greedy_ids(model, src, mask)
    iso = dates.decode_target(ids[0])
    output = list(iso) + ["<eos>"]
    attention = [block.cross_attn for block in model.decoder]
    for layer in attention:
        layer.keep_weights = True
    try:
        memory = model.encode(src, mask)
        model.decode(torch.cat([torch.full((1, 1), dates.BOS), ids], dim=1)[:, :len(output)], memory, mask)
        weights = torch.stack([layer.weights[0] for layer in attention])
    finally:
        for layer in attention:
            layer.keep_weights, layer.weights = False, None
    return list(text.lower()), output, weights[:, :, :len(output), :src.shape[1]]
