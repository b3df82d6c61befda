"""Mistake catalogue of notebook 04 (Bahdanau attention in a seq2seq model).

Instructor side, as secret as the reference. `EXERCISES[grade_id]` holds, for each exercise,
the reference, the hidden test cases and the common wrong answers; the notebook's hidden
tests call `check(grade_id, student_function)`.

Why the cases look the way they do (every mistake must run on them, and differ from the
reference and from every other mistake):

* multiplicative_score: W is square (d_s = d_h) so that s^T W^T h runs; B, T and d differ.
* additive_attention: d_s = d_h (so that W1 and W2 swapped runs) and d_a differs; every mask
  row has a real and a padded position; B > 1 with very different sentences, so a softmax
  over the batch differs from one over the positions.
* decoder_step: the target embedding has the size of an encoder state (e = d_h), so that
  concatenating [context, embedding] in the wrong order runs.
* multiplicative_score, additive_attention, decoder_step: a decoder trains through them, so each
  is also backpropagated through on its first cases (`GradientExercise`): an answer computed
  under torch.no_grad(), or detached, gives the right numbers and no gradient.
* greedy_decode, beam_search: `course_utils.models.seq2seq.ToyStep` models whose hypotheses end at
  different lengths, so that ranking by total or by per-token log-probability differ.
* beam_search is worth 3 points, one per part (BEAM_PARTS): the search (its last two cases, whose
  models never emit EOS, judge it alone), finished hypotheses (EOS ends one, which keeps its place
  in the beam) and the final ranking (best first by log_prob / len).

The `compute` of every mistake is written out inline: it stands in for student code and runs
under the same forbidden-API guard, which treats any function of `course_utils.reference` as
a shortcut.
"""
import math

import torch

from course_utils.models import seq2seq
from course_utils.reference import bahdanau_attention as reference
from course_utils.reference import mistakes as framework
from course_utils.reference.mistakes import diagnose as _diagnose
from course_utils.reference.mistakes import Exercise, Mistake, think_first, mask_scores
from course_utils.reference.mistakes.gradients import GradientExercise
from course_utils.grading import mismatch, probe

__all__ = ["EXERCISES", "HIDDEN_ONLY", "check"]

# Every catalogued mistake also fails the visible tests.
HIDDEN_ONLY = set()

DT = torch.float64


# --------------------------------------------------------------------------- 1. multiplicative_score

def score_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def case(B, T, d, with_W=True):
        query = torch.randn(B, d, generator=g, dtype=DT)
        keys = torch.randn(B, T, d, generator=g, dtype=DT)
        if not with_W:
            return ((query, keys), {})
        return ((query, keys, torch.randn(d, d, generator=g, dtype=DT)), {})

    half = lambda c: (tuple(t.half() for t in c[0]), c[1])  # noqa: E731
    return [case(2, 5, 3), case(3, 4, 6), case(4, 7, 5), case(3, 6, 4, with_W=False),
            # the smallest the prompt allows (issue 39, item 3): one sentence, one key, d = 1
            case(1, 1, 1),
            # float16, which the prompt does not rule out (issue 39, item 2)
            half(case(2, 4, 3))]


def _score_variant(W_mode="W", scale=False, softmax=False, cross_batch=False):
    def compute(query, keys, W=None):
        s = query
        if W is not None and W_mode == "W":
            s = query @ W
        elif W is not None and W_mode == "W.T":
            s = query @ W.T
        if cross_batch:
            return keys @ s.T  # (B, T, B): every sentence's keys against every query
        scores = torch.einsum("btd,bd->bt", keys, s)
        if scale:
            scores = scores / math.sqrt(keys.shape[-1])
        if softmax:
            scores = torch.softmax(scores, dim=-1)
        return scores
    return compute


