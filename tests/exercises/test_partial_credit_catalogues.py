"""Partial credit in the catalogues (issue 29 item 5): the exercises with separable parts award
points per part, as their catalogue declares (`Part` in course_utils/reference/mistakes).

For every exercise with parts: the parts are consistent (shares sum to 1, every catalogued
mistake charged to exactly one part); the reference and the second correct implementations
get full points; every catalogued mistake is still named and loses exactly its own part; the
uncatalogued wrong answers of tests/exercises get the parts listed here (what each truly
passes); and each part's evidence fails on an answer wrong in that part only.
"""
import pytest

from course_utils.grading import GradingError
from course_utils.reference import bahdanau_attention as bahdanau_reference
from course_utils.reference.mistakes import PartialCredit, bahdanau_attention, encoder_decoder, parts_problems
from tests.exercises import alternatives_bahdanau_attention, alternatives_encoder_decoder
from tests.exercises import uncatalogued_bahdanau_attention as wrong_04
from tests.exercises import uncatalogued_encoder_decoder as wrong_10

BEAM = bahdanau_attention.EXERCISES["bahdanau_attention_beam_search"]
BLOCK = encoder_decoder.EXERCISES["encoder_decoder_block"]
WITH_PARTS = {"beam": BEAM, "block": BLOCK}

# The part each catalogued mistake costs (the one the catalogue charges it to).
EXPECTED_MISTAKE_PART = {
    "bahdanau_attention_beam_search": {
        "keeps_only_best": "search", "selects_by_last_token": "search", "no_competition": "search",
        "width_does_not_shrink": "finished", "extends_finished": "finished",
        "unnormalised_ranking": "ranking",
    },
    "encoder_decoder_block": {
        "no_causal_mask": "self_attention", "swapped_attention_layers": "self_attention",
        "mask_to_self": "cross_attention", "causal_cross": "cross_attention",
        "keys_from_decoder": "cross_attention", "cross_reads_decoder": "cross_attention",
        "memory_normed": "cross_attention", "mask_not_passed": "cross_attention",
        "no_residual_self": "arrangement", "no_residual_cross": "arrangement", "no_residual_mlp": "arrangement",
        "residual_from_normed": "arrangement", "post_norm_of_sublayer": "arrangement",
        "post_norm_last_only": "arrangement", "mlp_skipped": "arrangement", "gelu": "arrangement",
        "cross_first": "arrangement", "cross_first_own_norms": "arrangement", "one_norm": "arrangement",
        "always_pre": "arrangement", "always_post": "arrangement",
    },
}

# Uncatalogued wrong answers (written without the catalogue) and the parts they truly pass.
EXPECTED_UNCATALOGUED = {
    "bahdanau_attention_beam_search": {
        "beam_by_total": {"search", "finished"},
        "beam_ascending": {"search", "finished"},
        "beam_length_without_eos": {"search", "finished"},
        "beam_no_shrink": {"search", "ranking"},
        "beam_eos_and_bos_written_in": {"search", "ranking"},
        "beam_row_from_width": {"finished", "ranking"},
        "beam_duplicated_start": {"finished"},
        "beam_drops_live_at_end": {"ranking"},
        "beam_hardcoded": set(),
        "beam_with_bos": set(),
    },
    "encoder_decoder_block": {
        "BlockNotCausal": {"cross_attention", "arrangement"},
        "BlockNoSrcMask": {"self_attention", "arrangement"},
        "BlockNormalisesMemory": {"self_attention", "arrangement"},
        "BlockSelfAttendsTwice": {"self_attention", "arrangement"},
        "BlockAlwaysPreNorm": {"self_attention", "cross_attention"},
        "BlockNormsAfterResidualWrong": {"self_attention", "cross_attention"},
        "BlockOneNorm": {"self_attention", "cross_attention"},
        "BlockCrossFirst": {"self_attention", "cross_attention"},
        "BlockGelu": {"self_attention", "cross_attention"},
        "BlockPostNormFinalOnly": {"self_attention", "cross_attention"},
        # catalogued (swapped_attention_layers, no_residual_mlp, residual_from_normed): each costs its one part
        "BlockSwappedModules": {"cross_attention", "arrangement"},
        "BlockNoMlpResidual": {"self_attention", "cross_attention"},
        "BlockResidualFromNormed": {"self_attention", "cross_attention"},
    },
}
# Wrong answers the hidden check passes (only the visible tests catch them: a graph cut, dropout
# in training mode, a cache): the cell fails in the kernel and the judge keeps it at zero.
VISIBLE_ONLY = {"BlockCachesMemory", "BlockUnderNoGrad", "BlockDetachedMlp", "BlockFrozenMlpWeights",
                "BlockFrozenNorms", "BlockDropout"}
