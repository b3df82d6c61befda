"""The wall between the student's answer and the judge: what crosses it, and how a cell is judged.

course_utils.grading.probe runs an answer on the grader's cases and sends plain data out;
autograder.judge decides a test cell from that data alone. These tests prove that only plain
data crosses (objects of the student's own classes arrive as Opaque and equal nothing), that a
cell passes only with a complete, readable, correct "check" record from its own exercise, and
that the in-process `check` takes the same path.
"""
import base64

import numpy as np
import pytest
import torch

from autograder import judge
from course_utils.grading import GradingError, probe
from course_utils.reference.mistakes import causal_cnn, self_attention

SOFTMAX = self_attention.EXERCISES["self_attention_softmax"]
SOURCE = ('from course_utils.grading import hidden\ncatalogue = hidden.catalogue("self_attention")\n'
          'catalogue.diagnose("self_attention_softmax", softmax)\n'
          'catalogue.check("self_attention_softmax", softmax)\n')


def right_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def columns_softmax(x, axis=-1):  # a catalogued mistake: normalised over the wrong axis
    return right_softmax(x, axis=0) if x.ndim > 1 else right_softmax(x)


class _Cases:
    def spec(self, grade_id):
        return {"self_attention_softmax": SPEC}.get(grade_id)


SPEC = SOFTMAX.spec()


def message(answer, mode=probe.CHECK, topic="self_attention", grade_id="self_attention_softmax"):
    records = probe.collect(probe.roundtrip_cases(SPEC), answer)
    return {"topic": topic, "grade_id": grade_id, "mode": mode,
            "records": base64.b64encode(probe.dumps(records)).decode()}


# --------------------------------------------------------------------------- plain data

def test_plain_values_cross_unchanged():
    value = {"t": torch.arange(6.0).reshape(2, 3), "a": np.arange(4, dtype=np.int16),
             "s": np.float32(1.5), "n": [1, 2.5, True, None, "x"], "p": (1, (2,))}
    back = probe.roundtrip(value)
    assert torch.equal(back["t"], value["t"])
    assert back["a"].dtype == np.int16 and np.array_equal(back["a"], value["a"])
    assert back["s"] == np.float32(1.5) and isinstance(back["s"], np.float32)
    assert back["n"] == [1, 2.5, True, None, "x"] and back["p"] == (1, (2,))


def test_objects_of_the_students_own_classes_arrive_as_opaque_and_equal_nothing():
    class Everything:
        def __eq__(self, other):
            return True

    class Sneaky(float):  # a float subclass whose comparisons lie
        def __eq__(self, other):
            return True

    back = probe.roundtrip([Everything(), Sneaky(3.0), np.array(["a"], dtype=object)])
    assert all(isinstance(v, probe.Opaque) for v in back)
    assert back[0] != back[0] and not (back[1] == 3.0)


def test_a_tensor_subclass_arrives_as_a_plain_tensor():
    class Liar(torch.Tensor):
        def __eq__(self, other):
            return torch.ones((), dtype=torch.bool)

    value = torch.zeros(3).as_subclass(Liar)
    back = probe.roundtrip(value)
    assert type(back) is torch.Tensor and torch.equal(back, torch.zeros(3))


def test_results_never_rebuild_course_objects():
    """A portable object is rebuilt for the sandbox's cases only; in results it stays Opaque, so
    a student cannot make the grader construct anything."""
    from course_utils.models import seq2seq
    step = probe.portable(seq2seq.ToyStep, vocab=5, seed=3)
    sent = probe.roundtrip_cases({"cases": [((step,), {})]})
    rebuilt = sent["cases"][0][0][0]
    assert isinstance(rebuilt, seq2seq.ToyStep) and torch.equal(rebuilt.A, step.A)
    assert isinstance(probe.roundtrip(step), probe.Opaque)
    forged = {"\x00portable": "course_utils.reference.causal_cnn:receptive_field", "kwargs": {}}
    assert isinstance(probe.decode(forged, portable=True), probe.Opaque)


def test_data_that_is_not_a_plain_checkpoint_does_not_load():
    import pickle

    class Boom:
        def __reduce__(self):
            return (print, ("pwned",))

    with pytest.raises(Exception):
        probe.loads(pickle.dumps(Boom()))


# --------------------------------------------------------------------------- judging a cell