SCORE_MISTAKES = (
    Mistake("W_transposed",
            "you computed s^T W^T h (query @ W.T): the multiplicative score is s^T W h, "
            "so project the query with query @ W, W of shape (d_s, d_h).",
            _score_variant(W_mode="W.T")),
    Mistake("W_ignored",
            "your scores ignore W: with a matrix W the score is s^T W h, not the dot product s^T h.",
            _score_variant(W_mode="ignore")),
    Mistake("scaled",
            "you divided the scores by sqrt(d): that is the transformer's scaled dot product "
            "(notebook 05); the scores here are the plain s^T h and s^T W h.",
            _score_variant(scale=True)),
    Mistake("returned_weights",
            "you returned the softmax of the scores: this function returns the raw scores, "
            "the softmax comes later.",
            _score_variant(softmax=True)),
    Mistake("cross_batch",
            "you multiplied every query with every sentence's keys (keys @ query.T has shape "
            "(B, T, B)): each query is compared with the keys of its own sentence only.",
            _score_variant(cross_batch=True)),
)


# --------------------------------------------------------------------------- 2. additive_attention

def _mask_with_real_and_pad(B, T, g):
    """Each row: a random length between 2 and T - 1 (padding at the end)."""
    lengths = torch.randint(2, T, (B,), generator=g)
    return torch.arange(T)[None, :] < lengths[:, None]


def attention_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def case(B, T, d, d_a, masked=False, v_scale=2.0):
        query = torch.randn(B, d, generator=g, dtype=DT)
        keys = 2.0 * torch.randn(B, T, d, generator=g, dtype=DT)
        W1 = torch.randn(d_a, d, generator=g, dtype=DT) / math.sqrt(d)
        W2 = torch.randn(d_a, d, generator=g, dtype=DT) / math.sqrt(d)
        v = v_scale * torch.randn(d_a, generator=g, dtype=DT)
        kwargs = {"mask": _mask_with_real_and_pad(B, T, g)} if masked else {}
        return ((query, keys, W1, W2, v), kwargs)

    # the last: a long v, scores in the thousands, where exp overflows without the maximum (issue 39)
    half = lambda c: (tuple(t.half() for t in c[0]), c[1])  # noqa: E731
    return [case(3, 5, 4, 6), case(2, 7, 3, 5), case(4, 6, 5, 3, masked=True), case(3, 8, 4, 7, masked=True),
            case(2, 5, 4, 6, masked=True, v_scale=1500.0),
            # the smallest the prompt allows (issue 39, item 3): one sentence, one key, d = d_a = 1
            case(1, 1, 1, 1),
            # float16, which the prompt does not rule out (issue 39, item 2): scores past 11, where
            # float16's exp overflows without the maximum
            half(case(2, 5, 4, 6, masked=True, v_scale=8.0))]


def _attention_variant(swap=False, tanh=True, use_v=True, dim=-1, keep_axis=False, context_axis=1,
                       mask_mode="-inf"):
    def compute(query, keys, W1, W2, v, mask=None):
        if swap:
            energy = keys @ W2.T + (query @ W1.T)[:, None, :]
        else:
            energy = keys @ W1.T + (query @ W2.T)[:, None, :]
        if tanh:
            energy = torch.tanh(energy)
        scores = energy @ v if use_v else energy.sum(dim=-1)
        scores, after = mask_scores(scores, mask, mask_mode)
        if keep_axis:  # scores (B, T, 1), softmax over the axis of size one: every weight is 1
            weights = torch.softmax(scores[:, :, None], dim=-1)[:, :, 0]
        else:
            weights = torch.softmax(scores, dim=dim)
        if after is not None:
            weights = weights * after
        if context_axis == 1:
            context = (weights[:, :, None] * keys).sum(dim=1)
        else:
            context = (weights[:, :, None] * keys).sum(dim=2)
        return context, weights
    return compute