CRASHES = {"beam_states_not_reindexed", "BlockMemoryAsQuery", "BlockInPlaceResidual"}


def scores(exercise, answer):
    """(fraction, {part: passed}, message) of an answer, judged as the grader judges it."""
    try:
        exercise.check(answer)
    except PartialCredit as error:
        return error.fraction, {p.name: p.passed for p in error.parts}, str(error)
    except GradingError as error:
        return 0.0, {p.name: False for p in exercise.parts}, str(error)
    return 1.0, {p.name: True for p in exercise.parts}, ""


@pytest.mark.parametrize("exercise", WITH_PARTS.values(), ids=WITH_PARTS.keys())
def test_parts_are_consistent(exercise):
    assert exercise.parts
    assert parts_problems(exercise) == []
    charged = {m: next(p.name for p in exercise.parts if m in p.mistakes) for m in (x.name for x in exercise.mistakes)}
    assert charged == EXPECTED_MISTAKE_PART[exercise.grade_id]


@pytest.mark.parametrize("exercise", WITH_PARTS.values(), ids=WITH_PARTS.keys())
def test_right_answers_get_full_points(exercise):
    alternatives = {"bahdanau_attention_beam_search": alternatives_bahdanau_attention,
                    "encoder_decoder_block": alternatives_encoder_decoder}[exercise.grade_id]
    for answer in [exercise.reference, *alternatives.ALTERNATIVES[exercise.grade_id]]:
        fraction, parts, message = scores(exercise, answer)
        assert fraction == 1.0 and all(parts.values()), (answer, message)


@pytest.mark.parametrize("exercise, mistake", [
    pytest.param(exercise, mistake, id=f"{key}-{mistake.name}")
    for key, exercise in WITH_PARTS.items() for mistake in exercise.mistakes])
def test_a_catalogued_mistake_is_named_and_costs_its_own_part(exercise, mistake):
    fraction, parts, message = scores(exercise, mistake.compute)
    lost = EXPECTED_MISTAKE_PART[exercise.grade_id][mistake.name]
    assert mistake.message in message
    assert {name for name, passed in parts.items() if not passed} == {lost}
    share = next(p.share for p in exercise.parts if p.name == lost)
    assert fraction == pytest.approx(1.0 - share)
    title = next(p.title for p in exercise.parts if p.name == lost)
    assert f"{title} (" in message and "not passed" in message.split(title, 1)[1].split(";")[0]


@pytest.mark.parametrize("grade_id, name", [
    pytest.param(gid, name, id=f"{gid}-{name}") for gid, answers in EXPECTED_UNCATALOGUED.items() for name in answers])
def test_an_uncatalogued_wrong_answer_gets_only_the_parts_it_passes(grade_id, name):
    exercise, module = {"bahdanau_attention_beam_search": (BEAM, wrong_04),
                        "encoder_decoder_block": (BLOCK, wrong_10)}[grade_id]
    fraction, parts, message = scores(exercise, getattr(module, name))
    assert {n for n, passed in parts.items() if passed} == EXPECTED_UNCATALOGUED[grade_id][name], message
    assert fraction < 1.0


@pytest.mark.parametrize("exercise, module", [(BEAM, wrong_04), (BLOCK, wrong_10)], ids=["beam", "block"])
def test_every_uncatalogued_wrong_answer_is_listed(exercise, module):
    """A new wrong answer in tests/exercises/uncatalogued_*.py gets its expected parts here too;
    one that crashes on a hidden case earns no part."""
    listed = set(EXPECTED_UNCATALOGUED[exercise.grade_id])
    holes = getattr(module, "HOLES", None) or {}  # {grade_id: [answers the hidden tests cannot see]}
    holes = {f.__name__ for f in holes.get(exercise.grade_id, [])}
    names = {f.__name__ for f in module.WRONG_ANSWERS[exercise.grade_id]} - holes
    assert names - VISIBLE_ONLY - CRASHES == listed
    for name in names & CRASHES:
        fraction, parts, message = scores(exercise, getattr(module, name))
        assert fraction == 0.0 and "Points by part" not in message


