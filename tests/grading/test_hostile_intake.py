"""Hostile uploads at intake (issue 17, items 8d and 9): fast, no kernels.

One bad zip entry is one problem line, the rest is staged; duplicate and late LMS copies are
chosen by the documented rule and always reported.
"""
import zipfile

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

import grading_helpers  # noqa: F401  (puts the repository on sys.path)
from autograder import intake

ASSIGNMENTS = {"05_self_attention": ["self_attention.ipynb"], "07_multi_head": ["multi_head.ipynb"]}


def nb_text(code="x = 1"):
    return nbformat.writes(new_notebook(cells=[new_code_cell(code)]))


def reasons(result, student=None):
    return [p.problem for p in result.problems if student is None or p.student_id == student]


def staged(result):
    return {(s.student_id, s.assignment): open(next(iter(s.files.values()))).read()
            for s in result.submissions}


def _corrupt_crc(path, marker):
    """Flip one byte of a stored (uncompressed) entry's data: its CRC no longer matches."""
    data = bytearray(path.read_bytes())
    at = data.index(marker)
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def test_bad_entries_are_problems_and_the_rest_is_graded(tmp_path):
    z = tmp_path / "export.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("good/05_self_attention/self_attention.ipynb", nb_text("good = 1"))
        zf.writestr("crc/05_self_attention/self_attention.ipynb", nb_text("CORRUPTME = 1"))
        zf.writestr("clash/05_self_attention", "a file where a folder should be")
        zf.writestr("clash/05_self_attention/self_attention.ipynb", nb_text())
        zf.writestr("long/05_self_attention/" + "é" * 240 + ".ipynb", nb_text())
    _corrupt_crc(z, b"CORRUPTME")
    r = intake.collect(str(z), str(tmp_path / "stage"), ASSIGNMENTS)  # no exception
    assert ("good", "05_self_attention") in staged(r)
    every = reasons(r)
    assert any("'crc/05_self_attention/self_attention.ipynb' could not be extracted" in p
               and "CRC" in p for p in every), every
    assert any("clash/05_self_attention/self_attention.ipynb' could not be extracted" in p
               for p in every), every
    assert any("could not be extracted (File name too long)" in p for p in every), every
    assert ("crc", "05_self_attention") not in staged(r)


def test_duplicate_and_late_lms_copies_follow_the_rule_and_are_reported(tmp_path):
    z = tmp_path / "export.zip"
    with zipfile.ZipFile(z, "w") as zf:
        def put(name, code, when):
            zf.writestr(zipfile.ZipInfo(name, date_time=when), nb_text(code))
        # alice: an on-time copy, then a later *late* blank copy: the on-time one is graded
        put("alice_111_self_attention.ipynb", "ontime = 1", (2026, 3, 1, 10, 0, 0))
        put("alice_late_111_self_attention.ipynb", "", (2026, 3, 2, 10, 0, 0))
        # bob: Canvas's renamed re-uploads; the newest is graded
        put("bob_222_self_attention.ipynb", "first = 1", (2026, 3, 1, 9, 0, 0))
        put("bob_222_self_attention-1.ipynb", "second = 1", (2026, 3, 1, 10, 0, 0))
        put("bob_222_self_attention (2).ipynb", "third = 1", (2026, 3, 1, 11, 0, 0))
        # carol: only a renamed copy; it is graded, not skipped
        put("carol_333_multi_head (1).ipynb", "carol = 1", (2026, 3, 1, 9, 0, 0))
    r = intake.collect(str(z), str(tmp_path / "stage"), ASSIGNMENTS)
    got = staged(r)
    assert "ontime = 1" in got[("alice", "05_self_attention")]
    assert "third = 1" in got[("bob", "05_self_attention")]
    assert "carol = 1" in got[("carol", "07_multi_head")]
    alice = reasons(r, "alice")
    assert any("2 copies of 'self_attention.ipynb'" in p and "graded 'alice_111_self_attention.ipynb'"
               in p and "(late)" in p for p in alice), alice
    bob = reasons(r, "bob")
    assert any("3 copies" in p and "graded 'bob_222_self_attention (2).ipynb'" in p for p in bob), bob
    assert reasons(r, "carol") == []
