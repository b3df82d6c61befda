"""Notebook 10's reference (course_utils.reference.encoder_decoder) against PyTorch's own layers,
and the course model it runs in (course_utils.models.transformer_seq2seq)."""
import math

import pytest
import torch
from torch import nn

from course_utils.data import dates
from course_utils.models import transformer_seq2seq as library
from course_utils.reference import encoder_decoder as ref

DT = torch.float64


def _inputs(B=3, T=4, S=6, d=8, lengths=(6, 3, 1), seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, d, generator=g, dtype=DT)
    memory = torch.randn(B, S, d, generator=g, dtype=DT)
    mask = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]
    return x, memory, mask


@pytest.mark.parametrize("num_heads", [1, 2, 4])
def test_cross_attention_heads_equal_torch_multihead_attention(num_heads):
    """Each head of PyTorch's layer is our single-head function on that head's rows of the
    projection matrices; the concatenated heads through out_proj are its output."""
    d = 8
    x, memory, mask = _inputs(d=d)
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(d, num_heads, bias=False, batch_first=True).double()
    W_q, W_k, W_v = mha.in_proj_weight.detach().chunk(3)
    d_k = d // num_heads
    outputs, weights = [], []
    for h in range(num_heads):
        rows = slice(h * d_k, (h + 1) * d_k)
        out, w = ref.cross_attention(x, memory, W_q[rows].T, W_k[rows].T, W_v[rows].T, mask)
        outputs.append(out)
        weights.append(w)
    ours = torch.cat(outputs, dim=-1) @ mha.out_proj.weight.detach().T
    theirs, their_weights = mha(x, memory, memory, key_padding_mask=~mask, average_attn_weights=False)
    torch.testing.assert_close(ours, theirs.detach())
    torch.testing.assert_close(torch.stack(weights, dim=1), their_weights.detach())


def test_cross_attention_properties():
    x, memory, mask = _inputs()
    g = torch.Generator().manual_seed(1)
    W_q, W_k = torch.randn(8, 3, generator=g, dtype=DT), torch.randn(8, 3, generator=g, dtype=DT)
    W_v = torch.randn(8, 5, generator=g, dtype=DT)
    out, w = ref.cross_attention(x, memory, W_q, W_k, W_v, mask)
    assert out.shape == (3, 4, 5) and w.shape == (3, 4, 6)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, dtype=DT))
    assert bool((w[~mask[:, None, :].expand_as(w)] == 0).all())
    # The padding's content cannot change the output.
    changed = memory.clone()
    changed[~mask] = 100.0
    torch.testing.assert_close(ref.cross_attention(x, changed, W_q, W_k, W_v, mask)[0], out)
    # Without a mask every source position counts.
    assert bool((ref.cross_attention(x, memory, W_q, W_k, W_v)[1] > 0).all())


def _copy_into_torch(block, layer, norm_first):
    """Our block's weights into nn.TransformerDecoderLayer(bias=False) (no biases anywhere)."""
    with torch.no_grad():
        for ours, theirs in ((block.self_attn, layer.self_attn), (block.cross_attn, layer.multihead_attn)):
            theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
            theirs.out_proj.weight.copy_(ours.out_proj.weight)
        for i in (1, 2, 3):
            getattr(layer, f"norm{i}").weight.copy_(getattr(block, f"norm{i}").weight)
        layer.linear1.weight.copy_(block.mlp[0].weight)
        layer.linear2.weight.copy_(block.mlp[2].weight)


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_equals_torch_decoder_layer(norm_first):
    """With the biases at zero (PyTorch's bias=False drops the LayerNorms' and the MLP's), the
    reference block computes nn.TransformerDecoderLayer."""
    torch.manual_seed(0)
    d, heads, d_ff = 8, 2, 16
    block = ref.DecoderBlock(d, heads, d_ff, norm_first=norm_first).double().eval()
    with torch.no_grad():
        for name, p in block.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif name.startswith("norm"):
                p.uniform_(0.5, 1.5)
    layer = nn.TransformerDecoderLayer(d, heads, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first,
                                       bias=False).double().eval()
    _copy_into_torch(block, layer, norm_first)
    x, memory, mask = _inputs(d=d)
    T = x.shape[1]
    blocked_future = torch.ones(T, T, dtype=torch.bool).triu(1)
    with torch.no_grad():
        theirs = layer(x, memory, tgt_mask=blocked_future, memory_key_padding_mask=~mask)
        torch.testing.assert_close(block(x, memory, mask), theirs)


def test_decoder_block_equals_the_course_decoder_layer():
    """The model's own DecoderLayer (a separate implementation) computes the same."""
    for norm_first in (True, False):
        torch.manual_seed(1)
        ours = library.DecoderLayer(8, 2, 16, norm_first=norm_first).double()
        block = ref.DecoderBlock(8, 2, 16, norm_first=norm_first).double()
        block.load_state_dict(ours.state_dict())
        x, memory, mask = _inputs()
        with torch.no_grad():
            torch.testing.assert_close(block(x, memory, mask), ours(x, memory, mask))


