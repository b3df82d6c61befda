"""cellmeta.restore on notebook JSON: every cell whose grade_id the release knows gets exactly the
release's nbgrader metadata (and cell type) back, whatever the submission set, and the instructor
reads one sentence per notebook (issue 30 item 4).

Before, only answer cells were restored: a test cell re-flagged `solution: true` reached nbgrader
as it was, OverwriteCells found its checksum changed and stopped with "Inconsistent checksums",
and the student was could_not_grade.
"""
import copy

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbgrader.utils import compute_checksum

import grading_helpers as H
from autograder import cellmeta


def _meta(grade_id, cell_type="code", **flags):
    meta = {"grade": False, "grade_id": grade_id, "locked": False, "schema_version": 3,
            "solution": False, "task": False, "cell_type": cell_type}
    meta.update(flags)
    return meta


def _release():
    """A small release like nbgrader's: intro, setup, two exercises with tests, a task cell."""
    cells = [
        new_markdown_cell("# Title", metadata={"nbgrader": _meta("intro", "markdown", locked=True)}),
        new_code_cell("import numpy as np", metadata={"nbgrader": _meta("setup", locked=True)}),
        new_code_cell("def double(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()",
                      metadata={"nbgrader": _meta("ex_double", solution=True)}),
        new_code_cell("assert double(2) == 4", metadata={"nbgrader": _meta(
            "ex_double_tests", grade=True, locked=True, points=2)}),
        new_code_cell("def triple(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()",
                      metadata={"nbgrader": _meta("ex_triple", solution=True)}),
        new_code_cell("assert triple(2) == 6", metadata={"nbgrader": _meta(
            "ex_triple_tests", grade=True, locked=True, points=3)}),
        new_markdown_cell("Explain why.", metadata={"nbgrader": _meta(
            "ex_explain", "markdown", grade=False, locked=True, task=True, points=1)}),
    ]
    nb = new_notebook(cells=cells)
    for c in nb.cells:
        c.metadata.nbgrader["checksum"] = compute_checksum(c)
    nbformat.validate(nb)
    return nb


def _student(release):
    nb = copy.deepcopy(release)
    nb.cells[2].source = "def double(x):\n    return 2 * x"
    nb.cells[4].source = "def triple(x):\n    return 3 * x"
    return nb


def _cell(nb, grade_id):
    return H.cell(nb, grade_id)


def _assert_released(nb, release):
    """Every cell carries the release's nbgrader metadata and type; locked checksums agree."""
    for rc in release.cells:
        c = _cell(nb, rc.metadata.nbgrader["grade_id"])
        assert c.metadata.nbgrader == rc.metadata.nbgrader, c.metadata.nbgrader
        assert c.cell_type == rc.cell_type
        if rc.metadata.nbgrader["locked"] and c.source == rc.source:
            # what nbgrader's OverwriteCells checks; a mismatch was "Inconsistent checksums"
            assert compute_checksum(c) == rc.metadata.nbgrader["checksum"]
    nbformat.validate(nb)


def test_a_test_cell_reflagged_as_an_answer_gets_the_releases_metadata_back():
    release = _release()
    nb = _student(release)
    _cell(nb, "ex_double_tests").metadata.nbgrader["solution"] = True
    said = cellmeta.restore(nb, release)
    _assert_released(nb, release)
    assert len(said) == 1, said
    assert "'ex_double_tests' had its nbgrader settings changed (solution)" in said[0], said
    assert "the release's were put back" in said[0]
    assert _cell(nb, "ex_double").source == "def double(x):\n    return 2 * x"  # the answer kept


