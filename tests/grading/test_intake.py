"""Intake on its own: folders, LMS zips, and everything wrong with them (fast, no kernels)."""
import datetime as dt
import json
import os
import stat
import struct
import zipfile

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

import grading_helpers  # noqa: F401  (puts the repository on sys.path)
from autograder import intake

ASSIGNMENTS = {"05_self_attention": ["self_attention.ipynb"], "07_multi_head": ["multi_head.ipynb"]}


def nb_text():
    return nbformat.writes(new_notebook(cells=[new_code_cell("x = 1")]))


def put(root, rel, text=None):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nb_text() if text is None else text)
    return path


def reasons(result, student=None):
    return [p.problem for p in result.problems if student is None or p.student_id == student]


def test_folder_layout(tmp_path):
    src = tmp_path / "subs"
    put(src, "alice/05_self_attention/self_attention.ipynb")
    put(src, "bob/05_self_attention/self_attention.ipynb")
    put(src, "bob/07_multi_head/multi_head.ipynb")
    put(src, "alice/05_self_attention/.ipynb_checkpoints/self_attention-checkpoint.ipynb")
    r = intake.collect(str(src), str(tmp_path / "stage"), ASSIGNMENTS)
    assert [(s.student_id, s.assignment) for s in r.submissions] == [
        ("alice", "05_self_attention"), ("bob", "05_self_attention"), ("bob", "07_multi_head")]
    assert r.problems == []
    staged = r.submissions[0].files["self_attention.ipynb"]
    assert staged.startswith(str(tmp_path / "stage")) and os.path.isfile(staged)


def test_everything_wrong_is_reported_and_the_rest_is_staged(tmp_path):
    src = tmp_path / "subs"
    put(src, "ok/05_self_attention/self_attention.ipynb")
    put(src, "badjson/05_self_attention/self_attention.ipynb", "{not json")
    put(src, "notnb/05_self_attention/self_attention.ipynb", json.dumps({"hello": 1}))
    put(src, "renamed/05_self_attention/Self Attention (2).ipynb")
    put(src, "extra/05_self_attention/self_attention.ipynb")
    put(src, "extra/05_self_attention/notes.txt", "hi")
    put(src, "two/05_self_attention/a.ipynb")
    put(src, "two/05_self_attention/b.ipynb")
    put(src, "huge/05_self_attention/self_attention.ipynb", "x" * (2 * 2**20))
    put(src, "wrongassign/5_selfattention/self_attention.ipynb")
    put(src, "bad id!/05_self_attention/self_attention.ipynb")
    (src / "stray.ipynb").write_text(nb_text())
    link = src / "linker" / "05_self_attention"
    link.mkdir(parents=True)
    (link / "self_attention.ipynb").symlink_to("/etc/passwd")
    r = intake.collect(str(src), str(tmp_path / "stage"), ASSIGNMENTS, max_file_bytes=2**20)
    staged = {s.student_id for s in r.submissions}
    assert staged == {"ok", "renamed", "extra"}
    assert "not valid notebook JSON" in reasons(r, "badjson")[0]
    assert "not a Jupyter notebook" in reasons(r, "notnb")[0]
    assert "should be named 'self_attention.ipynb'" in reasons(r, "renamed")[0]
    assert "extra file 'notes.txt'" in reasons(r, "extra")[0]
    assert any("'a.ipynb' is not part of the assignment" in p for p in reasons(r, "two"))
    assert any("missing" in p for p in reasons(r, "two"))
    assert "over the 1 MB limit" in reasons(r, "huge")[0]
    assert "'5_selfattention' is not an assignment" in reasons(r, "wrongassign")[0]
    assert any("'bad id!' is not a valid student id" in p for p in reasons(r))
    assert any("'stray.ipynb' at the top level" in p for p in reasons(r))
    assert "not a regular file" in reasons(r, "linker")[0]
    assert ("badjson", "05_self_attention") in r.attempted  # could not grade, not "not submitted"


def test_lms_zip_with_flat_names(tmp_path):
    z = tmp_path / "export.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("smithjane_12345_67890_self_attention.ipynb", nb_text())
        zf.writestr("doejohn_late_222_333_multi_head.ipynb", nb_text())
        zf.writestr("garbage.txt", "x")
        zf.writestr("nobody_1_unknown_notebook.ipynb", nb_text())
    r = intake.collect(str(z), str(tmp_path / "stage"), ASSIGNMENTS)
    assert [(s.student_id, s.assignment) for s in r.submissions] == [
        ("doejohn", "07_multi_head"), ("smithjane", "05_self_attention")]
    assert any("'garbage.txt' does not match the LMS file-name pattern" in p for p in reasons(r))
    assert any("no assignment has a notebook named 'unknown_notebook.ipynb'" in p for p in reasons(r))


def test_lms_pattern_is_configurable(tmp_path):
    z = tmp_path / "export.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("submissions/05_self_attention--s123--self_attention.ipynb", nb_text())
    pattern = r"^(?:.*/)?(?P<assignment_id>[^/]+?)--(?P<student_id>[^/]+?)--(?P<file_id>[^/]+\.ipynb)$"
    r = intake.collect(str(z), str(tmp_path / "stage"), ASSIGNMENTS, lms_pattern=pattern)
    assert [(s.student_id, s.assignment) for s in r.submissions] == [("s123", "05_self_attention")]


