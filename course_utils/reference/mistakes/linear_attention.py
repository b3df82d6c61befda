"""Mistake catalogue of notebook 15 (linear attention as a recurrence).

Instructor side, as secret as the reference. Every mistake is a self-contained function with
the exercise's signature (only torch: the forbidden-API guard treats any other function of
`course_utils.reference` as the answer).

The student's recurrent forms return their state as separate values, (outputs, S, z) and
(outputs, S), so that each is compared (and named) on its own; the reference's resumable
`state=` argument is wrapped to that shape here.

Why the cases look the way they do (every mistake must differ from the reference and from every
other mistake on them):

* q, k, v of both signs (elu + 1 differs from exp, ReLU and the identity there), d_k different
  from d_v (a state written v k^T does not fit), leading (B, H) dimensions and none, float32 and
  float64, T up to 9 (a mask off by one diagonal shows at every row);
* the recurrent forms also get a state carried in from an earlier chunk (computed by the
  reference on it), so ignoring the state, or resetting it, shows;
* the delta rule gets keys of unit length and of other lengths, and beta strictly between 0 and 1
  (beta left out, or applied to v alone, then shows).
* the think-first ratio: a number, every catalogued slip a different one.
"""
import torch
import torch.nn.functional as F

from course_utils.linear_attention import FORBIDDEN as FAST_FORMS
from course_utils.reference import linear_attention as reference
from course_utils.reference.mistakes import Exercise, Mistake, think_first
from course_utils.reference.mistakes import check as _check
from course_utils.reference.mistakes import diagnose as _diagnose

__all__ = ["EXERCISES", "HIDDEN_ONLY", "check", "diagnose"]

# The think-first question's visible test only checks that the answer is a positive number.
HIDDEN_ONLY = {"guess_keys_only", "guess_state_as_vector", "guess_upside_down", "guess_per_layer_and_head"}

DT = torch.float64


def _phi(x):
    return F.elu(x) + 1


def _recurrent_reference(q, k, v, S=None, z=None):
    outputs, (S, z) = reference.recurrent_linear_attention(q, k, v, state=None if S is None else (S, z))
    return outputs, S, z


def _qkv(g, *lead, T, d_k, d_v, dtype=DT, scale=1.5):
    q, k = (scale * torch.randn(*lead, T, d_k, generator=g, dtype=DT) for _ in range(2))
    v = torch.randn(*lead, T, d_v, generator=g, dtype=DT)
    return q.to(dtype), k.to(dtype), v.to(dtype)


# --- linear_attention_parallel: causal_linear_attention(q, k, v) -------------------------------

def _parallel(q, k, v, feature=_phi, diagonal=0, normalise=True, causal=True):
    scores = feature(q) @ feature(k).transpose(-2, -1)
    if causal:
        scores = scores.tril(diagonal)
    out = scores @ v
    return out / (scores.sum(-1, keepdim=True) + 1e-6) if normalise else out


def parallel_not_causal(q, k, v):
    return _parallel(q, k, v, causal=False)


def parallel_no_normaliser(q, k, v):
    return _parallel(q, k, v, normalise=False)


def parallel_no_feature_map(q, k, v):
    return _parallel(q, k, v, feature=lambda x: x)


def parallel_exp_feature_map(q, k, v):
    return _parallel(q, k, v, feature=torch.exp)


def parallel_relu_feature_map(q, k, v):
    return _parallel(q, k, v, feature=F.relu)


def parallel_excludes_itself(q, k, v):
    return _parallel(q, k, v, diagonal=-1)


def parallel_normalised_over_queries(q, k, v):
    scores = (_phi(q) @ _phi(k).transpose(-2, -1)).tril()
    return (scores / (scores.sum(-2, keepdim=True) + 1e-6)) @ v


def _parallel_cases(seed):
    g = torch.Generator().manual_seed(seed)
    return [(_qkv(g, T=6, d_k=4, d_v=3), {}), (_qkv(g, 2, 3, T=7, d_k=5, d_v=4), {}),
            (_qkv(g, 2, T=9, d_k=3, d_v=6, dtype=torch.float32), {}), (_qkv(g, 1, 2, T=5, d_k=8, d_v=8), {})]