def test_every_kind_of_cell_and_every_flag_is_restored_in_one_sentence():
    release = _release()
    nb = _student(release)
    _cell(nb, "ex_double_tests").metadata.nbgrader.update(solution=True, locked=False)
    _cell(nb, "ex_triple_tests").metadata.nbgrader.update(points=30, checksum="0" * 32)
    _cell(nb, "setup").metadata.nbgrader.update(locked=False, grade=True, points=5)
    _cell(nb, "intro").metadata.nbgrader.update(solution=True, cell_type="code")
    _cell(nb, "ex_explain").metadata.nbgrader.update(task=False, grade=True)
    _cell(nb, "ex_triple").metadata.nbgrader.update(locked=True)
    said = cellmeta.restore(nb, release)
    _assert_released(nb, release)
    assert len(said) == 1, said
    sentence = said[0]
    assert sentence.startswith("the nbgrader settings of 6 cells had been changed ("), sentence
    assert sentence.endswith("the release's were put back and they were graded as released"), sentence
    for part in ("'ex_double_tests': solution, locked", "'ex_triple_tests': points",
                 "'setup': grade, locked, points", "'intro': solution, cell_type",
                 "'ex_triple': locked"):
        assert part in sentence, (part, sentence)
    # six cells: the first five in notebook order are named, the last (ex_explain) elided
    assert "'ex_explain'" not in sentence and sentence.count("…") == 1, sentence


def test_a_changed_checksum_alone_is_put_back_without_a_problem_line():
    release = _release()
    nb = _student(release)
    _cell(nb, "ex_double_tests").metadata.nbgrader["checksum"] = "f" * 32
    _cell(nb, "ex_double_tests").metadata.nbgrader["schema_version"] = 2
    assert cellmeta.restore(nb, release) == []
    _assert_released(nb, release)


def test_a_test_cell_turned_markdown_is_code_again_with_the_releases_metadata():
    release = _release()
    nb = _student(release)
    tests = _cell(nb, "ex_triple_tests")
    md = new_markdown_cell(tests.source, metadata=copy.deepcopy(tests.metadata))
    md.metadata.nbgrader.update(cell_type="markdown", solution=True, grade=False)
    nb.cells[nb.cells.index(tests)] = md
    said = cellmeta.restore(nb, release)
    _assert_released(nb, release)
    back = _cell(nb, "ex_triple_tests")
    assert back.cell_type == "code" and back.outputs == [] and back.execution_count is None
    assert compute_checksum(back) == _cell(release, "ex_triple_tests").metadata.nbgrader["checksum"]
    assert len(said) == 1 and "turned into a markdown cell" in said[0], said


def test_an_answer_cell_turned_markdown_is_code_again_with_the_students_code():
    release = _release()
    nb = _student(release)
    answer = _cell(nb, "ex_double")
    nb.cells[nb.cells.index(answer)] = new_markdown_cell(answer.source, metadata=copy.deepcopy(
        answer.metadata), attachments={"a.png": {"image/png": "iVBORw0KGgo="}})
    said = cellmeta.restore(nb, release)
    _assert_released(nb, release)
    back = _cell(nb, "ex_double")
    assert back.cell_type == "code" and back.source == "def double(x):\n    return 2 * x"
    assert "attachments" not in back
    assert len(said) == 1 and "'ex_double' had its nbgrader settings changed (turned into a markdown cell)" \
        in said[0], said


def test_the_real_release_every_test_cell_reflagged():
    """05_self_attention's release: its six test cells marked as answers, one sentence back."""
    release = nbformat.read(H.REPO / "notebooks" / "05_self_attention" / "self_attention.ipynb", 4)
    nb = copy.deepcopy(release)
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    for c in tests:
        c.metadata.nbgrader["solution"] = True
    said = cellmeta.restore(nb, release)
    assert len(said) == 1, said
    assert said[0].startswith(f"the nbgrader settings of {len(tests)} cells had been changed "
                              "('self_attention_softmax_tests': solution; "), said[0]
    for rc, c in zip(release.cells, nb.cells):
        assert c.metadata.get("nbgrader") == rc.metadata.get("nbgrader")
        if c.metadata.get("nbgrader", {}).get("locked"):
            assert compute_checksum(c) == rc.metadata.nbgrader["checksum"]
