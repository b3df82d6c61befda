"""Partial credit in the grader (issue 29 item 5): the judge, in the grader's process, turns the
parts an answer passed into the cell's score, the way nbgrader reads partial credit (a number as
the cell's first output), and grades_by_cell.csv shows the parts.

Unit tests of judge.verdict / judge.apply on notebook 04's beam search, then one real grading of
04 (`python -m autograder grade`): a beam search right but for its ranking gets 2 of 3 points, the
feedback says which part failed, and a student who writes the judge's record or a number himself
gets nothing for it.
"""
import base64

import pytest
from nbformat import NotebookNode
from nbgrader.utils import determine_grade

import grading_helpers as H
from autograder import export, judge
from course_utils.grading import probe
from course_utils.reference.mistakes import bahdanau_attention as catalogue

A, NB = "04_bahdanau_attention", "bahdanau_attention.ipynb"
BEAM = catalogue.EXERCISES["bahdanau_attention_beam_search"]
SOURCE = ('from course_utils.grading import hidden\ncatalogue = hidden.catalogue("bahdanau_attention")\n'
          'catalogue.diagnose("bahdanau_attention_beam_search", beam_search)\n'
          'catalogue.check("bahdanau_attention_beam_search", beam_search)\n')
MISTAKES = {m.name: m for m in BEAM.mistakes}
RANKING = next(p for p in BEAM.parts if p.name == "ranking")


def right_beam_search(*args):
    """A correct beam search that is not the reference (which the guard counts as a shortcut)."""
    from tests.exercises.alternatives_bahdanau_attention import ALTERNATIVES
    return ALTERNATIVES["bahdanau_attention_beam_search"][0](*args)


class _Cases:
    def spec(self, grade_id):
        return {"bahdanau_attention_beam_search": BEAM.spec()}.get(grade_id)


def message(answer, mode=probe.CHECK):
    records = probe.collect(probe.roundtrip_cases(BEAM.spec()), answer)
    return {"topic": "bahdanau_attention", "grade_id": "bahdanau_attention_beam_search", "mode": mode,
            "records": base64.b64encode(probe.dumps(records)).decode()}


def _test_cell(outputs=(), points=3):
    return NotebookNode(cell_type="code", source=SOURCE, execution_count=7, outputs=list(outputs),
                        metadata=NotebookNode(nbgrader=NotebookNode(grade=True, solution=False, points=points,
                                                                    grade_id="bahdanau_attention_beam_search_tests")))


def test_a_right_answer_passes_and_a_wrong_one_gets_the_parts_it_passed():
    assert judge.verdict(SOURCE, [message(right_beam_search)], False, _Cases()) is None
    sentence = judge.verdict(SOURCE, [message(MISTAKES["unnormalised_ranking"].compute)], False, _Cases())
    assert isinstance(sentence, judge.Partial) and sentence.fraction == pytest.approx(2 / 3)
    assert MISTAKES["unnormalised_ranking"].message in sentence
    assert {p.name for p in sentence.parts if not p.passed} == {"ranking"}


def test_a_cell_that_failed_in_the_kernel_gets_its_parts_from_the_diagnosis():
    """The visible ranking check fails in the kernel before the hidden check: the parts come from
    the diagnose record, for a catalogued mistake and for an uncatalogued wrong answer alike."""
    named = judge.verdict(SOURCE, [message(MISTAKES["unnormalised_ranking"].compute, probe.DIAGNOSE)], True, _Cases())
    assert isinstance(named, judge.Partial) and named.fraction == pytest.approx(2 / 3)

    from tests.exercises.uncatalogued_bahdanau_attention import beam_ascending  # worst first
    unnamed = judge.verdict(SOURCE, [message(beam_ascending, probe.DIAGNOSE)], True, _Cases())
    assert isinstance(unnamed, judge.Partial) and {p.name for p in unnamed.parts if p.passed} == {"search", "finished"}
    # right on every hidden case but failed in the kernel: the kernel's failure stands, as before
    assert judge.verdict(SOURCE, [message(right_beam_search, probe.DIAGNOSE)], True, _Cases()) is None


def test_nothing_right_or_a_crash_is_all_or_nothing():
    def nothing(*args):
        return []
    sentence = judge.verdict(SOURCE, [message(nothing)], False, _Cases())
    assert sentence and not isinstance(sentence, judge.Partial)

    def crashes(*args):
        raise ValueError("boom")
    assert not isinstance(judge.verdict(SOURCE, [message(crashes)], False, _Cases()), judge.Partial)


