"""Mistake catalogue of notebook 14 (induction heads).

Instructor side, as secret as the reference. Every mistake is a self-contained function with
the exercise's signature (only torch and math: the forbidden-API guard treats any other function
of `course_utils.reference` as the answer).

Why the cases look the way they do (every mistake must differ from the reference and from every
other mistake on them):

* previous_token_score / induction_score: causal patterns made from random scores (every
  diagonal then differs from every other), with no leading dimension, with (B, H) and with
  (layers, B, H); float32 and float64; spans of 3 to 7 (an off-by-one in the span shows only
  when the span is not the whole of T).
* per_token_loss: random logits of both signs and sizes, V different from T, targets that differ
  from the token at the same position (so a shift the wrong way or none at all shows), with and
  without leading dimensions.
* ablated_loss: small `AttentionOnlyTransformer`s in float64 whose weights are scaled up so
  that every head changes the loss, 2 or 3 layers and 2 or 3 heads (so that layer and head
  swapped give another head), sequences made of a span and its copy.
* the think-first position: a number, every catalogued slip a different one.
"""
import torch
import torch.nn.functional as F

from course_utils.grading import probe
from course_utils.induction import FORBIDDEN as LOSS_HELPERS
from course_utils.induction import AttentionOnlyTransformer
from course_utils.reference import induction_heads as reference
from course_utils.reference.mistakes import Exercise, Mistake, think_first
from course_utils.reference.mistakes import check as _check
from course_utils.reference.mistakes import diagnose as _diagnose

__all__ = ["EXERCISES", "HIDDEN_ONLY", "check", "diagnose"]

# The think-first question's visible test can only check that the answer is a whole number at or
# before the query: the position itself is the question.
HIDDEN_ONLY = {"guess_same_token", "guess_previous", "guess_before_copy", "guess_itself"}

DT = torch.float64


def _patterns(g, *shape, dtype=DT):
    """Causal attention patterns (..., T, T) from random scores: rows sum to one."""
    T = shape[-1]
    scores = 2.0 * torch.randn(*shape[:-1], T, generator=g, dtype=DT)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).to(dtype)


# --- induction_heads_previous_token: previous_token_score(patterns) -------------------------

def previous_own_position(patterns):
    return torch.diagonal(patterns, dim1=-2, dim2=-1).mean(dim=-1)


def previous_looks_forward(patterns):
    return torch.diagonal(patterns, offset=1, dim1=-2, dim2=-1).mean(dim=-1)


def previous_counts_first_query(patterns):
    return torch.diagonal(patterns, offset=-1, dim1=-2, dim2=-1).sum(dim=-1) / patterns.shape[-1]


def previous_sum_not_mean(patterns):
    return torch.diagonal(patterns, offset=-1, dim1=-2, dim2=-1).sum(dim=-1)


def previous_mean_over_everything(patterns):
    return torch.diagonal(patterns, offset=-1, dim1=-2, dim2=-1).mean()


def _previous_cases(seed):
    g = torch.Generator().manual_seed(seed)
    return [((_patterns(g, 6, 6),), {}), ((_patterns(g, 2, 3, 8, 8),), {}),
            ((_patterns(g, 2, 2, 3, 5, 5, dtype=torch.float32),), {}), ((_patterns(g, 1, 4, 24, 24),), {})]


PREVIOUS = Exercise(
    grade_id="induction_heads_previous_token",
    function_name="previous_token_score",
    reference=reference.previous_token_score,
    make_cases=_previous_cases,
    output_names=("your previous-token score",),
    atol=1e-9,
    rtol=1e-7,
    crash_hint="patterns is (..., T, T), row t = query t; return one score per leading index, shape (...,)",
    mistakes=(
        Mistake("own_position",
                "your score reads the attention each query puts on ITSELF (the main diagonal); a "
                "previous-token head looks one position back.",
                previous_own_position),
        Mistake("looks_forward",
                "your score reads the attention on the position AFTER each query (above the diagonal, "
                "where a causal pattern is zero), or reads the pattern with keys as rows: row t is query t's "
                "attention over the keys, and the key wanted is one step back.",
                previous_looks_forward),
        Mistake("counts_first_query",
                "your score divides by T, counting the first query too: it has no position before it, so "
                "the average is over the T - 1 queries that have one.",
                previous_counts_first_query),
        Mistake("sum_not_mean",
                "your score adds the queries up instead of averaging them: a head that always looks one "
                "step back should score 1, whatever T is.",
                previous_sum_not_mean),
        Mistake("mean_over_everything",
                "your score averages over the leading dimensions too and returns one number: keep one "
                "score per leading index (per layer, sequence and head), shape (...,).",
                previous_mean_over_everything),
    ),
)


