"""The grading worker is the trusted side: one student must not be able to exhaust it (issue 30).

Bounded, each with a visible note or a one-sentence verdict: what the worker keeps of a whole
notebook's output (execute.NOTEBOOK_OUTPUT_BYTES, on top of the per-cell cap), the probe
messages it keeps (only what the cell's check calls need, dropped once the cell is judged), the
records it decodes (tests/checks/test_probe.py), and the worker's own memory (an address-space
limit: a worker over it grades that student as could_not_grade and the others are graded).
"""
import json

import nbformat
import pytest

import grading_helpers as H
from autograder import execute, worker
from course_utils.grading import probe

A, NB = "00_fixture", "fixture.ipynb"
CHECK_SOURCE = ('from course_utils.grading import hidden\ncatalogue = hidden.catalogue("self_attention")\n'
                'catalogue.check("self_attention_softmax", softmax)\n')


def _executor(sources):
    ex = execute.SandboxedExecute()
    ex.nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    ex.reset_execution_trackers()
    ex.reset_budgets()
    ex.clear_before_next_output = False
    return ex


def _msg(msg_type, content):
    return {"msg_type": msg_type, "content": content, "parent_header": {"msg_id": "m"},
            "header": {"msg_type": msg_type}, "metadata": {}}


def _probe_msg(payload_bytes, topic="self_attention", grade_id="self_attention_softmax", mode=probe.CHECK):
    return _msg("display_data", {"data": {probe.MIME: {
        "topic": topic, "grade_id": grade_id, "mode": mode, "records": "A" * payload_bytes}},
        "metadata": {}})


def test_what_a_notebook_keeps_of_its_output_is_bounded_across_cells_with_a_note():
    """100 cells each printing 4 MB (each within the per-cell cap) keep at most the notebook's
    budget in all, and every cut cell says so."""
    ex = _executor(["print('x')"] * 100)
    chunk = "x" * 2**20
    for index, cell in enumerate(ex.nb.cells):
        for _ in range(4):
            ex.output(cell.outputs, _msg("stream", {"name": "stdout", "text": chunk}), None, index)
    kept = sum(len(o.get("text", "")) for c in ex.nb.cells for o in c.outputs)
    assert kept <= execute.NOTEBOOK_OUTPUT_BYTES + 100 * 200
    notes = [c for c in ex.nb.cells if "output in all" in c.outputs[-1].get("text", "")]
    assert len(notes) >= 90
    # An error is kept (the cell must fail) but cut to a bounded size.
    cell = ex.nb.cells[-1]
    ex.output(cell.outputs, _msg("error", {"ename": "E", "evalue": "v" * 10**7,
                                           "traceback": ["t" * 10**6] * 50}), None, 99)
    error = cell.outputs[-1]
    assert error.output_type == "error"
    assert len(error.evalue) + sum(map(len, error.traceback)) <= 40_000


def test_probe_messages_beyond_what_the_cells_checks_need_are_not_kept():
    """40 cells of probe-typed messages kept 32 MB each before, judged or not. Now: nothing for
    a cell that makes no check call; for a checking cell, its one record plus one payload-less
    stub (enough to fail it for sending too many); and nothing once the cell is judged."""
    ex = _executor(["print(1)"] * 39 + [CHECK_SOURCE])
    for index, cell in enumerate(ex.nb.cells):
        for _ in range(4):
            ex.output(cell.outputs, _probe_msg(8 * 10**6), None, index)
        assert cell.outputs == []
    assert list(ex._probes.kept) == [39]
    kept = ex._probes.kept[39]
    assert len(kept) == 2 and len(kept[0]["records"]) == 8 * 10**6 and kept[1]["records"] == ""
    assert sum(len(m["records"]) for ms in ex._probes.kept.values() for m in ms) <= execute.PROBE_BYTES
    # Other exercises' and other topics' records are not kept at all.
    ex.output([], _probe_msg(10**6, grade_id="other"), None, 39)
    ex.output([], _probe_msg(10**6, topic="other"), None, 39)
    assert len(ex._probes.kept[39]) == 2


def test_the_workers_memory_limit_is_set_from_the_kernels(monkeypatch):
    import resource
    task = {"student": "s", "limits": {"memory_bytes": 2**30}}
    before = resource.getrlimit(resource.RLIMIT_AS)
    try:
        limit = worker._limit_own_memory(task)
        assert limit >= 2**30 + worker.WORKER_HEADROOM_BYTES
        assert resource.getrlimit(resource.RLIMIT_AS) == (limit, before[1])
    finally:
        resource.setrlimit(resource.RLIMIT_AS, before)


@pytest.mark.slow
def test_a_flood_of_output_is_bounded_and_a_worker_over_its_memory_fails_that_student_alone(tmp_path):
    """Through the real pipeline: a student printing 4 MB in each of 100 cells is graded (full
    marks: the extra cells are not graded) with at most the notebook's budget kept and a note,
    and the worker's peak memory stays far from the 1.5 GB it reached before;
    a student whose worker goes over its memory limit (made tight for the test) is
    could_not_grade with one clear line; the honest student keeps full marks."""
    if H.sandbox_unavailable():
        pytest.fail("the grading sandbox cannot run here (make test-tools sets it up)")
    course = H.make_course(tmp_path / "course")
    flood = H.honest(course, A, NB)
    flood.cells += [nbformat.v4.new_code_cell("import sys\nsys.stdout.write('x' * 4 * 10**6)\n")
                    for _ in range(100)]
    H.write_student(tmp_path / "subs", "alice", A, NB, H.honest(course, A, NB))
    H.write_student(tmp_path / "subs", "flood", A, NB, flood)
    H.write_student(tmp_path / "subs", "aatight", A, NB, flood)
    # The tight limit is 32 MB over what the worker holds when aatight's task comes: a worker
    # that has already graded (the solution check, run here in a verdict folder of its own, not
    # the session's) then fails on memory, not on starting its first kernel's threads.
    r = H.grade(tmp_path / "subs", tmp_path / "out", course, "--jobs", "1",
                env_extra={"AUTOGRADER_TEST_WORKER_MEMORY_MB": "aatight:32", "AUTOGRADER_VERDICT_CACHE": ""})
    assert r.returncode == 0, r.stderr
    rows = H.grades(tmp_path / "out")
    for student in ("alice", "flood"):
        assert rows[(student, A)]["status"] == "graded"
        assert rows[(student, A)]["score"] == rows[(student, A)]["max_score"], student
    graded = H.graded_notebook(tmp_path / "out", A, "flood", NB)
    text = H.outputs_text(graded)
    assert len(text) < execute.NOTEBOOK_OUTPUT_BYTES + 2**20
    assert "output in all" in text
    result = json.loads((tmp_path / "out" / ".work" / "shards" / A / "flood" / "result.json").read_text())
    print("worker peak RSS (MB):", result["worker_peak_rss_mb"])
    assert result["worker_peak_rss_mb"] < 1000  # measured: 1,475 MB before, ~420 MB now
    assert rows[("aatight", A)]["status"] == "could_not_grade"
    said = H.problems(tmp_path / "out", "aatight")
    assert any("more memory than the grader allows itself" in p for p in said), said