ATTENTION_MISTAKES = (
    Mistake("softmax_over_batch",
            "your softmax runs over the batch axis (dim=0): for each sentence the weights must sum "
            "to one over its positions (dim=-1 of the (B, T) scores).",
            _attention_variant(dim=0)),
    Mistake("softmax_over_size_one_axis",
            "your weights are all 1: the softmax ran over an axis of size one (scores of shape "
            "(B, T, 1), dim=-1). Make the scores (B, T) and take the softmax over T.",
            _attention_variant(keep_axis=True)),
    Mistake("context_wrong_axis",
            "your context sums over the feature axis of the keys instead of over the positions: "
            "c = sum_i a_i h_i sums over i (dim=1 of (B, T, d_h)) and has shape (B, d_h).",
            _attention_variant(context_axis=2)),
    Mistake("W1_W2_swapped",
            "W1 and W2 are applied to the wrong states: W1 projects the encoder states h_i (keys), "
            "W2 the decoder state s (query): v^T tanh(W1 h_i + W2 s).",
            _attention_variant(swap=True)),
    Mistake("no_tanh",
            "you left out the tanh: the score is v^T tanh(W1 h_i + W2 s).",
            _attention_variant(tanh=False)),
    Mistake("no_v",
            "you summed tanh(W1 h_i + W2 s) over its features instead of taking the dot product "
            "with v: the score is v^T tanh(...).",
            _attention_variant(use_v=False)),
    Mistake("mask_ignored",
            "padded positions (mask False) still get weight: set their scores to -inf before the softmax.",
            _attention_variant(mask_mode="ignored")),
    Mistake("mask_inverted",
            "your mask is inverted: True marks a real character, so fill the scores where the mask is False.",
            _attention_variant(mask_mode="inverted")),
    Mistake("mask_after_softmax",
            "you zeroed the padded weights after the softmax, so they no longer sum to one: "
            "mask the scores with -inf before the softmax instead.",
            _attention_variant(mask_mode="after")),
)


# --------------------------------------------------------------------------- 3. decoder_step

def step_cases(seed):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i, (B, T, hidden, state_size, masked) in enumerate([(3, 5, 3, 5, False), (2, 6, 4, 7, True),
                                                            (4, 4, 2, 3, True)]):
        with torch.random.fork_rng():  # nn.Module initialisation has no generator argument
            torch.manual_seed(seed + i)
            decoder = probe.portable(seq2seq.Seq2Seq, hidden=hidden, embed=2 * hidden, attention_size=hidden + 1,
                                      state_size=state_size).double()
        decoder.requires_grad_(False)
        prev = torch.randint(3, decoder.embedding.num_embeddings, (B,), generator=g)
        state = torch.randn(B, state_size, generator=g, dtype=DT)
        keys = torch.randn(B, T, 2 * hidden, generator=g, dtype=DT)
        kwargs = {"mask": _mask_with_real_and_pad(B, T, g)} if masked else {}
        cases.append(((decoder, prev, state, keys), kwargs))
    return cases


def _step_variant(order="emb,ctx", output_state="new", pass_mask=True, probabilities=False, update=True):
    def compute(decoder, prev_token, state, keys, mask=None):
        energy = torch.tanh(keys @ decoder.W1.T + (state @ decoder.W2.T)[:, None, :])
        scores = energy @ decoder.v
        if mask is not None and pass_mask:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        context = torch.einsum("bt,btd->bd", weights, keys)
        embedded = decoder.embedding(prev_token)
        parts = [embedded, context] if order == "emb,ctx" else [context, embedded]
        new_state = decoder.cell(torch.cat(parts, dim=-1), state)
        read = new_state if output_state == "new" else state
        logits = decoder.out(torch.cat([read, context], dim=-1))
        if probabilities:
            logits = torch.softmax(logits, dim=-1)
        return logits, (new_state if update else state), weights
    return compute


STEP_MISTAKES = (
    Mistake("concat_order",
            "you fed the GRU cell [context, embedding]: the input is torch.cat([embedding of the "
            "previous token, context], dim=-1), in that order.",
            _step_variant(order="ctx,emb")),
    Mistake("logits_from_old_state",
            "your logits come from the previous state s_{t-1}: run the cell first, then read the "
            "logits from the new state and the context, out(cat[s_t, c_t]).",
            _step_variant(output_state="old")),
    Mistake("mask_not_passed",
            "padded positions get attention weight: pass `mask` on to additive_attention.",
            _step_variant(pass_mask=False)),
    Mistake("returned_probabilities",
            "you returned softmax probabilities: return the raw logits, decoder.out(...).",
            _step_variant(probabilities=True)),
    Mistake("state_not_updated",
            "you returned the old state: the new state is the GRU cell's output, s_t = cell(x, s_{t-1}).",
            _step_variant(update=False)),
)


