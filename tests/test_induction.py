"""Notebook 14's laboratory (course_utils.induction) and its reference measurements
(course_utils.reference.induction_heads): shapes, the data's repeated structure, the scores on
hand-made attention patterns, and that ablating a head removes that head and nothing else."""
import math

import pytest
import torch
import torch.nn.functional as F

from course_utils import induction
from course_utils.reference import induction_heads as ref

SMALL = induction.Config(vocab=11, seq_len=16, min_span=3, max_span=6, d_model=8, num_heads=2, steps=12,
                         batch_size=4, eval_every=4, eval_size=8)


def _model(layers=2, seed=0, config=SMALL):
    torch.manual_seed(seed)
    return induction.AttentionOnlyTransformer.from_config(config, num_layers=layers)


def _tokens(batch=3, T=10, seed=0, vocab=SMALL.vocab):
    return torch.randint(vocab, (batch, T), generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- the model

@pytest.mark.parametrize("layers", [1, 2, 3])
def test_trace_shapes_causal_rows_and_the_heads_adding_up_to_the_logits(layers):
    model, tokens = _model(layers), _tokens()
    trace = model.trace(tokens)
    B, T = tokens.shape
    assert trace.logits.shape == (B, T, SMALL.vocab)
    assert len(trace.patterns) == len(trace.head_outputs) == layers
    for pattern, out in zip(trace.patterns, trace.head_outputs):
        assert pattern.shape == (B, SMALL.num_heads, T, T)
        assert out.shape == (B, SMALL.num_heads, T, SMALL.d_model)
        torch.testing.assert_close(pattern.sum(-1), torch.ones(B, SMALL.num_heads, T))
        assert (pattern.triu(1) == 0).all(), "a query attended to a later position"
    # The residual stream is the embeddings plus every head's output: unembedding it gives the logits.
    stream = model.embed(tokens) + model.position(torch.arange(T)) + sum(out.sum(1) for out in trace.head_outputs)
    torch.testing.assert_close(model.unembed(stream), trace.logits)
    torch.testing.assert_close(model(tokens), trace.logits)


def test_the_future_does_not_change_the_past():
    model, tokens = _model(), _tokens()
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % SMALL.vocab
    torch.testing.assert_close(model(changed)[:, :6], model(tokens)[:, :6])


def test_a_students_attention_function_is_used_when_given():
    calls = []

    def attend(q, k, v, mask):
        calls.append(mask.shape)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)
        return weights @ v, weights

    model = _model()
    reference_logits = model(_tokens())
    model.attend = attend
    torch.testing.assert_close(model(_tokens()), reference_logits)
    assert calls == [(10, 10), (10, 10)]


def test_a_head_mask_of_ones_changes_nothing():
    model, tokens = _model(), _tokens()
    torch.testing.assert_close(model(tokens, head_mask=torch.ones(2, SMALL.num_heads)), model(tokens))


# --------------------------------------------------------------------------- the data

def test_repeated_tokens_hold_one_span_copied_right_after_itself():
    config = induction.Config(vocab=7, seq_len=20, min_span=3, max_span=8)
    batch = induction.repeated_tokens(500, config, torch.Generator().manual_seed(0))
    assert batch.tokens.shape == (500, 20) and batch.tokens.dtype == torch.int64
    assert batch.tokens.min() >= 0 and batch.tokens.max() < 7
    assert batch.span.min() == 3 and batch.span.max() == 8  # every length is drawn, the ends included
    assert (batch.start >= 0).all() and (batch.start + 2 * batch.span <= 20).all()
    assert batch.start.min() == 0 and (batch.start + 2 * batch.span).max() == 20
    first, second = batch.first_copy(), batch.second_copy()
    assert (first.sum(1) == batch.span).all() and (second.sum(1) == batch.span).all()
    assert not (first & second).any()
    for row in range(500):
        torch.testing.assert_close(batch.tokens[row][second[row]], batch.tokens[row][first[row]])
    # The copy begins right after the first: its first position is start + span.
    assert (second.float().argmax(1) == batch.start + batch.span).all()