def test_a_second_record_that_fails_outright_wins_over_partial_credit():
    twice = SOURCE + 'catalogue.check("bahdanau_attention_beam_search", beam_search)\n'
    sentence = judge.verdict(twice, [message(MISTAKES["unnormalised_ranking"].compute), message(lambda *a: [])],
                             False, _Cases())
    assert sentence and not isinstance(sentence, judge.Partial)


def test_apply_writes_the_score_nbgrader_reads_and_nothing_a_student_wrote_counts():
    sentence = judge.verdict(SOURCE, [message(MISTAKES["unnormalised_ranking"].compute, probe.DIAGNOSE)], True, _Cases())
    visible_failure = NotebookNode(output_type="error", ename="GradingError", evalue="Sort the hypotheses ...",
                                   traceback=[])
    cell = _test_cell([visible_failure, NotebookNode(output_type="display_data", data={"text/plain": "3"}, metadata={})])
    cell.metadata[judge.PARTS_KEY] = {"score": 3, "parts": []}  # written by the student: removed
    judge.apply(cell, sentence)
    assert determine_grade(cell) == (2.0, 3.0)
    assert cell.outputs[0].output_type == "execute_result" and cell.outputs[0].data["text/plain"] == "2"
    assert "Partial credit: 2 of 3 points." in cell.outputs[1].text and "not passed" in cell.outputs[1].text
    assert not any(o.output_type == "error" for o in cell.outputs)  # the visible failure is shown as text
    assert any("Sort the hypotheses" in o.get("text", "") for o in cell.outputs)
    record = cell.metadata[judge.PARTS_KEY]
    assert record["score"] == 2 and [(p["name"], p["points"]) for p in record["parts"]] == [
        ("search", 1.0), ("finished", 1.0), ("ranking", 0.0)]

    # a cell that passed, or failed outright, keeps no record of the student's
    for verdict in (None, "wrong"):
        cell = _test_cell()
        cell.metadata[judge.PARTS_KEY] = {"score": 3}
        judge.apply(cell, verdict)
        assert judge.PARTS_KEY not in cell.metadata
        assert determine_grade(cell) == ((3.0, 3.0) if verdict is None else (0, 3.0))


def test_tampering_still_scores_zero():
    sentence = judge.verdict(SOURCE, [message(MISTAKES["unnormalised_ranking"].compute)], False, _Cases())
    cell = _test_cell([NotebookNode(output_type="error", ename="TamperError", evalue="reassigned", traceback=[])])
    judge.apply(cell, sentence)
    assert determine_grade(cell) == (0, 3.0) and judge.PARTS_KEY not in cell.metadata


def test_part_rows_split_the_cell_score():
    row = ["s", A, "bahdanau_attention", "bahdanau_attention_beam_search_tests", "3", "3", "graded"]
    assert [r[3:5] for r in export._part_rows(None, BEAM.parts, row)] == [
        ["bahdanau_attention_beam_search_tests:search", "1"], ["bahdanau_attention_beam_search_tests:finished", "1"],
        ["bahdanau_attention_beam_search_tests:ranking", "1"]]
    row[4] = "0"
    assert [r[4] for r in export._part_rows(None, BEAM.parts, row)] == ["0", "0", "0"]
    row[4] = "2"  # partial, and no judge's record to split it by: left empty, never guessed
    assert [r[4] for r in export._part_rows(None, BEAM.parts, row)] == ["", "", ""]


# --- one real grading of notebook 04 ---------------------------------------------------------