# --------------------------------------------------------------------------- 4. greedy_decode

EOS_TOY = 1


def greedy_cases(seed):
    cases = []
    for i, (vocab, bias, max_len) in enumerate([(6, 0.5, 8), (5, 1.0, 6), (7, -0.5, 9), (6, 0.0, 5)]):
        step = probe.portable(seq2seq.ToyStep, vocab=vocab, eos=EOS_TOY, eos_bias=bias, seed=seed + i)
        cases.append(((step, step.initial.clone(), 0, EOS_TOY, max_len), {}))
    # Other ids for bos and eos (5 and 3; token 1 is an ordinary token here), so that an answer with
    # bos = 0 or eos = 1 written in, instead of the arguments, fails: it gives [2, 3, 1], not [4, 3].
    step = probe.portable(seq2seq.ToyStep, vocab=7, bos=5, eos=3, eos_bias=0.5, seed=8)
    cases.append(((step, step.initial.clone(), 5, 3, 8), {}))
    # The smallest sizes the prompt allows (issue 39, item 3): max_len = 0 emits nothing, 1 one token.
    for i, max_len in enumerate((0, 1)):
        step = probe.portable(seq2seq.ToyStep, vocab=6, eos=EOS_TOY, eos_bias=0.5, seed=seed + 20 + i)
        cases.append(((step, step.initial.clone(), 0, EOS_TOY, max_len), {}))
    return cases


def _greedy_variant(stop=True, feed="prev", include_eos=True, total="sum"):
    def compute(step, state, bos, eos, max_len):
        tokens, logps = [], []
        prev = torch.tensor([bos])
        for _ in range(max_len):
            log_probs, state = step(prev, state)
            token = int(log_probs[0].argmax())
            if token == eos and stop and not include_eos:
                break
            tokens.append(token)
            logps.append(float(log_probs[0, token]))
            if token == eos and stop:
                break
            prev = torch.tensor([token if feed == "prev" else bos])
        if total == "sum":
            value = sum(logps)
        elif total == "probability":
            value = math.exp(sum(logps))
        else:
            value = logps[-1] if logps else 0.0  # max_len = 0: nothing was chosen
        return tokens, value
    return compute


GREEDY_MISTAKES = (
    Mistake("no_stop_at_eos",
            "your decoding goes on after EOS: stop as soon as the chosen token is `eos` (keep the EOS).",
            _greedy_variant(stop=False)),
    Mistake("eos_dropped",
            "you stopped before keeping EOS: the EOS token belongs to the output, and its "
            "log-probability to the total.",
            _greedy_variant(include_eos=False)),
    Mistake("feeds_bos",
            "you fed `bos` at every step: feed the token chosen at the previous step.",
            _greedy_variant(feed="bos")),
    Mistake("returned_probability",
            "you returned a probability (the exp of the total): return the sum of the log-probabilities.",
            _greedy_variant(total="probability")),
    Mistake("last_log_prob_only",
            "your total is only the last token's log-probability: add up the log-probabilities of "
            "every chosen token.",
            _greedy_variant(total="last")),
)


# --------------------------------------------------------------------------- 5. beam_search