def test_repeated_tokens_are_seeded_and_the_filler_is_random():
    a = induction.repeated_tokens(64, induction.Config(), torch.Generator().manual_seed(3))
    b = induction.repeated_tokens(64, induction.Config(), torch.Generator().manual_seed(3))
    c = induction.repeated_tokens(64, induction.Config(), torch.Generator().manual_seed(4))
    assert torch.equal(a.tokens, b.tokens) and not torch.equal(a.tokens, c.tokens)
    # Outside the copy a token is not its counterpart one span earlier (only by chance, 1 in V).
    pos = torch.arange(a.tokens.shape[1])
    earlier = a.tokens.gather(1, (pos - a.span[:, None]).clamp(min=0))
    outside = ~a.second_copy() & (pos >= a.span[:, None])
    agree = (a.tokens == earlier)[outside].float().mean()
    assert agree < 3 / induction.Config().vocab


def test_a_span_too_long_for_the_sequence_is_refused():
    with pytest.raises(ValueError, match="do not fit"):
        induction.repeated_tokens(2, induction.Config(seq_len=10, max_span=6))


def test_repeat_of_doubles_the_span():
    span = torch.tensor([[4, 1, 3]])
    assert induction.repeat_of(span).tolist() == [[4, 1, 3, 4, 1, 3]]


# --------------------------------------------------------------------------- the scores

def _previous_token_pattern(T):
    pattern = torch.zeros(T, T)
    pattern[0, 0] = 1.0
    pattern[torch.arange(1, T), torch.arange(T - 1)] = 1.0
    return pattern


def _uniform_causal_pattern(T):
    return torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]


def _induction_pattern(span):
    """Every query of the second copy on the position after its token's first occurrence; the
    first copy's queries on themselves."""
    pattern = torch.eye(2 * span)
    t = torch.arange(span, 2 * span)
    pattern[t] = 0.0
    pattern[t, t - span + 1] = 1.0
    return pattern


def test_a_pure_previous_token_pattern_scores_one():
    assert ref.previous_token_score(_previous_token_pattern(12)).item() == pytest.approx(1.0)


def test_a_uniform_pattern_scores_the_mean_of_one_over_the_number_of_keys():
    T = 12
    expected = sum(1 / (t + 1) for t in range(1, T)) / (T - 1)  # query t spreads over t + 1 keys
    assert ref.previous_token_score(_uniform_causal_pattern(T)).item() == pytest.approx(expected)
    span = T // 2
    expected = sum(1 / (t + 1) for t in range(span, T)) / span
    assert ref.induction_score(_uniform_causal_pattern(T), span).item() == pytest.approx(expected)
    assert expected < 2 / span


def test_a_head_looking_at_itself_is_no_previous_token_head():
    assert ref.previous_token_score(torch.eye(12)).item() == 0.0
    assert ref.induction_score(torch.eye(12), 6).item() == 0.0


def test_a_pure_induction_pattern_scores_one_and_a_previous_token_pattern_zero():
    span = 6
    assert ref.induction_score(_induction_pattern(span), span).item() == pytest.approx(1.0)
    assert ref.induction_score(_previous_token_pattern(2 * span), span).item() == 0.0
    # Looking at the earlier occurrence itself (a duplicate-token head) is not induction either.
    duplicate = torch.eye(2 * span)
    t = torch.arange(span, 2 * span)
    duplicate[t] = 0.0
    duplicate[t, t - span] = 1.0
    assert ref.induction_score(duplicate, span).item() == 0.0


def test_scores_keep_the_leading_dimensions():
    patterns = torch.stack([_previous_token_pattern(8), _induction_pattern(4)]).expand(3, 2, 8, 8)
    assert ref.previous_token_score(patterns).shape == (3, 2)
    torch.testing.assert_close(ref.induction_score(patterns, 4)[0], torch.tensor([0.0, 1.0]))
    torch.testing.assert_close(ref.previous_token_score(patterns)[2], torch.tensor([1.0, 0.0]))


def test_induction_score_refuses_a_pattern_of_another_length():
    with pytest.raises(ValueError, match="span 5"):
        ref.induction_score(torch.eye(12), 5)