PARALLEL = Exercise(
    grade_id="linear_attention_parallel",
    function_name="causal_linear_attention",
    reference=reference.causal_linear_attention,
    make_cases=_parallel_cases,
    output_names=("your linear attention",),
    forbidden=FAST_FORMS,
    atol=1e-6,
    rtol=1e-5,
    crash_hint="q, k are (..., T, d_k) and v (..., T, d_v); build the (..., T, T) weights phi(q) phi(k)^T, keep "
               "s <= t, divide each row by its sum; return (..., T, d_v)",
    mistakes=(
        Mistake("not_causal",
                "your output at position t uses keys AFTER t: keep only the weights of positions s <= t (the "
                "lower triangle, diagonal included).",
                parallel_not_causal),
        Mistake("no_normaliser",
                "your output is the weighted sum of the values without dividing by the sum of the weights: "
                "each row of weights has to be normalised, as softmax's rows are.",
                parallel_no_normaliser),
        Mistake("no_feature_map",
                "your weights are the raw dot products q . k: they can be negative or sum to nearly zero. "
                "Apply the positive feature map to q and to k first.",
                parallel_no_feature_map),
        Mistake("exp_feature_map",
                "your feature map is exp: positive, but not the one the exercise fixes (elu(x) + 1).",
                parallel_exp_feature_map),
        Mistake("relu_feature_map",
                "your feature map is ReLU: it is zero for every negative input, so a row of weights can be "
                "all zeros. The exercise's map, elu(x) + 1, is positive everywhere.",
                parallel_relu_feature_map),
        Mistake("excludes_itself",
                "your mask leaves out the diagonal: position t attends to itself too (s <= t, not s < t).",
                parallel_excludes_itself),
        Mistake("normalised_over_queries",
                "your weights are normalised down each column (over the queries): each query's row of weights, "
                "over its keys, is what sums to one.",
                parallel_normalised_over_queries),
    ),
)


# --- linear_attention_recurrent: recurrent_linear_attention(q, k, v, S=None, z=None) -----------

def _recurrent(q, k, v, S=None, z=None, read_first=False, normalise=True, accumulate=True, carry=True):
    phi_q, phi_k = _phi(q), _phi(k)
    if S is None or not carry:
        S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1]))
        z = q.new_zeros(q.shape[:-2] + (q.shape[-1],))
    outputs = []
    for t in range(q.shape[-2]):
        write, add = phi_k[..., t, :, None] * v[..., t, None, :], phi_k[..., t, :]
        if read_first:
            before = (S, z)
        S, z = (S + write, z + add) if accumulate else (write, add)
        S_read, z_read = before if read_first else (S, z)
        numerator = (phi_q[..., t, :, None] * S_read).sum(-2)
        denominator = (phi_q[..., t, :] * z_read).sum(-1, keepdim=True)
        outputs.append(numerator / (denominator + 1e-6) if normalise else numerator)
    return torch.stack(outputs, -2), S, z


def recurrent_reads_before_writing(q, k, v, S=None, z=None):
    return _recurrent(q, k, v, S, z, read_first=True)


def recurrent_no_normaliser(q, k, v, S=None, z=None):
    return _recurrent(q, k, v, S, z, normalise=False)


def recurrent_overwrites(q, k, v, S=None, z=None):
    return _recurrent(q, k, v, S, z, accumulate=False)


def recurrent_ignores_state(q, k, v, S=None, z=None):
    return _recurrent(q, k, v, S, z, carry=False)


def recurrent_returns_initial_state(q, k, v, S=None, z=None):
    outputs, _, _ = _recurrent(q, k, v, S, z)
    if S is None:
        S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1]))
        z = q.new_zeros(q.shape[:-2] + (q.shape[-1],))
    return outputs, S, z


def _recurrent_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def resumed(*lead, T, d_k, d_v, dtype=DT):
        earlier = _qkv(g, *lead, T=4, d_k=d_k, d_v=d_v)
        _, S, z = _recurrent_reference(*earlier)
        return _qkv(g, *lead, T=T, d_k=d_k, d_v=d_v, dtype=dtype) + (S.to(dtype), z.to(dtype)), {}

    return [(_qkv(g, T=6, d_k=4, d_v=3), {}), (_qkv(g, 2, 3, T=7, d_k=5, d_v=4), {}),
            (_qkv(g, 2, T=5, d_k=3, d_v=6, dtype=torch.float32), {}), resumed(T=5, d_k=4, d_v=3),
            resumed(2, 2, T=3, d_k=3, d_v=5)]