def beam_cases(seed):
    cases = []
    for i, (vocab, bias, max_len, width) in enumerate([(6, 0.3, 7, 3), (5, 0.0, 6, 4), (7, 0.6, 8, 3),
                                                       (6, -0.3, 6, 2), (5, 0.4, 7, 5)]):
        step = probe.portable(seq2seq.ToyStep, vocab=vocab, eos=EOS_TOY, eos_bias=bias, sharpness=1.0, seed=seed + 11 + i)
        cases.append(((step, step.initial.clone(), 0, EOS_TOY, max_len, width), {}))
    # Other ids for bos and eos (5 and 3), so that bos = 0 or eos = 1 written into the answer fails.
    step = probe.portable(seq2seq.ToyStep, vocab=7, bos=5, eos=3, eos_bias=0.5, sharpness=1.0, seed=15)
    cases.append(((step, step.initial.clone(), 5, 3, 7, 3), {}))
    # Models that (almost) never emit EOS (its log-odds lowered by 30): every hypothesis runs to
    # max_len, so these cases judge the search alone (BEAM_PARTS), whatever the answer does with
    # finished hypotheses or with the final ranking.
    for i, (vocab, max_len, width) in enumerate([(6, 5, 3), (7, 4, 4)]):
        step = probe.portable(seq2seq.ToyStep, vocab=vocab, eos=EOS_TOY, eos_bias=-30.0, sharpness=1.0,
                              seed=seed + 31 + i)
        cases.append(((step, step.initial.clone(), 0, EOS_TOY, max_len, width), {}))
    return cases


BEAM_EOS_CASES = range(0, 6)  # hypotheses end at varied lengths
BEAM_SEARCH_CASES = (6, 7)  # no hypothesis ends before max_len


def _beam_variant(ranking="normalised", select="total", competition=True, shrink=True, remove_finished=True,
                  only_best=False):
    def compute(step, state, bos, eos, max_len, beam_width):
        width = 1 if only_best else beam_width
        beams, states, finished = [([], 0.0)], state, []
        for t in range(max_len):
            room = width - len(finished) if shrink else width
            if not beams or room <= 0:
                break
            prev = torch.tensor([tokens[-1] if tokens else bos for tokens, _ in beams])
            log_probs, new_states = step(prev, states)
            candidates = []
            for row, (tokens, score) in enumerate(beams):
                if not remove_finished and tokens and tokens[-1] == eos:
                    pass  # a finished hypothesis is extended like any other
                order = range(log_probs.shape[1])
                if not competition and t > 0:
                    order = [int(log_probs[row].argmax())]
                for token in order:
                    total = score + float(log_probs[row, token])
                    key = total if select == "total" else float(log_probs[row, token])
                    candidates.append((key, total, row, token))
            candidates.sort(key=lambda c: c[0], reverse=True)
            next_beams, rows = [], []
            for _, total, row, token in candidates[:room]:
                hypothesis = (beams[row][0] + [token], total)
                if token == eos and remove_finished:
                    finished.append(hypothesis)
                else:
                    next_beams.append(hypothesis)
                    rows.append(row)
            beams = next_beams
            states = new_states[torch.tensor(rows, dtype=torch.long)] if rows else None
        finished.extend(beams)
        if ranking == "normalised":
            return sorted(finished, key=lambda h: h[1] / len(h[0]), reverse=True)
        return sorted(finished, key=lambda h: h[1], reverse=True)
    return compute


BEAM_MISTAKES = (
    Mistake("keeps_only_best",
            "your search keeps only the single best hypothesis (that is greedy decoding): keep the "
            "best `beam_width` candidates at every step.",
            _beam_variant(only_best=True)),
    Mistake("unnormalised_ranking",
            "you ranked the finished hypotheses by their total log-probability: the ranking "
            "(length handling) is the per-token score log_prob / len(tokens), so short hypotheses "
            "are not favoured just for being short.",
            _beam_variant(ranking="total")),
    Mistake("selects_by_last_token",
            "you chose the candidates by the last token's log-probability alone: compare the "
            "totals, the hypothesis's log-probability so far plus the new token's.",
            _beam_variant(select="last")),
    Mistake("no_competition",
            "after the first step each of your hypotheses only extends itself with its own best "
            "token: every step, all extensions of all hypotheses compete for the beam.",
            _beam_variant(competition=False)),
    Mistake("width_does_not_shrink",
            "your beam keeps `beam_width` live hypotheses even after some have finished: a "
            "finished hypothesis keeps its place, so only beam_width - (number finished) stay live.",
            _beam_variant(shrink=False)),
    Mistake("extends_finished",
            "your hypotheses go on after EOS: a hypothesis that emits `eos` is finished and leaves the beam.",
            _beam_variant(remove_finished=False)),
)