# --------------------------------------------------------------------------- the losses

def test_per_token_loss_is_the_cross_entropy_of_each_next_token():
    logits = torch.randn(2, 7, 5, generator=torch.Generator().manual_seed(0))
    tokens = _tokens(2, 7, vocab=5)
    losses = ref.per_token_loss(logits, tokens)
    assert losses.shape == (2, 6)
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, 5), tokens[:, 1:].reshape(-1), reduction="none")
    torch.testing.assert_close(losses, expected.view(2, 6))


def test_per_token_loss_known_values():
    tokens = torch.tensor([[0, 1, 2, 3]])
    assert ref.per_token_loss(torch.zeros(1, 4, 8), tokens)[0].tolist() == pytest.approx([math.log(8)] * 3)
    sure = F.one_hot(torch.tensor([[1, 2, 3, 0]]), 8).float() * 50  # logits certain of the right next token
    assert ref.per_token_loss(sure, tokens).max().item() < 1e-6


def test_in_context_loss_averages_the_predictable_part_of_the_copy():
    span, tokens = 4, induction.repeat_of(torch.tensor([[5, 6, 7, 1]]))
    logits = torch.zeros(1, 8, 9)
    logits[0, torch.arange(4, 7), tokens[0, 5:]] = 50.0  # certain of positions 5, 6, 7 only
    assert ref.in_context_loss(logits, tokens, span).item() < 1e-6
    logits[0, 4] = 0.0  # now unsure about position 5: one of three targets at ln 9
    assert ref.in_context_loss(logits, tokens, span).item() == pytest.approx(math.log(9) / 3, rel=1e-5)


# --------------------------------------------------------------------------- ablation

