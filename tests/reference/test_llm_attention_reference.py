"""The reference answers of notebook 13 (attention as LLMs run it) and their mistake catalogue.

Why here and not only in tests/exercises: the notebook is written after its catalogue, and
test_mutations.py / test_uncatalogued.py only see exercises that a solution notebook holds. Until
then this file runs the same checks through the catalogue in-process (`Exercise.check`, the round
trip the grader makes): the reference and every alternative pass, every mistake fails with its own
message, no two mistakes are the same function on the cases, every uncatalogued wrong answer fails.
It also checks the reference against independent computations: autograd's gradients, PyTorch's
grouped-query attention, cached generation against recomputation, torch's RMSNorm.
"""
import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.grading import GradingError
from course_utils.reference.mistakes import ValueExercise
from course_utils.reference import fast_generation, scaled_dot_product_attention
from course_utils.reference import llm_attention as ref
from course_utils.reference.mistakes import llm_attention as catalogue
from tests.exercises import alternatives_llm_attention, uncatalogued_llm_attention

# The think-first question has numbers per student: checked here for the example's numbers
# (tests/checks/test_questions.py checks every variant).
EXERCISES = {grade_id: (exercise.example() if getattr(exercise, "varies", False) else exercise)
             for grade_id, exercise in catalogue.EXERCISES.items()}
SETTINGS = settings(max_examples=25, deadline=None)


def _params(kind):
    out = []
    for grade_id, exercise in EXERCISES.items():
        if kind == "mistake":
            out += [pytest.param(grade_id, m, id=f"{grade_id}-{m.name}") for m in exercise.mistakes]
        elif kind == "alternative":
            out += [pytest.param(grade_id, fn, id=f"{grade_id}-{getattr(fn, '__name__', repr(fn))}")
                    for fn in alternatives_llm_attention.ALTERNATIVES.get(grade_id, [])]
        elif kind == "wrong":
            out += [pytest.param(grade_id, fn, id=f"{grade_id}-{getattr(fn, '__name__', repr(fn))}")
                    for fn in uncatalogued_llm_attention.UNCATALOGUED.get(grade_id, [])]
    return out


# --------------------------------------------------------------------------- the catalogue

@pytest.mark.parametrize("grade_id", list(EXERCISES))
def test_reference_passes_its_own_exercise(grade_id):
    EXERCISES[grade_id].check(EXERCISES[grade_id].reference)


@pytest.mark.parametrize("grade_id", list(EXERCISES))
def test_every_exercise_has_mistakes_and_alternatives(grade_id):
    assert len(EXERCISES[grade_id].mistakes) >= 2
    assert alternatives_llm_attention.ALTERNATIVES.get(grade_id)
    assert uncatalogued_llm_attention.UNCATALOGUED.get(grade_id)


@pytest.mark.parametrize("grade_id, function", _params("alternative"))
def test_alternative_passes(grade_id, function):
    EXERCISES[grade_id].check(function)


@pytest.mark.parametrize("grade_id, mistake", _params("mistake"))
def test_mistake_fails_with_its_own_message(grade_id, mistake):
    with pytest.raises(GradingError) as failure:
        EXERCISES[grade_id].check(mistake.compute)
    assert mistake.message in str(failure.value), failure.value


@pytest.mark.parametrize("grade_id, mistake", _params("mistake"))
def test_diagnose_names_the_mistake_too(grade_id, mistake):
    with pytest.raises(GradingError, match=None) as failure:
        EXERCISES[grade_id].diagnose(mistake.compute)
    assert mistake.message in str(failure.value)