def test_zip_with_folder_layout_and_unsafe_entries(tmp_path):
    z = tmp_path / "class.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("class/alice/05_self_attention/self_attention.ipynb", nb_text())
        zf.writestr("../../evil.ipynb", nb_text())
        info = zipfile.ZipInfo("class/bob/05_self_attention/self_attention.ipynb")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    r = intake.collect(str(z), str(tmp_path / "stage"), ASSIGNMENTS)
    assert [s.student_id for s in r.submissions] == ["alice"]
    assert any("unsafe path" in p for p in reasons(r))
    assert any("not a regular file" in p for p in reasons(r))
    assert not (tmp_path / "evil.ipynb").exists()


def test_not_a_zip_or_folder(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("hello")
    with pytest.raises(ValueError):
        intake.collect(str(f), str(tmp_path / "stage"), ASSIGNMENTS)


# -- when each submission was made (for late penalties) -------------------------------------------

UTC = dt.timezone.utc


def test_exchange_files_give_the_time_and_are_not_strays(tmp_path):
    """`nbgrader collect` leaves timestamp.txt and submission_secret.txt beside the notebook."""
    src = tmp_path / "subs"
    put(src, "alice/05_self_attention/self_attention.ipynb")
    put(src, "alice/05_self_attention/timestamp.txt", "2026-11-21 09:30:00.250000 UTC")
    put(src, "alice/05_self_attention/submission_secret.txt", "c2VjcmV0")
    put(src, "bob/05_self_attention/self_attention.ipynb")
    put(src, "bob/05_self_attention/timestamp.txt", "next tuesday")
    put(src, "carol/05_self_attention/self_attention.ipynb")  # no time at all
    put(src, "dan/05_self_attention/self_attention.ipynb")
    put(src, "dan/05_self_attention/timestamp.txt", "2026-11-21T10:00:00+01:00")
    r = intake.collect(str(src), str(tmp_path / "stage"), ASSIGNMENTS)
    subs = {s.student_id: s for s in r.submissions}
    assert subs["alice"].submitted_at == dt.datetime(2026, 11, 21, 9, 30, 0, 250000, tzinfo=UTC)
    assert subs["alice"].timestamp_from == "timestamp.txt"
    assert subs["alice"].exchange_files == {"timestamp.txt": "2026-11-21 09:30:00.250000 UTC",
                                            "submission_secret.txt": "c2VjcmV0"}
    assert reasons(r, "alice") == []
    assert subs["bob"].submitted_at is None
    assert reasons(r, "bob") == ["timestamp.txt ('next tuesday') is not a time; the submission time is unknown"]
    assert subs["carol"].submitted_at is None and subs["carol"].timestamp_from == ""
    assert subs["dan"].submitted_at == dt.datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


def test_a_zip_entry_gives_its_utc_time_or_its_zoneless_time(tmp_path):
    z = tmp_path / "export.zip"
    utc_seconds = int(dt.datetime(2026, 11, 21, 23, 30, tzinfo=UTC).timestamp())
    with zipfile.ZipFile(z, "w") as zf:
        plain = zipfile.ZipInfo("smithjane_1_self_attention.ipynb", date_time=(2026, 11, 21, 8, 15, 0))
        zf.writestr(plain, nb_text())
        stamped = zipfile.ZipInfo("doejohn_2_self_attention.ipynb", date_time=(2026, 11, 22, 0, 30, 0))
        stamped.extra = struct.pack("<HHBi", 0x5455, 5, 1, utc_seconds)  # extended timestamp, UTC
        zf.writestr(stamped, nb_text())
        old = zipfile.ZipInfo("roefred_3_self_attention.ipynb", date_time=(2026, 11, 20, 8, 0, 0))
        new = zipfile.ZipInfo("roefred_4_self_attention-1.ipynb", date_time=(2026, 11, 23, 8, 0, 0))
        zf.writestr(old, nb_text())
        zf.writestr(new, nb_text())
    r = intake.collect(str(z), str(tmp_path / "stage"), ASSIGNMENTS)
    subs = {s.student_id: s for s in r.submissions}
    assert (subs["smithjane"].submitted_at, subs["smithjane"].timestamp_from) == (
        dt.datetime(2026, 11, 21, 8, 15), "zip entry")  # no zone: the export reads it in zip_timezone
    assert (subs["doejohn"].submitted_at, subs["doejohn"].timestamp_from) == (
        dt.datetime(2026, 11, 21, 23, 30, tzinfo=UTC), "zip entry (UTC)")
    # Of two copies the newest is graded, and its upload time is the submission's.
    assert subs["roefred"].submitted_at == dt.datetime(2026, 11, 23, 8, 0)


def test_an_oversized_timestamp_file_is_not_believed(tmp_path):
    src = tmp_path / "subs"
    put(src, "alice/05_self_attention/self_attention.ipynb")
    put(src, "alice/05_self_attention/timestamp.txt", "2026-11-21 09:30:00 UTC" + " " * 2000)
    r = intake.collect(str(src), str(tmp_path / "stage"), ASSIGNMENTS)
    assert r.submissions[0].submitted_at is None
    assert reasons(r, "alice") == ["'timestamp.txt' is over 1 KB, so it is not nbgrader's; ignored"]