# --- induction_heads_induction_score: induction_score(patterns, span) -----------------------

def _band(patterns, offset, first_query):
    """Mean of patterns[..., t, t + offset] over the queries t = first_query ... T - 1."""
    rows = torch.arange(first_query, patterns.shape[-1])
    return patterns[..., rows, rows + offset].mean(dim=-1)


def induction_same_token(patterns, span):
    return _band(patterns, -span, span)


def induction_previous_token(patterns, span):
    return _band(patterns, -1, span)


def induction_from_last_of_first_copy(patterns, span):
    return _band(patterns, -span + 1, span - 1)


def induction_skips_first_repeat(patterns, span):
    return _band(patterns, -span + 1, span + 1)


def induction_sum_not_mean(patterns, span):
    rows = torch.arange(span, patterns.shape[-1])
    return patterns[..., rows, rows - span + 1].sum(dim=-1)


def induction_every_query(patterns, span):
    return torch.diagonal(patterns, offset=-(span - 1), dim1=-2, dim2=-1).sum(dim=-1) / patterns.shape[-1]


def _induction_cases(seed):
    g = torch.Generator().manual_seed(seed)
    return [((_patterns(g, 8, 8), 4), {}), ((_patterns(g, 2, 3, 10, 10), 5), {}),
            ((_patterns(g, 2, 2, 2, 6, 6, dtype=torch.float32), 3), {}), ((_patterns(g, 1, 2, 14, 14), 7), {}),
            ((_patterns(g, 3, 24, 24), 12), {})]


INDUCTION = Exercise(
    grade_id="induction_heads_induction_score",
    function_name="induction_score",
    reference=reference.induction_score,
    make_cases=_induction_cases,
    output_names=("your induction score",),
    atol=1e-9,
    rtol=1e-7,
    crash_hint="patterns is (..., 2 span, 2 span); the queries of the second copy are t = span ... 2 span - 1; "
               "return one score per leading index, shape (...,)",
    mistakes=(
        Mistake("same_token",
                "your score reads the attention on the EARLIER OCCURRENCE OF THE SAME TOKEN: an induction head "
                "looks at what came right after it there, the token to copy next.",
                induction_same_token),
        Mistake("previous_token",
                "your score reads the attention on the position just before each query (a previous-token "
                "head's key): an induction head looks back into the first copy.",
                induction_previous_token),
        Mistake("from_last_of_first_copy",
                "your score also counts the last query of the first copy: only the queries of the second "
                "copy (t = span ... 2 span - 1) have an earlier occurrence of their token.",
                induction_from_last_of_first_copy),
        Mistake("skips_first_repeat",
                "your score leaves out the first query of the second copy: its token has an earlier "
                "occurrence too, so every one of the span queries of the second copy counts.",
                induction_skips_first_repeat),
        Mistake("sum_not_mean",
                "your score adds the queries up instead of averaging them: a perfect induction head should "
                "score 1, whatever the span.",
                induction_sum_not_mean),
        Mistake("every_query",
                "your score averages over every query of the sequence: only the second copy's queries can "
                "find their token earlier, so average over those span queries.",
                induction_every_query),
    ),
)


# --- induction_heads_per_token_loss: per_token_loss(logits, tokens) ---------------------------

def _cross_entropy(logits, targets, dim=-1):
    log_probs = torch.log_softmax(logits.double(), dim=dim)
    return -log_probs.gather(-1, targets[..., None]).squeeze(-1)


def loss_same_position(logits, tokens):
    return _cross_entropy(logits[..., :-1, :], tokens[..., :-1])


def loss_shifted_wrong_way(logits, tokens):
    return _cross_entropy(logits[..., 1:, :], tokens[..., :-1])


def loss_raw_logit(logits, tokens):
    return -logits[..., :-1, :].gather(-1, tokens[..., 1:, None]).squeeze(-1)


def loss_probability_not_log(logits, tokens):
    probs = torch.softmax(logits[..., :-1, :].double(), dim=-1)
    return -probs.gather(-1, tokens[..., 1:, None]).squeeze(-1)


def loss_softmax_over_positions(logits, tokens):
    return _cross_entropy(logits[..., :-1, :], tokens[..., 1:], dim=-2)


def loss_averaged(logits, tokens):
    return _cross_entropy(logits[..., :-1, :], tokens[..., 1:]).mean()