# A think-first number that two mistakes share is named by both in one message (issue 39 item 4):
# tests/checks/test_questions.py checks that for every variant, so value exercises are not here.
@pytest.mark.parametrize("grade_id", [g for g, e in EXERCISES.items() if not isinstance(e, ValueExercise)])
def test_no_two_mistakes_give_the_same_outputs(grade_id):
    exercise = EXERCISES[grade_id]
    cases = exercise.cases()
    outputs = {m.name: [exercise.run(m.compute, case) for case in cases] for m in exercise.mistakes}
    for a, b in itertools.combinations(exercise.mistakes, 2):
        assert any(exercise.difference(x, y) is not None for x, y in zip(outputs[a.name], outputs[b.name])), (
            f"{a.name} and {b.name} give the same outputs on every case of {grade_id}")


def test_mistake_names_are_unique_and_hidden_only_names_exist():
    names = [m.name for e in EXERCISES.values() for m in e.mistakes]
    assert len(names) == len(set(names))
    assert catalogue.HIDDEN_ONLY <= set(names)


@pytest.mark.parametrize("answer, mistake", [
    (2, "guess_no_k_and_v"), (16, "guess_query_heads"), (8, "guess_float32"), (4.29, "guess_gb"), (4.3, "guess_gb"),
    (4096, "guess_mib"), (0.125, "guess_one_layer")])
def test_a_rounded_think_first_answer_is_named(answer, mistake):
    exercise = EXERCISES["llm_attention_cache_guess"]
    message = next(m.message for m in exercise.mistakes if m.name == mistake)
    with pytest.raises(GradingError, match=None) as failure:
        exercise.check(answer)
    assert message in str(failure.value)


@pytest.mark.parametrize("grade_id, answer", _params("wrong"))
def test_uncatalogued_wrong_answer_fails(grade_id, answer):
    with pytest.raises(GradingError) as failure:
        EXERCISES[grade_id].check(answer)
    assert str(failure.value).strip()


def test_uncatalogued_answers_join_the_suite_only_with_the_notebook():
    """test_uncatalogued.py requires every grade id of WRONG_ANSWERS to be in a solution notebook."""
    from tests.notebook_cells import solution_notebooks
    has_notebook = any("13_llm_attention" in str(path) for path in solution_notebooks())
    assert (uncatalogued_llm_attention.WRONG_ANSWERS == uncatalogued_llm_attention.UNCATALOGUED) == has_notebook


# --------------------------------------------------------------------------- forbidden shortcuts

def test_gqa_may_not_call_torch_sdpa():
    def with_sdpa(q, k, v, causal=True):
        k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], 1)
        T_q, T_k = q.shape[-2], k.shape[-2]
        mask = torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q) if causal else None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    with pytest.raises(GradingError, match="scaled_dot_product_attention"):
        EXERCISES["llm_attention_gqa"].check(with_sdpa)


def test_gqa_may_not_call_the_course_reference():
    with pytest.raises(GradingError):
        EXERCISES["llm_attention_gqa"].check(
            lambda q, k, v, causal=True: ref.grouped_query_attention(q, k, v, causal))


def test_backward_may_not_use_autograd():
    def with_autograd(q, k, v, out, lse, grad_out, causal=False):
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), -math.inf)
        return torch.autograd.grad(torch.softmax(s, -1) @ v, (q, k, v), grad_out)

    with pytest.raises(GradingError, match="torch.autograd.grad"):
        EXERCISES["llm_attention_backward"].check(with_autograd)


def _rms_module(x, weight, eps):
    norm = torch.nn.RMSNorm(x.shape[-1], eps=eps, dtype=x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm(x)


@pytest.mark.parametrize("builtin", [
    lambda x, weight, eps=1e-6: F.rms_norm(x, (x.shape[-1],), weight, eps),
    lambda x, weight, eps=1e-6: torch.rms_norm(x, (x.shape[-1],), weight, eps),
    lambda x, weight, eps=1e-6: _rms_module(x, weight, eps),
])
def test_rms_norm_may_not_call_torchs(builtin):
    with pytest.raises(GradingError, match="rms_norm"):
        EXERCISES["llm_attention_rms_norm"].check(builtin)


# --------------------------------------------------------------------------- the reference itself

def _naive(q, k, v, causal):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        T_q, T_k = s.shape[-2:]
        s = s.masked_fill(~torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q), -math.inf)
    return torch.softmax(s, -1) @ v