def _tokens(hypothesis):
    return [int(t) for t in hypothesis[0]]


def _beam_hypotheses(got, rank_name="your list of hypotheses"):
    """[(tokens, log_prob)] of an answer, or a sentence when it is not a list of such pairs."""
    if not isinstance(got, (list, tuple)) or not all(isinstance(h, (list, tuple)) and len(h) == 2 for h in got):
        return f"{rank_name} should be a list of (tokens, log_prob) pairs"
    return [(_tokens(h), float(h[1])) for h in got]


def _same_hypotheses(exercise, case, found):
    """None when `found` holds the reference's hypotheses on `case`, in any order, else a sentence."""
    expected = sorted((_tokens(h), h[1]) for h in exercise.run(exercise.reference, case))
    if exercise.difference(sorted(found), expected) is None:
        return None
    return (f"on a hidden test case{exercise.describe_case(case)}: the hypotheses found (in any order) are "
            f"{[t for t, _ in sorted(found)]}, but they should be {[t for t, _ in expected]}")


def _search_part(exercise, results):
    """The search part: on the cases where no hypothesis ends early, the hypotheses found (tokens
    and total log-probabilities, in any order: the order is the ranking part's) are the reference's."""
    for i in BEAM_SEARCH_CASES:
        case, got = results[i]
        found = _beam_hypotheses(got)
        if isinstance(found, str):
            return f"on a hidden test case{exercise.describe_case(case)}: {found}"
        problem = _same_hypotheses(exercise, case, found)
        if problem:
            return problem
    return None


def _finished_part(exercise, results):
    """The finished-hypotheses part: on the cases where hypotheses end at varied lengths, EOS ends
    a hypothesis (it is its last token), a finished hypothesis takes one of the beam_width places
    (exactly beam_width come back; any other ran to max_len); and, when the search part passes
    (so the candidates are right), the hypotheses found are the reference's, in any order."""
    search_right = exercise.part_evidence(BEAM_PARTS[0], results) is None
    for i in BEAM_EOS_CASES:
        case, got = results[i]
        (_, _, _, eos, max_len, width), _ = case
        where = exercise.describe_case(case)
        found = _beam_hypotheses(got)
        if isinstance(found, str):
            return f"on a hidden test case{where}: {found}"
        for tokens, _ in found:
            if eos in tokens[:-1]:
                return f"on a hidden test case{where}: hypothesis {tokens} goes on after EOS ({eos})"
            if tokens[-1:] != [eos] and len(tokens) != max_len:
                return (f"on a hidden test case{where}: hypothesis {tokens} neither ends with EOS ({eos}) "
                        f"nor runs to max_len={max_len}")
        if len(found) != width:
            return (f"on a hidden test case{where}: {len(found)} hypotheses came back for beam_width={width} "
                    "(each finished hypothesis keeps one of the beam's places)")
        problem = _same_hypotheses(exercise, case, found) if search_right else None
        if problem:
            return problem
    return None


def _ranking_part(exercise, results):
    """The ranking part: on every case, the answer's own hypotheses come best first by
    log_prob / len(tokens), and at least one case had hypotheses that this order and the
    total's order rank differently (an answer returning one hypothesis ranks nothing)."""
    shown = False
    for case, got in results:
        found = _beam_hypotheses(got)
        if isinstance(found, str):
            return f"on a hidden test case{exercise.describe_case(case)}: {found}"
        if any(not tokens for tokens, _ in found):
            return f"on a hidden test case{exercise.describe_case(case)}: a hypothesis has no tokens"
        per_token = [lp / len(tokens) for tokens, lp in found]
        if any(a < b - 1e-9 * max(1.0, abs(b)) for a, b in zip(per_token, per_token[1:])):
            return (f"on a hidden test case{exercise.describe_case(case)}: your hypotheses are not sorted "
                    f"best first by log_prob / len(tokens) ({[round(s, 4) for s in per_token]})")
        totals = [lp for _, lp in found]
        shown = shown or sorted(range(len(found)), key=lambda k: -totals[k]) != list(range(len(found)))
    if not shown:
        return "no case returned hypotheses whose per-token order differs from their total's, so the ranking was never shown"
    return None