def test_a_correct_record_passes_and_a_wrong_one_names_the_mistake():
    assert judge.verdict(SOURCE, [message(right_softmax)], False, _Cases()) is None
    sentence = judge.verdict(SOURCE, [message(columns_softmax)], False, _Cases())
    assert sentence and "axis" in sentence


@pytest.mark.parametrize("messages", [
    [],  # the check never ran (a swallowed or replaced test cell)
    [message(right_softmax, mode=probe.DIAGNOSE)],  # only the first hidden line ran
    [message(right_softmax, topic="causal_cnn")],  # results of another notebook
    [message(right_softmax, grade_id="self_attention_attention_numpy")],  # of another exercise
    [{"topic": "self_attention", "grade_id": "self_attention_softmax", "mode": "check", "records": "%%%"}],
    [{"topic": "self_attention", "grade_id": "self_attention_softmax", "mode": "check",
      "records": base64.b64encode(b"not a checkpoint").decode()}],
])
def test_a_cell_without_a_complete_readable_check_record_fails(messages):
    assert judge.verdict(SOURCE, messages, False, _Cases())


def test_forged_records_are_judged_like_any_other():
    """Results made up in the kernel still have to be the right numbers for every case."""
    records = {"grade_id": "self_attention_softmax",
               "outputs": [{"result": np.zeros(1)}] * len(SPEC["cases"]), "gradients": []}
    forged = {"topic": "self_attention", "grade_id": "self_attention_softmax", "mode": "check",
              "records": base64.b64encode(probe.dumps(records)).decode()}
    assert judge.verdict(SOURCE, [forged], False, _Cases())
    short = dict(records, outputs=records["outputs"][:1])
    forged["records"] = base64.b64encode(probe.dumps(short)).decode()
    assert "complete" in judge.verdict(SOURCE, [forged], False, _Cases())


def test_a_record_the_cell_did_not_ask_for_fails_the_cell_in_either_order():
    """Found blind: a post_run_cell hook published right results after the real, wrong ones, and
    'the last one counts' gave the points. One check call, one record: any more is not the cell's."""
    for messages in ([message(columns_softmax), message(right_softmax)],
                     [message(right_softmax), message(columns_softmax)],
                     [message(right_softmax), message(right_softmax)]):
        sentence = judge.verdict(SOURCE, messages, False, _Cases())
        assert sentence and "sent results of its own" in sentence, messages


def test_a_cell_that_checks_twice_has_both_records_judged():
    twice = SOURCE + '\ncatalogue.check("self_attention_softmax", softmax)\n'
    assert judge.verdict(twice, [message(right_softmax), message(right_softmax)], False, _Cases()) is None
    sentence = judge.verdict(twice, [message(right_softmax), message(columns_softmax)], False, _Cases())
    assert sentence and "axis" in sentence


def test_a_cell_that_failed_in_the_kernel_gets_the_mistake_named_from_its_diagnosis():
    sentence = judge.verdict(SOURCE, [message(columns_softmax, mode=probe.DIAGNOSE)], True, _Cases())
    assert sentence and "axis" in sentence
    assert judge.verdict(SOURCE, [message(right_softmax, mode=probe.DIAGNOSE)], True, _Cases()) is None


def test_cells_without_a_catalogue_check_are_left_to_the_kernel():
    assert judge.expected("grading.assert_close(double([1]), [2])") is None
    assert judge.verdict("assert True", [], False, _Cases()) is None


def test_in_process_check_is_the_same_round_trip():
    exercise = causal_cnn.EXERCISES["causal_cnn_receptive_field"]
    exercise.check(exercise.reference)
    with pytest.raises(GradingError):
        exercise.check(lambda *a, **k: 0)


def test_a_value_of_the_students_own_class_is_named_by_its_class():
    """An int subclass whose == is always True reaches the grader as an Opaque record: the message
    names the student's class, not the grader's wrapper."""
    from course_utils.reference.mistakes import wrong_kind

    assert wrong_kind(probe.Opaque("AlwaysEqual"), 3, "your count") == (
        "your count should be an int, but it is AlwaysEqual.")


# --------------------------------------------------------------------------- limits (issue 30)
# The grader decodes what a student's kernel sent. A record of a kB must not be able to cost the
# grader gigabytes or minutes: each is refused fast, with small memory, and the cell fails with
# a sentence. Bounds are generous (this is about gigabytes and minutes, not milliseconds).

