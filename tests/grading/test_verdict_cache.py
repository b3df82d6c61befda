"""The solution check's verdict is reused only while nothing it depends on changed (issue 44).

The fast tests look at autograder/verdict.py alone: what the key holds, which entries are read
back, where a verdict may be kept. The slow ones run `python -m autograder grade` on the small
fixture course, which carries its own copy of course_utils (as the Gradescope zip does) so that
a test can change it: a full-marks check is kept once (`kept`), then each test copies the course
and that verdict, changes one thing and looks at what the batch said it did.
"""
import json
import os
import pathlib
import shutil
import sys

import nbformat
import pytest

import grading_helpers as H
from autograder import verdict

A, NB = "00_fixture", "fixture.ipynb"
CHECKED = f"{A}: grading the solution notebook in the sandbox first"
REUSED = f"{A}: the solution's verdict from "
FAILS = "the solution notebook scores 2/5 in the grading sandbox"


# -- the key and the entries ------------------------------------------------------------------

def _key(fingerprint="f1", isolation="bwrap", strict=False, course_utils=None):
    return verdict.key({"fingerprint": fingerprint}, isolation=isolation, strict=strict,
                       course_utils=str(course_utils or H.REPO / "course_utils"))


def test_the_key_changes_with_everything_the_verdict_depends_on(tmp_path, monkeypatch):
    base = _key()
    assert _key() == base  # the same inputs, the same key
    assert _key(fingerprint="f2") != base  # the solution, its hidden cases or the limits
    assert _key(isolation="drop") != base and _key(isolation=False) != base
    assert _key(strict=True) != base
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert _key() != base
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    monkeypatch.setattr(verdict, "cpu_key", lambda: '["x86_64", ["sse2"], ""]')
    assert _key() != base  # another CPU
    monkeypatch.undo()
    copy = tmp_path / "course_utils"
    shutil.copytree(H.REPO / "course_utils", copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert _key(course_utils=copy) == base  # where it sits does not matter, what it holds does
    with open(copy / "grading" / "__init__.py", "a") as fh:
        fh.write("\n# changed\n")
    assert _key(course_utils=copy) != base


def test_only_a_full_marks_entry_for_the_same_key_is_read_back(tmp_path):
    key = _key()
    assert verdict.reused(str(tmp_path), A, key) is None  # none kept
    assert verdict.keep(str(tmp_path), A, key, 5, 5)
    kept = verdict.reused(str(tmp_path), A, key)
    assert kept["score"] == kept["max_score"] == 5 and kept["time"].endswith("UTC")
    assert verdict.reused(str(tmp_path), A, _key(fingerprint="f2")) is None
    assert verdict.reused(str(tmp_path), "01_other", key) is None
    with pytest.raises(ValueError):
        verdict.keep(str(tmp_path), A, key, 2, 5)
    with pytest.raises(ValueError):
        verdict.keep(str(tmp_path), A, key, 0, 0)
    entry = tmp_path / A / f"{key}.json"
    good = json.loads(entry.read_text())
    for bad in ('{"key": "', "[]", json.dumps({**good, "score": 4}), json.dumps({**good, "key": "x"}),
                json.dumps({**good, "score": True, "max_score": True}), json.dumps({**good, "time": None})):
        entry.write_text(bad)
        assert verdict.reused(str(tmp_path), A, key) is None, bad
    assert not [p for p in (tmp_path / A).iterdir() if p.name.startswith(".new-")]


def test_a_verdict_is_never_kept_where_the_sandbox_mounts(tmp_path):
    folder, why = verdict.private_folder(os.path.join(sys.prefix, "verdicts"))
    assert folder is None and "sandbox" in why
    assert not os.path.exists(os.path.join(sys.prefix, "verdicts"))
    folder, why = verdict.private_folder(str(tmp_path / "shared"))
    assert why is None and os.stat(folder).st_mode & 0o777 == 0o700


def test_the_option_comes_before_the_environment_before_the_default(monkeypatch):
    monkeypatch.setenv(verdict.ENV_VAR, "/from/env")
    assert verdict.chosen_folder("/given", "/default") == "/given"
    assert verdict.chosen_folder("", "/default") == "/from/env"
    monkeypatch.setenv(verdict.ENV_VAR, "")
    assert verdict.chosen_folder("", "/default") == "/default"


# -- the batch ---------------------------------------------------------------------------------

def _grade(course, out, verdicts, *extra, students=None):
    """A batch of 00_fixture (no student unless given), its verdicts kept in `verdicts`."""
    subs = out.parent / (out.name + "-subs")
    subs.mkdir(exist_ok=True)
    for name, nb in (students or {}).items():
        H.write_student(subs, name, A, NB, nb)
    return H.grade(subs, out, course, "--assignment", A, "--jobs", "1",
                   *(["--verdict-cache", str(verdicts)] if verdicts else []), *extra)


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A course with its own course_utils, and a folder holding its solution's verdict."""
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")
    root = tmp_path_factory.mktemp("verdict")
    course = H.make_course(root / "course")
    shutil.copytree(H.REPO / "course_utils", course / "course_utils",
                    ignore=shutil.ignore_patterns("__pycache__"))
    first = _grade(course, root / "out", root / "verdicts")
    assert first.returncode == 0, first.stderr[-3000:]
    assert CHECKED in first.stderr and REUSED not in first.stderr
    assert len(list((root / "verdicts" / A).glob("*.json"))) == 1
    return course, root / "verdicts"


def _copy(kept, tmp_path):
    course, verdicts = kept
    shutil.copytree(course, tmp_path / "course")
    shutil.copytree(verdicts, tmp_path / "verdicts")
    return tmp_path / "course", tmp_path / "verdicts"


@pytest.mark.slow
def test_a_second_batch_reuses_the_verdict_and_still_grades(kept, tmp_path):
    course, verdicts = _copy(kept, tmp_path)  # another folder: the key does not hold the path
    r = _grade(course, tmp_path / "out", verdicts, students={"alice": H.honest(course, A, NB)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert REUSED in r.stderr and "(nothing it depends on changed)" in r.stderr and CHECKED not in r.stderr
    assert not (tmp_path / "out" / ".work" / "solution_check").exists()  # no notebook run
    assert H.grades(tmp_path / "out")[("alice", A)]["score"] == "5"


def _change_solution(course):
    path = course / "solutions" / A / NB
    nb = nbformat.read(path, as_version=4)
    H.cell(nb, "fixture_double").source += "\n# the same answer, written again\n"
    nbformat.write(nb, path)
    return []


def _change_course_utils(course):
    with open(course / "course_utils" / "grading" / "__init__.py", "a") as fh:
        fh.write("\n# a changed helper\n")
    return []


@pytest.mark.slow
@pytest.mark.parametrize("change", [_change_solution, _change_course_utils,
                                    lambda course: ["--timeout", "61"]],
                         ids=["solution", "course_utils", "limits"])
def test_a_change_it_depends_on_checks_the_solution_again(kept, tmp_path, change):
    course, verdicts = _copy(kept, tmp_path)
    extra = change(course)
    r = _grade(course, tmp_path / "out", verdicts, *extra)
    assert r.returncode == 0, r.stderr[-3000:]
    assert CHECKED in r.stderr and REUSED not in r.stderr
    assert len(list((verdicts / A).glob("*.json"))) == 2  # the new verdict beside the old one


@pytest.mark.slow
def test_a_corrupt_entry_is_ignored_and_checked_again(kept, tmp_path):
    course, verdicts = _copy(kept, tmp_path)
    entry, = (verdicts / A).glob("*.json")
    entry.write_text('{"key": "' + entry.stem)  # cut short
    r = _grade(course, tmp_path / "out", verdicts)
    assert r.returncode == 0, r.stderr[-3000:]
    assert CHECKED in r.stderr and REUSED not in r.stderr
    assert verdict.reused(str(verdicts), A, entry.stem)  # written again, whole


@pytest.mark.slow
def test_a_failing_solution_is_never_kept_and_refuses_every_time(kept, tmp_path):
    course, _ = _copy(kept, tmp_path)
    verdicts = tmp_path / "empty"
    path = course / "solutions" / A / NB
    nb = nbformat.read(path, as_version=4)
    H.cell(nb, "fixture_rows_tests").source = H.cell(nb, "fixture_rows_tests").source.replace(
        "### BEGIN HIDDEN TESTS\n", "### BEGIN HIDDEN TESTS\nimport course_utils.no_such_module\n")
    nbformat.write(nb, path)
    for run in ("out1", "out2"):
        r = _grade(course, tmp_path / run, verdicts)
        assert r.returncode == 2 and FAILS in r.stderr, r.stderr[-3000:]
        assert CHECKED in r.stderr and REUSED not in r.stderr
    assert not list(verdicts.rglob("*.json"))


@pytest.mark.slow
def test_a_rerun_into_the_same_out_reuses_its_own_verdict(kept, tmp_path):
    """Without --verdict-cache (nor the environment's), verdicts stay in OUT/.work/verdicts."""
    course, _ = _copy(kept, tmp_path)
    no_shared = {verdict.ENV_VAR: ""}
    (tmp_path / "subs").mkdir()
    for expected in (CHECKED, REUSED):
        r = H.grade(tmp_path / "subs", tmp_path / "out", course, "--assignment", A, "--jobs", "1",
                    env_extra=no_shared)
        assert r.returncode == 0 and expected in r.stderr, r.stderr[-3000:]
    assert len(list((tmp_path / "out" / ".work" / "verdicts" / A).glob("*.json"))) == 1