# --- each part's evidence fails on an answer wrong in that part only ------------------------

def _reranked(key):
    def answer(*args):
        return sorted(bahdanau_reference.beam_search(*args), key=key, reverse=True)
    return answer


def _beam_part_passes(part_name, answer):
    results = [(case, BEAM.run(answer, case)) for case in BEAM.cases()]
    part = next(p for p in BEAM.parts if p.name == part_name)
    return BEAM.part_evidence(part, results)


def test_beam_parts_fail_on_wrong_input():
    right = bahdanau_reference.beam_search
    for part in BEAM.parts:
        assert _beam_part_passes(part.name, right) is None
    # ranking: sorted by the total, or worst first
    assert "not sorted" in _beam_part_passes("ranking", _reranked(lambda h: h[1]))
    assert _beam_part_passes("ranking", lambda *a: right(*a)[:1]) is not None  # nothing ranked
    assert _beam_part_passes("search", _reranked(lambda h: h[1])) is None  # order is not the search's

    # search: one token fewer among the candidates on the no-EOS cases
    def greedy_first_step(step, state, bos, eos, max_len, beam_width):
        return right(step, state, bos, eos, max_len, max(1, beam_width - 1)) + [([bos] * max_len, -99.0)]
    assert _beam_part_passes("search", greedy_first_step) is not None

    # finished: an EOS kept in the middle of a hypothesis, or one hypothesis too many
    def continued(step, state, bos, eos, max_len, beam_width):
        found = right(step, state, bos, eos, max_len, beam_width)
        return [(list(t) + ([eos, eos] if t[-1] == eos else []), lp) for t, lp in found]
    assert "after EOS" in _beam_part_passes("finished", continued)

    def one_more(step, state, bos, eos, max_len, beam_width):
        return right(step, state, bos, eos, max_len, beam_width + 1)
    assert _beam_part_passes("finished", one_more) is not None


def _block_part_fails(part_name, kind):
    """The evidence of one DecoderBlock part on a block wrong in one sub-layer (`kind`)."""
    class Wrong(BLOCK.reference):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if kind == "mlp":  # the MLP's output doubled
                self.mlp.register_forward_hook(lambda module, inputs, output: 2 * output)

        def forward(self, x, memory, src_mask=None):
            if kind == "self":  # no causal mask
                saved, self.self_attn.forward = self.self_attn.forward, (
                    lambda q, k, mask=None, causal=False: saved(q, k, mask, causal=False))
            if kind == "cross":  # the source's padding read
                saved, self.cross_attn.forward = self.cross_attn.forward, (
                    lambda q, k, mask=None, causal=False: saved(q, k, None, causal=causal))
            return super().forward(x, memory, src_mask)
    results = [(case, BLOCK.run(Wrong, case)) for case in BLOCK.cases()]
    part = next(p for p in BLOCK.parts if p.name == part_name)
    return BLOCK.part_evidence(part, results)


@pytest.mark.parametrize("kind, part", [("self", "self_attention"), ("cross", "cross_attention"), ("mlp", "arrangement")])
def test_block_parts_fail_on_wrong_input_and_only_there(kind, part):
    assert _block_part_fails(part, kind) is not None
    for other in {p.name for p in BLOCK.parts} - {part}:
        assert _block_part_fails(other, kind) is None


def test_a_crash_or_a_forbidden_call_earns_no_part():
    def crashes(*args):
        raise ValueError("no")
    fraction, parts, message = scores(BEAM, crashes)
    assert fraction == 0.0 and not any(parts.values()) and "Points by part" not in message


def test_partial_credit_reaches_the_grader_through_plain_records():
    """judge.py sees PartialCredit from records read back as plain data (no student object)."""
    from course_utils.grading import probe
    spec = BEAM.spec()
    records = probe.roundtrip(probe.collect(probe.roundtrip_cases(spec), bahdanau_attention.BEAM_MISTAKES[1].compute))
    with pytest.raises(PartialCredit) as failure:
        BEAM.judge(records, generic=True, spec=spec)
    assert failure.value.fraction == pytest.approx(2 / 3)
    # diagnose (generic=False) names the mistake with its parts too
    with pytest.raises(PartialCredit):
        BEAM.judge(records, generic=False, spec=spec)