@SETTINGS
@given(T=st.integers(1, 8), d=st.sampled_from([1, 2, 4, 8]), causal=st.booleans(), seed=st.integers(0, 2**16))
def test_backward_equals_autograd(T, d, causal, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v, grad_out = (torch.randn(2, 3, T, d, generator=g, dtype=torch.float64) for _ in range(4))
    out, lse = ref.attention_forward_with_lse(q, k, v, causal)
    torch.testing.assert_close(out, _naive(q, k, v, causal))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    expected = torch.autograd.grad(_naive(*leaves, causal), leaves, grad_out)
    for got, want in zip(ref.attention_backward(q, k, v, out, lse, grad_out, causal), expected):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- blocked attention
# The Function of section 4b: course_utils.widgets.llm_attention's blocked loop (online-softmax
# forward, backward over block pairs), with the reference's per-block formulas (D once:
# ref.BlockedAttention) or with attention_backward itself per block (what the notebook runs
# with the student's function).
from course_utils.widgets import llm_attention as demo  # noqa: E402

BLOCKED = {"reference, D once": ref.BlockedAttention,
           "attention_backward per block, blocks of 4": demo.blocked_attention_function(ref.attention_backward, 4),
           "reference, blocks of 3": demo.blocked_attention_function(ref._block_backward_from_D, 3,
                                                                     rowsum_first=True)}


def _blocked_inputs(T, d=5, seed=0, B=2, h=3):
    g = torch.Generator().manual_seed(seed)
    q, k, v, grad_out = (torch.randn(B, h, T, d, generator=g, dtype=torch.float64) for _ in range(4))
    return [t.requires_grad_() for t in (q, k, v)], grad_out


@pytest.mark.parametrize("name", list(BLOCKED))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T", [1, 3, 4, 7, 10, 12, 129, 300])  # ragged: T not a multiple of the block
def test_blocked_attention_equals_autograd_through_naive_attention(name, causal, T):
    (q, k, v), grad_out = _blocked_inputs(T, seed=T)
    out = BLOCKED[name].apply(q, k, v, causal)
    got = torch.autograd.grad(out, (q, k, v), grad_out)
    want_out = _naive(q, k, v, causal)
    want = torch.autograd.grad(want_out, (q, k, v), grad_out)
    torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-12)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(BLOCKED))
@pytest.mark.parametrize("causal", [False, True])
def test_blocked_attention_passes_gradcheck(name, causal):
    (q, k, v), _ = _blocked_inputs(9, d=3, seed=5, B=1, h=2)
    assert torch.autograd.gradcheck(lambda q, k, v: BLOCKED[name].apply(q, k, v, causal), (q, k, v))