RANKS_BY_TOTAL = '''
def beam_search(step, state, bos, eos, max_len, beam_width):
    """Right, except that the finished hypotheses are ranked by their total log-probability."""
    live, states, finished = [([], 0.0)], state, []
    for _ in range(max_len):
        room = beam_width - len(finished)
        if not live or room <= 0:
            break
        prev = torch.tensor([tokens[-1] if tokens else bos for tokens, _ in live])
        log_probs, new_states = step(prev, states)
        totals = torch.tensor([score for _, score in live], dtype=log_probs.dtype)[:, None] + log_probs
        best = torch.topk(totals.flatten(), min(room, totals.numel()))
        rows, next_live = [], []
        for score, index in zip(best.values.tolist(), best.indices.tolist()):
            row, token = divmod(index, totals.shape[1])
            hypothesis = (live[row][0] + [token], score)
            if token == eos:
                finished.append(hypothesis)
            else:
                next_live.append(hypothesis)
                rows.append(row)
        live = next_live
        states = new_states[torch.tensor(rows, dtype=torch.long)] if rows else None
    finished.extend(live)
    return sorted(finished, key=lambda h: h[1], reverse=True)
'''


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")
    root = tmp_path_factory.mktemp("partial_credit")
    course = H.make_course(root / "course", source=H.REPO / "solutions", assignments=[A])
    nb = H.honest(course, A, NB)
    H.cell(nb, "bahdanau_attention_beam_search").source = RANKS_BY_TOTAL
    # the judge's record written into the submission by hand, claiming every part: never read
    H.cell(nb, "bahdanau_attention_beam_search_tests").metadata[judge.PARTS_KEY] = {
        "score": 3, "max_score": 3, "parts": [{"name": p.name, "points": 1.0} for p in BEAM.parts]}
    H.write_student(root / "subs", "ranks_by_total", A, NB, nb)
    proc = H.grade(root / "subs", root / "out", course, "--jobs", "1", "--timeout", "120", "--wall", "600")
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    return root / "out"


@pytest.mark.slow
def test_a_beam_search_wrong_in_one_part_gets_the_other_parts_points(graded):
    total = sum(m for m in (2, 3, 1, 2, 2, 3))  # 04's six exercises
    row = H.grades(graded)[("ranks_by_total", A)]
    assert (row["score"], row["max_score"], row["status"]) == (str(total - 1), str(total), "graded")
    cells = {r["grade_id"]: r for r in H.read_csv(graded / "grades_by_cell.csv") if r["student_id"] == "ranks_by_total"}
    beam = "bahdanau_attention_beam_search_tests"
    assert (cells[beam]["score"], cells[beam]["max_score"]) == ("2", "3")
    assert {gid.split(":")[1]: (r["score"], r["max_score"]) for gid, r in cells.items() if gid.startswith(beam + ":")} == {
        "search": ("1", "1"), "finished": ("1", "1"), "ranking": ("0", "1")}
    # the other cells have no part rows, and full marks
    assert all(r["score"] == r["max_score"] for gid, r in cells.items() if not gid.startswith(beam))
    assert list(H.read_csv(graded / "grades_by_cell.csv")[0]) == [
        "student_id", "assignment", "notebook", "grade_id", "score", "max_score", "status"]


@pytest.mark.slow
def test_the_feedback_says_which_part_failed(graded):
    page = (graded / "feedback" / "ranks_by_total" / A / "bahdanau_attention.html").read_text()
    assert "Partial credit: 2 of 3 points." in page
    assert RANKING.title in page
    assert MISTAKES["unnormalised_ranking"].message[:60] in page
    assert "not passed" in page


@pytest.mark.slow
def test_the_graded_notebook_holds_the_judges_score_not_the_students(graded):
    nb = H.graded_notebook(graded, A, "ranks_by_total", NB)
    cell = H.cell(nb, "bahdanau_attention_beam_search_tests")
    assert cell.outputs[0].output_type == "execute_result" and cell.outputs[0].data["text/plain"] == "2"
    assert cell.metadata[judge.PARTS_KEY]["score"] == 2
    assert not any(o.output_type == "error" for o in cell.outputs)


# A partly credited cell has no error output: the feedback summary and the class report take its
# sentence from the judge's record (worker.py reads PARTS_KEY["message"]).
@pytest.mark.slow
def test_the_feedback_summary_gives_the_partial_credit_sentence(graded):
    import html
    import re
    page = (graded / "feedback" / "ranks_by_total" / A / "bahdanau_attention.html").read_text()
    summary = page.split('id="summary"', 1)[1].split("</table>", 1)[0]
    row = summary.split("bahdanau_attention_beam_search_tests", 1)[1].split("</tr>", 1)[0]
    text = html.unescape(re.sub(r"<[^>]+>", " ", row))
    assert "2 / 3" in text, text
    assert " ".join(MISTAKES["unnormalised_ranking"].message.split()) in " ".join(text.split()), text


@pytest.mark.slow
def test_the_class_report_names_the_mistake_of_a_partially_credited_cell(graded):
    rows = [r for r in H.read_csv(graded / "mistakes.csv") if r["exercise"] == "bahdanau_attention_beam_search"]
    assert [r["mistake"] for r in rows] == ["unnormalised_ranking"]
