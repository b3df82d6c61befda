"""The solution check's verdict is reused only while nothing it depends on changed (issue 44).

Three layers, cheapest first. autograder/verdict.py alone: what the key holds, which entries are
read back, where a verdict may be kept. The batch's check_solution on the small fixture course
(which carries its own copy of course_utils, as the Gradescope zip does, so a test can change
it), with a stand-in for the grading worker that writes the solution's result and counts how
often it was asked: when the check runs, what is kept, what is reused. And the real command,
twice on one folder and once more on a copy, for the sentences an instructor reads and a
student graded after a reused verdict; that costs one real solution check.
"""
import filecmp
import json
import os
import shutil
import subprocess
import sys

import nbformat
import pytest

import grading_helpers as H
from autograder import batch, template_cache, verdict

A, NB = "00_fixture", "fixture.ipynb"
CHECKED = f"{A}: grading the solution notebook in the sandbox first"
REUSED = f"{A}: the solution's verdict from "


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
    monkeypatch.setattr(verdict, "cpu_key", lambda *folder: '["aarch64", "DEFAULT"]')
    assert _key() != base  # another CPU
    monkeypatch.undo()
    copy = tmp_path / "course_utils"
    shutil.copytree(H.REPO / "course_utils", copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert _key(course_utils=copy) == base  # where it sits does not matter, what it holds does
    with open(copy / "grading" / "__init__.py", "a") as fh:
        fh.write("\n# changed\n")
    assert _key(course_utils=copy) != base


def _cpu_key_in_a_fresh_process(folder, **env):
    """(cpu_key(folder), whether that process imported PyTorch to find it)."""
    code = ("import json, sys\nfrom autograder import verdict\n"
            f"print(json.dumps([verdict.cpu_key({str(folder)!r}), 'torch' in sys.modules]))")
    environ = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    done = subprocess.run([sys.executable, "-c", code], cwd=str(H.REPO), capture_output=True, text=True,
                          env={**environ, **env}, timeout=120)
    assert done.returncode == 0, done.stderr
    return tuple(json.loads(done.stdout))


def test_the_cpu_part_is_found_by_pytorch_once_then_read_back(tmp_path):
    """A batch imports PyTorch only to learn its kernel family; the next batch on the same CPU
    and PyTorch reads it from the verdicts' folder, and the answer is the same."""
    asked = verdict.cpu_key()
    assert _cpu_key_in_a_fresh_process(tmp_path) == (asked, True)
    assert len(list(tmp_path.glob("cpu-*.json"))) == 1
    assert _cpu_key_in_a_fresh_process(tmp_path) == (asked, False)
    # Another kernel family asked for: PyTorch is asked again, and says so in the key.
    portable, imported = _cpu_key_in_a_fresh_process(tmp_path, ATEN_CPU_CAPABILITY="default")
    assert imported and portable != asked and json.loads(portable)[1:] == ["DEFAULT", "default"]
    assert len(list(tmp_path.glob("cpu-*.json"))) == 2


def test_an_unreadable_or_foreign_cpu_entry_is_ignored(tmp_path):
    asked = verdict.cpu_key()
    _cpu_key_in_a_fresh_process(tmp_path)
    (kept,) = tmp_path.glob("cpu-*.json")
    kept.write_text("{not json")
    assert _cpu_key_in_a_fresh_process(tmp_path) == (asked, True)  # asked again, and kept again
    assert json.loads(kept.read_text())["cpu"] == asked
    kept.write_text(json.dumps({"fingerprint": "another machine", "cpu": '["x", "AVX512", ""]'}))
    assert _cpu_key_in_a_fresh_process(tmp_path) == (asked, True)


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


# -- the batch's check_solution, its worker stood in for ------------------------------------------

class _Worker:
    """Grades the solution check as a worker would, in name only: writes the shard's result.json
    with `score` of 5 (and a grader_failure if given) and counts how often it was asked."""

    def __init__(self, score=5, grader_failure=None):
        self.score, self.grader_failure, self.runs, self.stopped = score, grader_failure, 0, False

    def run(self, task, deadline):
        self.runs += 1
        cells = [{"grade_id": "fixture_double_tests", "score": min(self.score, 2), "max_score": 2},
                 {"grade_id": "fixture_rows_tests", "score": max(self.score - 2, 0), "max_score": 3}]
        result = {"status": "graded", "cells": cells, "problems": []}
        if self.grader_failure:
            result["grader_failure"] = self.grader_failure
        os.makedirs(task["shard"], exist_ok=True)
        with open(os.path.join(task["shard"], "result.json"), "w") as fh:
            json.dump(result, fh)
        return {"done": task["shard"], "status": "graded"}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The fixture course with its own course_utils (what the kernels would import)."""
    course = H.make_course(tmp_path_factory.mktemp("verdict") / "course")
    shutil.copytree(H.REPO / "course_utils", course / "course_utils",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return course


def _check(course, out, verdicts, worker, timeout=60, strict=False):
    """Batch.check_solution of 00_fixture as `grade` runs it after its setup (Batch.run), with
    bubblewrap as the isolation and the worker stood in for; GradingRefused as there."""
    opts = batch.Options(submissions="", out=str(out), course_root=str(course), timeout=timeout,
                         verdict_cache=str(verdicts), progress=False)
    job = batch.Batch(opts)
    job.strict_environment = strict
    job.sandboxed, job.assignments = "bwrap", batch.course_assignments(job.source_root)
    job.course_utils = batch._course_utils_dir(job.course_root)
    job.verdicts = job._verdict_folder()
    job.sockets = job.kernel_package = str(out / "unused")
    job.ro_paths = []
    job.prepared = {A: job.prepare(A)}
    job.check_solution(A, worker)


def _own(course, tmp_path):
    copy = tmp_path / "course"
    shutil.copytree(course, copy)
    return copy


def test_a_kept_verdict_is_reused_until_the_solution_changes(course, tmp_path, capfd):
    course = _own(course, tmp_path)
    worker = _Worker()
    _check(course, tmp_path / "out1", tmp_path / "v", worker)
    assert CHECKED in capfd.readouterr().err
    _check(course, tmp_path / "out2", tmp_path / "v", worker)  # another batch, the same folder
    said = capfd.readouterr().err
    assert worker.runs == 1 and REUSED in said and "(nothing it depends on changed)" in said
    path = course / "solutions" / A / NB
    nb = nbformat.read(path, as_version=4)
    H.cell(nb, "fixture_double").source += "\n# the same answer, written again\n"
    nbformat.write(nb, path)
    _check(course, tmp_path / "out2", tmp_path / "v", worker)
    assert worker.runs == 2 and CHECKED in capfd.readouterr().err


def test_a_changed_course_utils_file_or_limit_checks_again(course, tmp_path):
    course = _own(course, tmp_path)
    worker = _Worker()
    _check(course, tmp_path / "out", tmp_path / "v", worker)
    _check(course, tmp_path / "out", tmp_path / "v", worker, timeout=61)
    assert worker.runs == 2
    with open(course / "course_utils" / "grading" / "__init__.py", "a") as fh:
        fh.write("\n# a changed helper\n")
    _check(course, tmp_path / "out", tmp_path / "v", worker)
    assert worker.runs == 3
    _check(course, tmp_path / "out", tmp_path / "v", worker, strict=True)
    assert worker.runs == 4
    _check(course, tmp_path / "out", tmp_path / "v", worker, strict=True)  # the last one, again
    assert worker.runs == 4 and len(list((tmp_path / "v" / A).glob("*.json"))) == 4


def test_a_failing_solution_is_never_kept_and_refuses_every_time(course, tmp_path):
    worker = _Worker(score=2)
    for _ in range(2):
        with pytest.raises(batch.GradingRefused, match="scores 2/5 in the grading sandbox"):
            _check(course, tmp_path / "out", tmp_path / "v", worker)
    assert worker.runs == 2 and not list((tmp_path / "v").glob("*/*.json"))  # no verdict (cpu-*.json is no verdict)


def test_a_grader_failure_is_never_kept(course, tmp_path):
    """A class run only warns about a release cell the environment could not run (the platforms
    refuse): the batch goes on, but such a verdict says nothing about the next run's machine."""
    worker = _Worker(grader_failure="fixture_demo: ran past the per-cell time limit")
    for _ in range(2):
        _check(course, tmp_path / "out", tmp_path / "v", worker)  # goes on: no refusal
    assert worker.runs == 2 and not list((tmp_path / "v").glob("*/*.json"))  # no verdict (cpu-*.json is no verdict)


def test_a_corrupt_entry_is_ignored_and_checked_again(course, tmp_path):
    worker = _Worker()
    _check(course, tmp_path / "out", tmp_path / "v", worker)
    entry, = (tmp_path / "v" / A).glob("*.json")
    entry.write_text('{"key": "' + entry.stem)  # cut short
    _check(course, tmp_path / "out", tmp_path / "v", worker)
    assert worker.runs == 2 and verdict.reused(str(tmp_path / "v"), A, entry.stem)  # whole again
    _check(course, tmp_path / "out", tmp_path / "v", worker)
    assert worker.runs == 2


# -- the real command ----------------------------------------------------------------------------

@pytest.mark.slow
def test_the_command_reuses_a_verdict_in_its_own_out_and_in_a_shared_folder(course, tmp_path):
    """Run 1 checks and keeps the verdict in OUT/.work/verdicts; run 2, into the same OUT, reuses
    it; run 3, another class on a copy of the course given that folder, reuses it and grades."""
    if H.sandbox_unavailable():
        pytest.fail("the grading sandbox cannot run here (make test-tools sets it up)")
    no_shared = {verdict.ENV_VAR: ""}  # not the session's folder (conftest.py)
    (tmp_path / "nobody").mkdir()
    for expected in (CHECKED, REUSED):
        r = H.grade(tmp_path / "nobody", tmp_path / "out", course, "--assignment", A, "--jobs", "1",
                    env_extra=no_shared)
        assert r.returncode == 0 and expected in r.stderr, r.stderr[-3000:]
    kept = tmp_path / "out" / ".work" / "verdicts"
    assert len(list((kept / A).glob("*.json"))) == 1
    # nbgrader's template (gradebook and release) is kept beside the verdicts, once
    templates = list((kept / "templates" / A).iterdir())
    assert len(templates) == 1 and (templates[0] / "gradebook.db").is_file(), templates
    copy = _own(course, tmp_path)  # elsewhere: the key does not hold the course's path
    H.write_student(tmp_path / "class", "alice", A, NB, H.honest(copy, A, NB))
    r = H.grade(tmp_path / "class", tmp_path / "out2", copy, "--jobs", "1", "--verdict-cache", str(kept))
    assert r.returncode == 0 and REUSED in r.stderr and CHECKED not in r.stderr, r.stderr[-3000:]
    assert not (tmp_path / "out2" / ".work" / "solution_check").exists()  # no notebook run
    assert H.grades(tmp_path / "out2")[("alice", A)]["score"] == "5"
    # the template gradebook is the kept one, byte for byte (nbgrader writes a different file
    # each time it generates one)
    assert filecmp.cmp(templates[0] / "gradebook.db", tmp_path / "out2" / ".work" / "templates" / f"{A}.db",
                       shallow=False)


def test_a_kept_template_is_used_only_when_whole(tmp_path):
    """A template missing its gradebook is not restored (nbgrader runs instead), and keeping one
    leaves a complete entry or nothing."""
    folder, release = tmp_path / "verdicts", tmp_path / "release"
    (release / A).mkdir(parents=True)
    (release / A / NB).write_text("{}")
    db = tmp_path / "template.db"
    db.write_text("gradebook")
    assert template_cache.keep(str(folder), A, "k1", str(db), str(release))
    entry = folder / "templates" / A / "k1"
    assert (entry / "gradebook.db").read_text() == "gradebook" and (entry / "release" / NB).is_file()
    db.unlink()
    (release / A / NB).unlink()
    assert template_cache.restore(str(folder), A, "k1", str(db), str(release))
    assert db.read_text() == "gradebook" and (release / A / NB).is_file()
    (entry / "gradebook.db").unlink()
    db.unlink()
    assert not template_cache.restore(str(folder), A, "k1", str(db), str(release)) and not db.exists()
    assert not template_cache.restore(str(folder), A, "other-key", str(db), str(release))