RECURRENT = Exercise(
    grade_id="linear_attention_recurrent",
    function_name="recurrent_linear_attention",
    reference=_recurrent_reference,
    make_cases=_recurrent_cases,
    output_names=("your outputs", "your final state S", "your final normaliser z"),
    forbidden=FAST_FORMS,
    atol=1e-6,
    rtol=1e-5,
    crash_hint="start from S = zeros (..., d_k, d_v) and z = zeros (..., d_k) unless they are given; for each t "
               "add phi(k_t) v_t^T to S and phi(k_t) to z, then read S^T phi(q_t) / (phi(q_t) . z); return "
               "(outputs (..., T, d_v), S, z)",
    mistakes=(
        Mistake("reads_before_writing",
                "your output at t reads the state before token t is written into it: token t's own key and "
                "value count at step t, as the diagonal does in the parallel form.",
                recurrent_reads_before_writing),
        Mistake("no_normaliser",
                "your output is S^T phi(q_t) alone: divide by phi(q_t) . z, the running sum of the key "
                "features, as the parallel form divides by each row's sum.",
                recurrent_no_normaliser),
        Mistake("overwrites",
                "your state keeps only the latest token's phi(k_t) v_t^T: the state is a running SUM over every "
                "token so far (and so is z).",
                recurrent_overwrites),
        Mistake("ignores_state",
                "your function starts from zeros even when a state (S, z) is passed in: continue from the "
                "state given, so that a long sequence can be processed in pieces.",
                recurrent_ignores_state),
        Mistake("returns_initial_state",
                "the state your function returns is the one it started from: return S and z as they are "
                "after the last token.",
                recurrent_returns_initial_state),
    ),
)


# --- linear_attention_delta: delta_rule(q, k, v, beta, S=None) ---------------------------------

def _delta(q, k, v, beta, S=None, add_only=False, use_beta=True, read_first=False, sign=1.0, beta_on_v=False,
           look_up_with_q=False):
    S = q.new_zeros(q.shape[:-2] + (q.shape[-1], v.shape[-1])) if S is None else S
    outputs = []
    for t in range(q.shape[-2]):
        k_t, q_t, b = k[..., t, :], q[..., t, :], beta[..., t, None]
        probe_key = q_t if look_up_with_q else k_t
        stored = (probe_key[..., :, None] * S).sum(-2)
        if add_only:
            correction = b * v[..., t, :]
        elif beta_on_v:
            correction = b * v[..., t, :] - stored
        else:
            correction = sign * (v[..., t, :] - stored)
            correction = b * correction if use_beta else correction
        before = S
        S = S + k_t[..., :, None] * correction[..., None, :]
        outputs.append((q_t[..., :, None] * (before if read_first else S)).sum(-2))
    return torch.stack(outputs, -2), S


def delta_adds(q, k, v, beta, S=None):
    return _delta(q, k, v, beta, S, add_only=True)


def delta_no_beta(q, k, v, beta, S=None):
    return _delta(q, k, v, beta, S, use_beta=False)


def delta_reads_before_writing(q, k, v, beta, S=None):
    return _delta(q, k, v, beta, S, read_first=True)


def delta_sign_flipped(q, k, v, beta, S=None):
    return _delta(q, k, v, beta, S, sign=-1.0)


def delta_beta_on_value_only(q, k, v, beta, S=None):
    return _delta(q, k, v, beta, S, beta_on_v=True)


def delta_looks_up_with_query(q, k, v, beta, S=None):
    return _delta(q, k, v, beta, S, look_up_with_q=True)