# The three points of beam search, one per thing a search can get wrong on its own (see Part).
# The search's cases never finish a hypothesis early, so a mistake with EOS or with the final
# ranking cannot show there; the finished part compares whole hypotheses only when the search is
# right, and otherwise checks what EOS must do in any search; the ranking part reads the order of
# the answer's own hypotheses. A catalogued mistake is charged to its one part.
BEAM_PARTS = (
    framework.Part("search", 1 / 3, "the beam keeps the best candidates by total log-probability",
                   mistakes=("keeps_only_best", "selects_by_last_token", "no_competition"),
                   cases=(), check=_search_part),
    framework.Part("finished", 1 / 3, "a hypothesis that emits EOS is finished: it leaves the beam and "
                   "keeps one of its places", mistakes=("width_does_not_shrink", "extends_finished"),
                   cases=(), check=_finished_part),
    framework.Part("ranking", 1 / 3, "the finished hypotheses come back best first by log_prob / len(tokens)",
                   mistakes=("unnormalised_ranking",), cases=(), check=_ranking_part),
)


class RankedExercise(Exercise):
    """Outputs are lists of (tokens, log_prob) pairs: compare them pair by pair."""

    def difference(self, got, expected):
        if not isinstance(got, (list, tuple)):
            return f"{self.output_names[0]} should be a list of (tokens, log_prob) pairs, not {type(got).__name__}."
        if len(got) != len(expected):
            return (f"{self.output_names[0]} has {len(got)} hypotheses, but it should have {len(expected)}.")
        for rank, (g, e) in enumerate(zip(got, expected)):
            if not isinstance(g, (list, tuple)) or len(g) != 2:
                return f"hypothesis {rank} of {self.output_names[0]} should be a pair (tokens, log_prob)."
            tokens = [int(t) for t in g[0]] if hasattr(g[0], "__iter__") else g[0]
            if tokens != list(e[0]):
                return (f"hypothesis {rank} (best first) of {self.output_names[0]} is {tokens}, "
                        f"but it should be {list(e[0])}.")
            problem = mismatch(g[1], e[1], atol=self.atol, rtol=self.rtol, name=f"the log_prob of hypothesis {rank}")
            if problem:
                return problem
        return None