@pytest.mark.parametrize("layer,head", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_ablation_changes_exactly_that_heads_output(layer, head):
    model, tokens = _model(), _tokens()
    clean = model.trace(tokens)
    mask = torch.ones(2, SMALL.num_heads)
    mask[layer, head] = 0.0
    ablated = model.trace(tokens, head_mask=mask)
    assert (ablated.head_outputs[layer][:, head] == 0).all()
    assert clean.head_outputs[layer][:, head].abs().max() > 0
    for h in range(SMALL.num_heads):  # the other heads of the same layer and every earlier layer: untouched
        if h != head:
            torch.testing.assert_close(ablated.head_outputs[layer][:, h], clean.head_outputs[layer][:, h])
    for earlier in range(layer):
        torch.testing.assert_close(ablated.head_outputs[earlier], clean.head_outputs[earlier])
    torch.testing.assert_close(ablated.logits, model(tokens, head_mask=mask))
    assert not torch.allclose(ablated.logits, clean.logits)


def test_ablation_table_names_the_head_that_matters():
    """A model whose only working head is (1, 0): ablating any other head changes nothing."""
    model, span = _model(), 5
    tokens = induction.repeat_of(_tokens(4, span))
    with torch.no_grad():
        for layer, h in ((0, 0), (0, 1), (1, 1)):
            d_k = model.layers[layer].head_dim
            model.layers[layer].W_O.weight[:, h * d_k:(h + 1) * d_k] = 0.0
        clean = ref.in_context_loss(model(tokens), tokens, span)
    table = ref.ablation_table(model, tokens, span)
    assert table.shape == (2, 2)
    torch.testing.assert_close(table[0], clean.expand(2))
    torch.testing.assert_close(table[1, 1], clean)
    assert table[1, 0] != clean
    torch.testing.assert_close(table[1, 0], ref.ablated_loss(model, tokens, span, 1, 0))


# --------------------------------------------------------------------------- training

def test_train_seeds_records_every_seed_and_repeats_itself():
    run = induction.train_seeds(SMALL, seeds=(0, 1))
    assert run.steps.tolist() == [0, 4, 8, 12]
    assert run.first_loss.shape == run.repeated_loss.shape == (2, 4)
    span = SMALL.max_span
    assert run.example.shape == (1, 2 * span)
    assert run.patterns.shape == (2, 4, 2, SMALL.num_heads, 2 * span, 2 * span)
    assert len(run.models) == 2 and not torch.equal(run.models[0].embed.weight, run.models[1].embed.weight)
    assert run.cpu_seconds > 0 and run.wall_seconds > 0
    again = induction.train_seeds(SMALL, seeds=(0, 1))
    torch.testing.assert_close(again.repeated_loss, run.repeated_loss)
    # The last recorded patterns are the trained models' own.
    torch.testing.assert_close(run.patterns[1, -1], torch.stack(run.models[1].trace(run.example).patterns)[:, 0])


def test_a_seed_trained_in_the_stack_equals_that_seed_trained_alone():
    together = induction.train_seeds(SMALL, seeds=(0, 1))
    alone = induction.train_seeds(SMALL, seeds=(1,))
    torch.testing.assert_close(alone.repeated_loss[0], together.repeated_loss[1], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(alone.models[0].embed.weight, together.models[1].embed.weight, atol=1e-4, rtol=1e-4)


def test_train_depths_gives_each_depth_what_train_seeds_gives_it_alone():
    # Side by side in forked workers, on one thread each: the same numbers, bit for bit, in the
    # order of `depths` (a swap of the two would give the one-layer losses to the two-layer run).
    two, one = induction.train_depths(SMALL, seeds=(0, 1), depths=(2, 1))
    for run, layers in ((two, 2), (one, 1)):
        alone = induction.train_seeds(SMALL, seeds=(0, 1), num_layers=layers)
        assert torch.equal(run.repeated_loss, alone.repeated_loss)
        assert len(run.models[0].layers) == layers
    assert not torch.equal(two.repeated_loss, one.repeated_loss)


def test_phase_change_step_is_the_first_step_below_the_level():
    steps, losses = torch.tensor([0, 10, 20, 30, 40]), torch.tensor([3.0, 2.9, 1.5, 2.0, 0.5])
    assert induction.phase_change_step(steps, losses, 1.8) == 20
    assert induction.phase_change_step(steps, losses, 0.4) is None
    assert induction.phase_change_level(induction.Config(vocab=32)) == pytest.approx(math.log(32) / 2)


# --------------------------------------------------------------------------- the student's attention

def _student_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def test_a_correct_attention_is_chosen_and_trains_in_the_stack():
    calls = []

    def counted(q, k, v, mask=None):
        calls.append(q.shape)
        return _student_attention(q, k, v, mask)

    attend, sentence = induction.choose_attention(counted)
    assert attend is counted and "YOUR" in sentence
    calls.clear()
    run = induction.train_seeds(SMALL.replace(steps=4), seeds=(0, 1), attend=attend)
    assert len(calls) >= 2 * 4  # two layers, every training step
    alone = induction.train_seeds(SMALL.replace(steps=4), seeds=(0, 1))
    torch.testing.assert_close(run.repeated_loss, alone.repeated_loss, atol=1e-5, rtol=1e-5)


def _unscaled(q, k, v, mask=None):
    weights = torch.softmax((q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf")), dim=-1)
    return weights @ v, weights


def _no_mask(q, k, v, mask=None):
    return _student_attention(q, k, v)


def _not_written(q, k, v, mask=None):
    raise NotImplementedError


def _output_only(q, k, v, mask=None):
    return _student_attention(q, k, v, mask)[0]


def _not_vmappable(q, k, v, mask=None):
    out, weights = _student_attention(q, k, v, mask)
    return out, torch.tensor(weights.tolist())  # leaves the tensor world: vmap cannot follow


@pytest.mark.parametrize("attend,reason", [
    (None, "has not been run"), (_not_written, "not written yet"), (_output_only, "pair"),
    (_unscaled, "something else"), (_no_mask, "something else"), (_not_vmappable, "raises"),
])
def test_a_wrong_attention_is_replaced_with_a_reason(attend, reason):
    chosen, sentence = induction.choose_attention(attend)
    assert chosen is None and reason in sentence and "course's own" in sentence


def test_training_leaves_the_callers_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    induction.train_seeds(SMALL.replace(steps=1), seeds=(5,))
    torch.testing.assert_close(torch.rand(3), expected)