def loss_positive_log(logits, tokens):
    return -_cross_entropy(logits[..., :-1, :], tokens[..., 1:])


def _loss_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def case(*shape, V, scale=2.0, dtype=DT):
        logits = (scale * torch.randn(*shape, V, generator=g, dtype=DT)).to(dtype)
        tokens = torch.randint(V, shape, generator=g)
        tokens[..., 1:] = torch.where(tokens[..., 1:] == tokens[..., :-1], (tokens[..., 1:] + 1) % V, tokens[..., 1:])
        return (logits, tokens), {}

    return [case(2, 6, V=5), case(7, V=9), case(2, 3, 5, V=4, dtype=torch.float32), case(1, 12, V=32, scale=6.0)]


PER_TOKEN_LOSS = Exercise(
    grade_id="induction_heads_per_token_loss",
    function_name="per_token_loss",
    reference=reference.per_token_loss,
    make_cases=_loss_cases,
    output_names=("your per-token loss",),
    forbidden=LOSS_HELPERS + ("course_utils.grading.parts:per_token_loss",),
    atol=1e-6,
    rtol=1e-5,
    crash_hint="logits is (..., T, V) and tokens (..., T) of int64; the logits at t score the token at t + 1: "
               "return (..., T - 1)",
    mistakes=(
        Mistake("same_position",
                "your loss scores each position's logits against the token AT that position: the logits at t "
                "predict the NEXT token, tokens[..., t + 1].",
                loss_same_position),
        Mistake("shifted_wrong_way",
                "your loss pairs the logits at t + 1 with the token at t: the prediction comes first, so the "
                "logits at t are scored against the token at t + 1.",
                loss_shifted_wrong_way),
        Mistake("raw_logit",
                "your loss is minus the raw logit of the next token: a logit is a score, not a log-probability; "
                "normalise over the vocabulary first (log_softmax).",
                loss_raw_logit),
        Mistake("probability_not_log",
                "your loss is minus the probability of the next token: the cross-entropy is minus its "
                "LOGARITHM (a sure guess costs 0, a uniform one ln V).",
                loss_probability_not_log),
        Mistake("softmax_over_positions",
                "your softmax runs over the positions (dim=-2): each position's distribution is over the "
                "vocabulary, the last axis.",
                loss_softmax_over_positions),
        Mistake("averaged",
                "your loss is one number, the mean: the exercise asks for every token's loss, shape (..., T - 1).",
                loss_averaged),
        Mistake("positive_log",
                "your loss is the log-probability itself, a negative number: the loss is MINUS it, so that a "
                "surprise costs more.",
                loss_positive_log),
    ),
)


# --- induction_heads_ablation: ablated_loss(model, tokens, span, layer, head) ----------------

def _second_copy_mean(losses, span, first):
    return losses[..., first:].mean()


def _ablate(model, tokens, span, head_mask, first=None, last=None):
    with torch.no_grad():
        logits = model(tokens, head_mask=head_mask)
    losses = _cross_entropy(logits[..., :-1, :], tokens[..., 1:])
    first = span if first is None else first
    return losses[..., first:last].mean()


def _mask(model, value=1.0):
    return torch.full((len(model.layers), model.layers[0].num_heads), value)


def ablation_whole_layer(model, tokens, span, layer, head):
    mask = _mask(model)
    mask[layer, :] = 0.0
    return _ablate(model, tokens, span, mask)


def ablation_keeps_only_the_head(model, tokens, span, layer, head):
    mask = _mask(model, 0.0)
    mask[layer, head] = 1.0
    return _ablate(model, tokens, span, mask)


def ablation_layer_and_head_swapped(model, tokens, span, layer, head):
    mask = _mask(model)
    mask[head, layer] = 0.0
    return _ablate(model, tokens, span, mask)


def ablation_nothing_removed(model, tokens, span, layer, head):
    return _ablate(model, tokens, span, _mask(model))


def ablation_whole_sequence(model, tokens, span, layer, head):
    mask = _mask(model)
    mask[layer, head] = 0.0
    return _ablate(model, tokens, span, mask, first=0)


def ablation_first_repeat_counted(model, tokens, span, layer, head):
    mask = _mask(model)
    mask[layer, head] = 0.0
    return _ablate(model, tokens, span, mask, first=span - 1)


def ablation_first_copy(model, tokens, span, layer, head):
    mask = _mask(model)
    mask[layer, head] = 0.0
    return _ablate(model, tokens, span, mask, first=0, last=span - 1)