EXERCISES = {
    exercise.grade_id: exercise
    for exercise in (
        GradientExercise(
            grade_id="bahdanau_attention_multiplicative_score",
            function_name="multiplicative_score",
            reference=reference.multiplicative_score,
            make_cases=score_cases,
            make_gradient_cases=lambda seed: score_cases(seed)[:2],
            mistakes=SCORE_MISTAKES,
            forbidden=seq2seq.FORBIDDEN,
            output_names=("your scores",),
            atol=1e-8, rtol=1e-6,
            crash_hint="query is (B, d_s), keys (B, T, d_h), W (d_s, d_h) or None; the scores are (B, T)",
        ),
        GradientExercise(
            grade_id="bahdanau_attention_additive_attention",
            function_name="additive_attention",
            reference=reference.additive_attention,
            make_cases=attention_cases,
            make_gradient_cases=lambda seed: attention_cases(seed)[:2],
            mistakes=ATTENTION_MISTAKES,
            forbidden=seq2seq.FORBIDDEN,
            output_names=("your context", "your weights"),
            atol=1e-8, rtol=1e-6,
            crash_hint="query is (B, d_s), keys (B, T, d_h), W1 (d_a, d_h), W2 (d_a, d_s), v (d_a,): "
                       "keys @ W1.T is (B, T, d_a) and query @ W2.T is (B, d_a), so add a T axis to the latter",
        ),
        GradientExercise(
            grade_id="bahdanau_attention_decoder_step",
            function_name="decoder_step",
            reference=reference.decoder_step,
            make_cases=step_cases,
            make_gradient_cases=lambda seed: step_cases(seed)[:2],
            mistakes=STEP_MISTAKES,
            forbidden=seq2seq.FORBIDDEN,
            output_names=("your logits", "your new state", "your weights"),
            atol=1e-8, rtol=1e-6,
            crash_hint="the cell's input is torch.cat([decoder.embedding(prev_token), context], dim=-1) and "
                       "the logits are decoder.out(torch.cat([new_state, context], dim=-1)); check that your "
                       "additive_attention passes its own tests",
        ),
        Exercise(
            grade_id="bahdanau_attention_greedy_decode",
            function_name="greedy_decode",
            reference=reference.greedy_decode,
            make_cases=greedy_cases,
            mistakes=GREEDY_MISTAKES,
            forbidden=seq2seq.FORBIDDEN,
            output_names=("your tokens", "your log-probability"),
            atol=1e-8, rtol=1e-6,
            crash_hint="call step(torch.tensor([token]), state) -> (log_probs (1, V), new state), and "
                       "return (list of token ids, float)",
        ),
        RankedExercise(
            grade_id="bahdanau_attention_beam_search",
            function_name="beam_search",
            reference=reference.beam_search,
            make_cases=beam_cases,
            mistakes=BEAM_MISTAKES,
            forbidden=seq2seq.FORBIDDEN,
            output_names=("your list of hypotheses",),
            parts=BEAM_PARTS,
            atol=1e-8, rtol=1e-6,
            crash_hint="step takes the last tokens of all live hypotheses (n,) and their states (n, d) and "
                       "returns log_probs (n, V) and new states (n, d); reorder states with new_states[rows]",
        ),
    )
}


# --- bahdanau_attention_weights_count: a think-first question. Its visible test only checks that
# `weights_per_date` is a positive number (the number is the question): every wrong value is hidden only.
# The numbers vary by student (course_utils.grading.questions): the `source` date (its characters, no
# padding) and its `target`, always ten characters YYYY-MM-DD, then the end symbol.
WEIGHTS_COUNT_MISTAKES = (
    Mistake('weights_no_end_step', "you left out the step that writes the end symbol: the decoder attends at "
                                   "that step too.",
                                   lambda source, target: len(target) * len(source)),
    Mistake('weights_one_step', "you counted one decoder step; the decoder weighs the annotations afresh at "
                                "every step.",
                                lambda source, target: len(source)),
    Mistake('weights_target_by_target', "you paired output steps with output steps; at each step the weights "
                                        "run over the source characters.",
                                        lambda source, target: (len(target) + 1) ** 2),
    Mistake('weights_per_direction', "you counted each direction of the bidirectional encoder apart; an "
                                     "annotation h_i joins both directions and gets one weight.",
                                     lambda source, target: 2 * (len(target) + 1) * len(source)),
)
HIDDEN_ONLY = HIDDEN_ONLY | {mistake.name for mistake in WEIGHTS_COUNT_MISTAKES}
EXERCISES["bahdanau_attention_weights_count"] = think_first(
    "bahdanau_attention_weights_count", "weights_per_date",
    lambda source, target: reference.attention_weights_per_translation(len(source), len(target)),
    WEIGHTS_COUNT_MISTAKES, "your number of weights")


def check(grade_id, student_fn):
    """The hidden test of one exercise: GradingError naming the mistake, or None when right."""
    return framework.check(EXERCISES, grade_id, student_fn)


def diagnose(grade_id, fn):
    """Raise GradingError if `fn` crashes, breaks a rule or makes a catalogued mistake; silent on an
    uncatalogued wrong answer, which the test cell's last hidden line (`check`) then fails."""
    return _diagnose(EXERCISES, grade_id, fn)