def _saved(value):
    import io
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _with_pickle(pickled):
    """A torch.save zip whose data.pkl is `pickled` (for what torch.save itself cannot write)."""
    import io
    import zipfile
    source = zipfile.ZipFile(io.BytesIO(_saved(0)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for info in source.infolist():
            z.writestr(info.filename, pickled if info.filename.endswith("data.pkl") else source.read(info))
    return out.getvalue()


def _refused_cheaply(data):
    import time
    import tracemalloc
    started = time.monotonic()
    tracemalloc.start()
    try:
        with pytest.raises(probe.LimitError) as info:
            probe.loads(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 5
    assert peak < 100 * 2**20, f"peak {peak / 2**20:.0f} MB"
    return str(info.value)


def test_a_shared_reference_bomb_is_refused_before_it_is_expanded():
    bomb = [1.0]
    for _ in range(22):  # 2**22 paths through a record of about 1.4 kB
        bomb = [bomb, bomb]
    data = _saved({"grade_id": "x", "outputs": [{"result": bomb}], "gradients": []})
    assert len(data) < 4000
    assert "values" in _refused_cheaply(data)


def test_deep_nesting_is_refused():
    n = 20_000  # [[[...]]] 20,000 deep (past Python's recursion limit): only pickle may build it
    data = _with_pickle(b"\x80\x02" + b"]" * n + b"a" * (n - 1) + b".")
    assert "nested" in _refused_cheaply(data)
    shallow = [1]
    for _ in range(19):
        shallow = [shallow]
    assert probe.roundtrip(shallow) == shallow  # what encode sends (it stops at depth 20) reads back


def test_a_stride_0_tensor_is_refused_by_its_declared_size_not_converted():
    huge = torch.zeros(1).expand(150_000_000)  # 4 stored bytes, 600 MB once converted
    data = _saved({"grade_id": "x", "outputs": [{"result": huge}], "gradients": []})
    assert len(data) < 4000
    assert "MB of data" in _refused_cheaply(data)
    array = {"\x00ndarray": "<f8", "shape": [10**6, 10**6], "data": b"\x00" * 8}
    assert "MB of data" in _refused_cheaply(_saved(array))
    with pytest.raises(probe.LimitError):  # decode alone checks too
        probe.decode({"r": [huge]})


def test_oversized_or_legacy_format_records_are_refused_before_reading():
    import io
    with pytest.raises(probe.LimitError):
        probe.loads(b"PK\x03\x04" + b"\x00" * (probe.MAX_RECORD_BYTES + 1))
    legacy = io.BytesIO()
    torch.save([1, 2], legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(probe.LimitError):
        probe.loads(legacy.getvalue())


def test_a_record_over_the_limits_fails_the_cell_with_a_sentence():
    bomb = [1.0]
    for _ in range(22):
        bomb = [bomb, bomb]
    msg = {"topic": "self_attention", "grade_id": "self_attention_softmax", "mode": probe.CHECK,
           "records": base64.b64encode(_saved({"grade_id": "x", "outputs": [{"result": bomb}]})).decode()}
    sentence = judge.verdict(SOURCE, [msg], False, _Cases())
    assert sentence and "`softmax`" in sentence and "too" in sentence, sentence
    assert judge.verdict(SOURCE, [message(right_softmax)], False, _Cases()) is None


def test_weights_load_into_a_module_that_reaches_a_layer_by_two_names():
    """A right answer that keeps its norms in an nn.ModuleList and under their own names too
    (self.norm1, self.norm2 = self.norms) was told 'needs a parameter norm1.weight ... yours is
    missing': named_parameters() lists a shared parameter once, under its first name."""
    import torch
    from torch import nn

    from course_utils.grading import GradingError, probe

    class Aliased(nn.Module):
        def __init__(self):
            super().__init__()
            self.norms = nn.ModuleList([nn.LayerNorm(3), nn.LayerNorm(3)])
            self.norm1, self.norm2 = self.norms

    weights = {"norm1.weight": torch.full((3,), 2.0), "norm2.bias": torch.full((3,), -1.0)}
    module = Aliased()
    probe._load_weights(module, weights, {"function_name": "Aliased"}, "a case")
    assert torch.equal(module.norms[0].weight, weights["norm1.weight"])
    assert torch.equal(module.norms[1].bias, weights["norm2.bias"])
    with pytest.raises(GradingError, match="norm3.weight"):
        probe._load_weights(module, {"norm3.weight": torch.ones(3)}, {"function_name": "Aliased"}, "a case")