def _ablation_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def model(layers, heads, vocab=11, d_model=12, span=5):
        with torch.random.fork_rng():
            torch.manual_seed(seed + 7 * layers + heads)
            built = probe.portable(AttentionOnlyTransformer, vocab=vocab, max_len=2 * span, d_model=d_model,
                                   num_heads=heads, num_layers=layers).double()
        with torch.no_grad():  # larger weights than at initialisation: every head changes the loss
            for param in built.parameters():
                param.mul_(2.5)
        return built

    def tokens(batch, vocab, span):
        return torch.cat([torch.randint(vocab, (batch, span), generator=g)] * 2, dim=-1)

    return [
        ((model(2, 2), tokens(3, 11, 5), 5, 0, 1), {}),
        ((model(2, 2), tokens(2, 11, 5), 5, 1, 0), {}),
        ((model(3, 3), tokens(2, 11, 5), 5, 2, 1), {}),
        ((model(3, 3), tokens(2, 11, 5), 5, 1, 2), {}),
        ((model(2, 3, span=6), tokens(4, 11, 6), 6, 0, 2), {}),
    ]


ABLATION = Exercise(
    grade_id="induction_heads_ablation",
    function_name="ablated_loss",
    reference=reference.ablated_loss,
    make_cases=_ablation_cases,
    output_names=("your ablated in-context loss",),
    forbidden=LOSS_HELPERS,
    earlier=("per_token_loss",),  # its prompt: "use your per_token_loss"
    atol=1e-6,
    rtol=1e-5,
    crash_hint="build head_mask = torch.ones(number of layers, heads per layer), set one entry to 0, call "
               "model(tokens, head_mask=head_mask) (logits (B, 2 span, V)) and average your per_token_loss over "
               "the second copy's predictable tokens",
    layouts=False,
    mistakes=(
        Mistake("whole_layer",
                "your ablation removes every head of the layer: zero the one entry [layer, head] of the mask "
                "and leave the other heads of that layer on.",
                ablation_whole_layer),
        Mistake("keeps_only_the_head",
                "your mask is the wrong way round: it keeps only the chosen head and switches off all the "
                "others. 1 keeps a head's output, 0 removes it.",
                ablation_keeps_only_the_head),
        Mistake("layer_and_head_swapped",
                "your mask removes head `layer` of layer `head`: the mask is indexed [layer, head], one row "
                "per layer.",
                ablation_layer_and_head_swapped),
        Mistake("nothing_removed",
                "your loss is the model's loss with every head on: the head's output must be switched off "
                "(head_mask with a 0 in its place).",
                ablation_nothing_removed),
        Mistake("whole_sequence",
                "your loss averages over every position of the sequence: the in-context loss is the mean "
                "over the second copy's predictable tokens only.",
                ablation_whole_sequence),
        Mistake("first_repeat_counted",
                "your loss also counts the first token of the second copy: it follows the end of the first "
                "copy, and nothing in context predicts it.",
                ablation_first_repeat_counted),
        Mistake("first_copy",
                "your loss is measured on the first copy, where there is nothing to copy from: the "
                "in-context loss is measured on the second copy.",
                ablation_first_copy),
    ),
)


# --- think first: where an induction head looks -------------------------------------------

# The numbers vary by student (course_utils.grading.questions): the span L and a query position t
# of the second copy. The right key is t - L + 1, right after the earlier occurrence of t's token.
POSITION_GUESS = think_first(
    "induction_heads_position_guess", "induction_key",
    lambda span, query: query - span + 1,
    mistakes=(
        Mistake("guess_same_token", "that is the earlier occurrence of the query's own token: the head "
                "looks at what came right after it there.", lambda span, query: query - span),
        Mistake("guess_previous", "that is the position just before the query, where a previous-token head "
                "looks.", lambda span, query: query - 1),
        Mistake("guess_before_copy", "that is the position before the earlier occurrence of the query's "
                "token: the head looks after it, not before.", lambda span, query: query - span - 1),
        Mistake("guess_itself", "that is the query's own position.", lambda span, query: query),
    ),
    answer_name="your key position")


EXERCISES = {exercise.grade_id: exercise for exercise in
             (PREVIOUS, INDUCTION, POSITION_GUESS, PER_TOKEN_LOSS, ABLATION)}


def check(grade_id, fn):
    """Raise GradingError naming the mistake if `fn` is wrong; return None if right."""
    return _check(EXERCISES, grade_id, fn)


def diagnose(grade_id, fn):
    """The first hidden block of a test cell: raise only what can be named (a catalogued
    mistake, a crash, a forbidden call), so that the visible checks speak next."""
    return _diagnose(EXERCISES, grade_id, fn)