def test_decoder_block_is_causal_and_ignores_padding():
    torch.manual_seed(2)
    block = ref.DecoderBlock(8, 2, 16).double().eval()
    x, memory, mask = _inputs()
    with torch.no_grad():
        out = block(x, memory, mask)
        future = x.clone()
        future[:, 2:] += 5.0
        torch.testing.assert_close(block(future, memory, mask)[:, :2], out[:, :2])
        padded = memory.clone()
        padded[~mask] = -7.0
        torch.testing.assert_close(block(x, padded, mask), out)


def _toy_model(seed=0):
    torch.manual_seed(seed)
    return library.TransformerSeq2Seq(d_model=8, num_heads=2, num_layers=1, d_ff=16).double().eval()


def _batch():
    src, mask = dates.pad_sources(["22 November 2026", "2026/11/22", "sun 1 jan 1950"])
    tgt = torch.tensor([dates.encode_target(t) for t in ("2026-11-22", "2026-11-22", "1950-01-01")])
    return src, mask, tgt


def test_teacher_forcing_loss_equals_the_course_model_loss_and_the_one_step_view():
    model = _toy_model()
    src, mask, tgt = _batch()
    loss = ref.teacher_forcing_loss(model, src, mask, tgt, dates.BOS)
    torch.testing.assert_close(loss, library.teacher_forced_loss(model, src, mask, tgt))
    # Position t's logits are those of a decoder fed only BOS, y_1..y_t-1: teacher forcing is
    # every greedy step at once, with the true tokens as the history.
    memory = model.encode(src, mask)
    total = 0.0
    for t in range(tgt.shape[1]):
        history = torch.cat([torch.full((len(src), 1), dates.BOS), tgt[:, :t]], dim=1)
        logits = model.decode(history, memory, mask)[:, -1]
        total = total + nn.functional.cross_entropy(logits, tgt[:, t], reduction="sum")
    torch.testing.assert_close(loss, total / tgt.numel())


def test_greedy_decode_equals_the_course_decoder_and_runs_the_encoder_once():
    torch.manual_seed(3)
    model = library.EncoderCountingSeq2Seq(max_encodes=1, d_model=8, num_heads=2, num_layers=1, d_ff=16)
    src, mask, _ = _batch()
    ids = ref.greedy_decode(model, src, mask, dates.BOS, 11)
    assert ids.shape == (3, 11) and ids.dtype == torch.long and model.encode_calls == 1
    model.encode_calls = 0
    torch.testing.assert_close(ids, library.greedy_ids(model, src, mask))


def test_the_counting_model_stops_a_second_encoder_run():
    from course_utils.grading import GradingError
    model = library.EncoderCountingSeq2Seq(max_encodes=1, d_model=8, num_heads=2, num_layers=1, d_ff=16)
    src, mask, _ = _batch()
    model.encode(src, mask)
    with pytest.raises(GradingError, match="ran the encoder again"):
        model.encode(src, mask)


def test_cross_weights_count():
    q = ref.CROSS_WEIGHTS_QUESTION
    assert ref.cross_weights_count(**q) == q["batch"] * q["heads"] * q["target_positions"] * q["source_length"]
    # The shape behind the question: a decoder layer's cross-attention weights are (B, H, T, S).
    model = _toy_model()
    src, mask = dates.pad_sources(["wednesday, september 30, 2048"] * 2)
    _, _, weights = library.cross_attention_maps(model, "wednesday, september 30, 2048")
    assert weights.shape[:2] == (1, 2) and weights.shape[-1] == src.shape[1] == 29


def test_student_parts_are_used_only_when_they_agree():
    assert library.parts_agree(ref.cross_attention, ref.DecoderBlock) == {"cross_attention": True, "block": True}

    def unscaled(x, memory, W_q, W_k, W_v, src_mask=None):
        out, w = ref.cross_attention(x, memory, W_q * math.sqrt(W_q.shape[1]), W_k, W_v, src_mask)
        return out, w

    def broken(*args, **kwargs):
        raise NotImplementedError

    assert library.parts_agree(unscaled, None) == {"cross_attention": False, "block": False}
    assert library.parts_agree(broken, broken)["block"] is False
    model, used = library.assemble(ref.cross_attention, ref.DecoderBlock, d_model=8, num_heads=2, d_ff=16)
    assert used == {"cross_attention": True, "block": True}
    assert all(isinstance(b, ref.DecoderBlock) for b in model.decoder)
    assert all(m.attend is ref.cross_attention for m in model.modules() if isinstance(m, library.Attention))


def test_a_model_assembled_from_the_reference_computes_what_the_library_model_does():
    torch.manual_seed(4)
    mine, _ = library.assemble(ref.cross_attention, ref.DecoderBlock, seed=4, d_model=8, num_heads=2, d_ff=16)
    theirs, used = library.assemble(None, None, seed=4, d_model=8, num_heads=2, d_ff=16)
    assert used == {"cross_attention": False, "block": False}
    theirs.load_state_dict(mine.state_dict())
    src, mask, tgt = _batch()
    tgt_in = library.decoder_input(tgt)
    with torch.no_grad():
        torch.testing.assert_close(mine(src, mask, tgt_in), theirs(src, mask, tgt_in), atol=1e-5, rtol=1e-5)