def test_blocked_attention_is_called_as_outside_suites_call_it():
    """apply(q, k, v, is_causal), positionally; float32 too; the default block of 128 and T = 200."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 200, 16, generator=g, requires_grad=True) for _ in range(3))
    out = ref.BlockedAttention.apply(q, k, v, True)
    assert out.dtype == torch.float32 and out.shape == q.shape
    out.sum().backward()
    expected = F.scaled_dot_product_attention(q.detach(), k.detach(), v.detach(), is_causal=True)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


def test_blocked_attention_saves_no_t_by_t_matrix_and_the_lse():
    (q, k, v), _ = _blocked_inputs(40, seed=3)
    out = ref.BlockedAttention.apply(q, k, v, True)
    saved = out.grad_fn.saved_tensors
    assert [tuple(t.shape) for t in saved] == [tuple(q.shape)] * 4 + [tuple(q.shape[:-1])]
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~torch.ones(40, 40, dtype=torch.bool).tril(), -math.inf)
    torch.testing.assert_close(saved[4], torch.logsumexp(s, -1))


@pytest.mark.parametrize("causal", [False, True])
def test_blocked_pairs_cover_every_allowed_pair_once(causal):
    for T, block in [(10, 4), (12, 4), (1, 4), (7, 7), (9, 2)]:
        seen = torch.zeros(T, T, dtype=torch.int64)
        for i0, i1, j0, j1, diagonal in demo.block_pairs(T, block, causal):
            assert diagonal == (i0 == j0) and (not diagonal or (i1 - i0) == (j1 - j0))
            tile = torch.ones(i1 - i0, j1 - j0, dtype=torch.int64)
            seen[i0:i1, j0:j1] += tile.tril() if causal and diagonal else tile
        allowed = torch.ones(T, T, dtype=torch.int64)
        assert torch.equal(seen, allowed.tril() if causal else allowed)


def test_peak_memory_sees_a_large_temporary():
    def make_and_drop():
        x = torch.ones(4 * 2**20)  # 16 MiB, written, freed before the return
        return float(x[0])
    make_and_drop()
    _, peak = demo.peak_memory_bytes(make_and_drop)
    if peak is None:
        pytest.skip("no /proc/self/clear_refs here")
    assert 15 * 2**20 <= peak <= 40 * 2**20


@pytest.mark.parametrize("causal", [False, True])
def test_backward_as_an_autograd_function_trains_like_autograd(causal):
    """What the notebook builds: a Function that saves only (out, lse) and calls attention_backward."""

    class Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            out, lse = ref.attention_forward_with_lse(q, k, v, causal)
            ctx.save_for_backward(q, k, v, out, lse)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            return ref.attention_backward(*ctx.saved_tensors, grad_out, causal)

    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 6, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(Attention.apply, (q, k, v))
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    (Attention.apply(q, k, v) ** 2).sum().backward()
    (_naive(*leaves, causal) ** 2).sum().backward()
    for a, b in zip((q, k, v), leaves):
        torch.testing.assert_close(a.grad, b.grad)


@pytest.mark.parametrize("T_q, T_k, causal", [(5, 5, True), (1, 7, True), (3, 8, True), (4, 6, False)])
def test_gqa_with_as_many_kv_heads_as_heads_is_plain_attention(T_q, T_k, causal):
    g = torch.Generator().manual_seed(T_q * 10 + T_k)
    q = torch.randn(2, 3, T_q, 4, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, 3, T_k, 4, generator=g, dtype=torch.float64) for _ in range(2))
    mask = torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q) if causal else None
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(ref.grouped_query_attention(q, k, v, causal), expected)


@pytest.mark.parametrize("h, h_kv", [(4, 2), (6, 3), (8, 1), (4, 4)])
def test_gqa_groups_heads_as_pytorch_does(h, h_kv):
    g = torch.Generator().manual_seed(h * 10 + h_kv)
    q = torch.randn(2, h, 5, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, h_kv, 5, 8, generator=g, dtype=torch.float64) for _ in range(2))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(ref.grouped_query_attention(q, k, v, causal=True), expected)


def test_gqa_equals_multi_head_attention_with_copied_kv_heads():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 6, 4, 2, generator=g, dtype=torch.float64)
    k, v = (torch.randn(1, 2, 4, 2, generator=g, dtype=torch.float64) for _ in range(2))
    out = ref.grouped_query_attention(q, k, v, causal=False)
    for i in range(6):  # query heads 0-2 read kv head 0, 3-5 kv head 1
        torch.testing.assert_close(out[:, i], _naive(q[:, i], k[:, i // 3], v[:, i // 3], False))


@pytest.mark.parametrize("h, h_kv", [(4, 2), (4, 1), (3, 3)])
def test_cached_generation_equals_full_recomputation(h, h_kv):
    g = torch.Generator().manual_seed(h + h_kv)
    T, d = 9, 4
    q = torch.randn(2, h, T, d, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, h_kv, T, d, generator=g, dtype=torch.float64) for _ in range(2))
    full = ref.grouped_query_attention(q, k, v, causal=True)
    steps = [ref.grouped_query_attention(q[:, :, :4], k[:, :, :4], v[:, :, :4])]  # the prompt
    for t in range(4, T):  # then one token at a time, its query against every key so far
        steps.append(ref.grouped_query_attention(q[:, :, t:t + 1], k[:, :, :t + 1], v[:, :, :t + 1]))
    torch.testing.assert_close(torch.cat(steps, dim=2), full)


@pytest.mark.parametrize("window", [1, 2, 3, 5, 20])
def test_rolling_cache_generation_equals_full_sliding_window_attention(window):
    g = torch.Generator().manual_seed(window)
    T, d = 11, 3
    q, k, v = (torch.randn(1, 2, T, d, generator=g, dtype=torch.float64) for _ in range(3))
    mask = ref.sliding_window_mask(T, T, window)
    expected, _ = scaled_dot_product_attention(q, k, v, mask)
    cache_k = cache_v = torch.zeros(1, 2, 0, d, dtype=torch.float64)
    outs = []
    for t in range(T):
        cache_k, cache_v = ref.rolling_cache_append(cache_k, cache_v, k[:, :, t:t + 1], v[:, :, t:t + 1], window)
        assert cache_k.shape[2] == min(t + 1, window)
        # the cache holds exactly the keys the window allows: no mask needed on it
        outs.append(_naive(q[:, :, t:t + 1], cache_k, cache_v, causal=False))
    torch.testing.assert_close(torch.cat(outs, dim=2), expected)


def test_sliding_window_mask_by_hand():
    assert ref.sliding_window_mask(4, 4, 2).int().tolist() == [
        [1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    assert ref.sliding_window_mask(1, 6, 3).int().tolist() == [[0, 0, 0, 1, 1, 1]]
    assert torch.equal(ref.sliding_window_mask(5, 7, 100), torch.ones(5, 7, dtype=torch.bool).tril(2))
    assert ref.sliding_window_mask(3, 3, 2).dtype == torch.bool


def test_rolling_cache_keeps_the_newest_in_time_order():
    cache = torch.arange(3.0).reshape(1, 1, 3, 1)
    new = torch.tensor([3.0, 4.0]).reshape(1, 1, 2, 1)
    keys, values = ref.rolling_cache_append(cache, cache + 10, new, new + 10, window=4)
    assert keys.flatten().tolist() == [1.0, 2.0, 3.0, 4.0]
    assert values.flatten().tolist() == [11.0, 12.0, 13.0, 14.0]
    keys, _ = ref.rolling_cache_append(cache, cache, new, new, window=10)
    assert keys.flatten().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("eps", [1e-6, 0.1, 1.0])
def test_rms_norm_equals_torchs(eps):
    g = torch.Generator().manual_seed(0)
    x, weight = torch.randn(2, 5, 8, generator=g, dtype=torch.float64), torch.randn(8, generator=g, dtype=torch.float64)
    torch.testing.assert_close(ref.rms_norm(x, weight, eps), F.rms_norm(x, (8,), weight, eps))
    module = torch.nn.RMSNorm(8, eps=eps, dtype=torch.float64)
    with torch.no_grad():
        module.weight.copy_(weight)
    torch.testing.assert_close(ref.rms_norm(x, weight, eps), module(x))


def test_swiglu_equals_a_llama_style_mlp():
    g = torch.Generator().manual_seed(0)
    d, f = 4, 6
    gate, up, down = (torch.nn.Linear(a, b, bias=False, dtype=torch.float64) for a, b in ((d, f), (d, f), (f, d)))
    x = torch.randn(2, 3, d, generator=g, dtype=torch.float64)
    expected = down(F.silu(gate(x)) * up(x))  # nn.Linear stores (out, in): x @ W^T
    got = ref.swiglu(x, gate.weight.T, up.weight.T, down.weight.T)
    torch.testing.assert_close(got, expected)


def test_cache_question_is_four_gib_and_agrees_with_notebook_11():
    assert ref.kv_cache_gib() == 4.0 == ref.kv_cache_gib(**ref.CACHE_QUESTION)
    config = ref.CACHE_QUESTION
    assert fast_generation.kv_cache_bytes(config["num_layers"], config["T"], 32, config["num_kv_heads"],
                                          config["head_dim"], config["bytes_per_value"]) == 4 * 2**30
    assert EXERCISES["llm_attention_cache_guess"].reference == 4.0


# --------------------------------------------------------------------------- categories
# What tests/exercises/test_categories.py will ask of these exercises once the notebook exists,
# run here through the catalogue: a right answer in float32 passes, and so does a right result
# cast to float32; a right answer that writes into its inputs fails; the right numbers as NumPy
# fail with a sentence about the kind; results moved a little fail.

def _correct(grade_id):
    """A right answer that is not the reference (wrapping the reference would call a forbidden
    function: the guard treats every function of course_utils.reference as the answer)."""
    return alternatives_llm_attention.ALTERNATIVES[grade_id][0]


FUNCTION_EXERCISES = [gid for gid, e in EXERCISES.items() if e.runner == "function"]


def _float_tensor_inputs(case):
    args, kwargs = case
    return [v for v in list(args) + list(kwargs.values()) if isinstance(v, torch.Tensor) and v.is_floating_point()]


def _map_results(value, change):
    if isinstance(value, tuple):
        return tuple(_map_results(v, change) for v in value)
    return change(value)


FLOAT_EXERCISES = [gid for gid in FUNCTION_EXERCISES if any(_float_tensor_inputs(c) for c in EXERCISES[gid].cases())]


@pytest.mark.parametrize("grade_id", FLOAT_EXERCISES)
def test_a_correct_answer_in_float32_passes(grade_id):
    reference = _correct(grade_id)

    def in_float32(*args, **kwargs):
        down = [a.float() if isinstance(a, torch.Tensor) and a.dtype == torch.float64 else a for a in args]
        return reference(*down, **kwargs)

    EXERCISES[grade_id].check(in_float32)


@pytest.mark.parametrize("grade_id", FLOAT_EXERCISES)
def test_a_correct_result_cast_to_float32_passes(grade_id):
    reference = _correct(grade_id)
    EXERCISES[grade_id].check(lambda *a, **k: _map_results(
        reference(*a, **k), lambda t: t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.float64 else t))


@pytest.mark.parametrize("grade_id", FLOAT_EXERCISES)
def test_an_answer_that_edits_its_inputs_fails(grade_id):
    reference = _correct(grade_id)

    def editing(*args, **kwargs):
        result = reference(*args, **kwargs)
        with torch.no_grad():
            _float_tensor_inputs((args, kwargs))[0].mul_(0.5)
        return result

    with pytest.raises(GradingError, match="in place"):
        EXERCISES[grade_id].check(editing)


@pytest.mark.parametrize("grade_id", FUNCTION_EXERCISES)
def test_the_right_numbers_as_numpy_fail_with_a_sentence_about_the_kind(grade_id):
    reference = _correct(grade_id)
    with pytest.raises(GradingError) as failure:
        EXERCISES[grade_id].check(lambda *a, **k: _map_results(reference(*a, **k), lambda t: t.numpy()))
    assert "Your code uses" not in str(failure.value) and "NumPy" in str(failure.value), failure.value


@pytest.mark.parametrize("grade_id", FLOAT_EXERCISES)
def test_results_moved_a_little_fail(grade_id):
    reference = _correct(grade_id)

    def moved(*args, **kwargs):
        result = reference(*args, **kwargs)
        first = result[0] if isinstance(result, tuple) else result
        first = first * 1.37 + 0.11 if first.is_floating_point() else ~first
        return (first,) + tuple(result[1:]) if isinstance(result, tuple) else first

    with pytest.raises(GradingError):
        EXERCISES[grade_id].check(moved)