def _delta_cases(seed):
    g = torch.Generator().manual_seed(seed)

    def case(*lead, T, d_k, d_v, unit=True, dtype=DT, state=False):
        q, k, v = _qkv(g, *lead, T=T, d_k=d_k, d_v=d_v, scale=1.0)
        if unit:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        beta = 0.1 + 0.8 * torch.rand(*lead, T, generator=g, dtype=DT)
        args = (q, k, v, beta)
        if state:
            args += (0.5 * torch.randn(*lead, d_k, d_v, generator=g, dtype=DT),)
        return tuple(a.to(dtype) for a in args), {}

    return [case(T=6, d_k=4, d_v=3), case(2, 3, T=7, d_k=5, d_v=4), case(2, T=5, d_k=3, d_v=6, unit=False),
            case(T=6, d_k=4, d_v=4, dtype=torch.float32), case(2, T=4, d_k=3, d_v=2, state=True)]


DELTA = Exercise(
    grade_id="linear_attention_delta",
    function_name="delta_rule",
    reference=reference.delta_rule_recurrent,
    make_cases=_delta_cases,
    output_names=("your outputs", "your final state S"),
    forbidden=FAST_FORMS,
    atol=1e-6,
    rtol=1e-5,
    crash_hint="q, k (..., T, d_k), v (..., T, d_v), beta (..., T); S starts as zeros (..., d_k, d_v) unless "
               "given; for each t read what k_t holds (S^T k_t), write the correction into S, then read "
               "S^T q_t; return (outputs (..., T, d_v), S)",
    mistakes=(
        Mistake("adds",
                "your state adds beta_t k_t v_t^T, which is plain linear attention: the delta rule writes "
                "the DIFFERENCE between v_t and what k_t reads from the state now.",
                delta_adds),
        Mistake("no_beta",
                "your write leaves out beta_t: it scales how much of the correction is written at each step.",
                delta_no_beta),
        Mistake("reads_before_writing",
                "your output at t reads the state before token t is written: read S^T q_t after the update.",
                delta_reads_before_writing),
        Mistake("sign_flipped",
                "your correction points the wrong way (what is stored minus v_t): the write should move what "
                "k_t reads TOWARDS v_t.",
                delta_sign_flipped),
        Mistake("beta_on_value_only",
                "your correction scales v_t by beta_t but subtracts the whole of what k_t reads: beta_t scales "
                "the difference as a whole.",
                delta_beta_on_value_only),
        Mistake("looks_up_with_query",
                "your correction subtracts what the QUERY reads: the value to replace is the one stored under "
                "the key being written, k_t.",
                delta_looks_up_with_query),
    ),
)


# --- think first: how much smaller the state is than the KV cache ------------------------------

# The numbers vary by student (course_utils.grading.questions): layers, heads of dimension d, T
# tokens, in float16. A KV cache keeps 2 T d numbers per head and layer, a state d x d: the ratio is
# 2 T / d whatever the number of layers and heads.
CACHE_RATIO = think_first(
    "linear_attention_cache_ratio", "cache_over_state",
    lambda layers, heads, d, T: 2 * T / d,
    mistakes=(
        Mistake("guess_keys_only", "that counts the keys of the cache but not its values (or the values but "
                "not the keys): a cache keeps both for every token.", lambda layers, heads, d, T: T / d),
        Mistake("guess_state_as_vector", "that counts a state of d numbers per head: the state is a d x d "
                "matrix.", lambda layers, heads, d, T: 2 * T),
        Mistake("guess_upside_down", "that is the state over the cache, the ratio the other way up.",
                lambda layers, heads, d, T: d / (2 * T)),
        Mistake("guess_per_layer_and_head", "that multiplies the ratio by the layers and heads: both the cache "
                "and the states have one part per layer and head, so those cancel.",
                lambda layers, heads, d, T: 2 * T / d * layers * heads),
    ),
    answer_name="your ratio", rtol=1e-3)


EXERCISES = {exercise.grade_id: exercise for exercise in (PARALLEL, RECURRENT, CACHE_RATIO, DELTA)}


def check(grade_id, fn):
    """Raise GradingError naming the mistake if `fn` is wrong; return None if right."""
    return _check(EXERCISES, grade_id, fn)


def diagnose(grade_id, fn):
    """The first hidden block of a test cell: raise only what can be named (a catalogued
    mistake, a crash, a forbidden call), so that the visible checks speak next."""
    return _diagnose(EXERCISES, grade_id, fn)
