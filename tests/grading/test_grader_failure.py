"""A grader that cannot grade says so; it never turns its own failure into a student's score
(issue 37 item 3).

A cell the student did not write (a demonstration cell of the release, neither an answer nor a
test) that runs out of time or memory fails the same way for every submission: the environment
cannot run the assignment. `worker.grader_failure` names it; the platforms then refuse (no
Gradescope results.json, a not-gradable PrairieLearn result), even when an earlier solution check
of another environment left a cached verdict; a class run names it in problems.csv.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

import nbformat
import pytest

import grading_helpers as H
from autograder import worker

A, NB = "00_fixture", "fixture.ipynb"


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    for source, meta, outputs in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["nbgrader"] = meta
        cell.outputs = [nbformat.v4.new_output("error", ename=e, evalue="", traceback=[]) for e in outputs]
        nb.cells.append(cell)
    return nb


DEMO = ("slow_demo()", {})
ANSWER = ("def f(x):\n    return x", {"solution": True, "grade_id": "a"})
TEST = ("assert f(1) == 1", {"grade": True, "grade_id": "a_tests", "points": 1})


def test_a_demo_cell_out_of_time_is_the_graders_failure():
    release = _nb((DEMO[0], DEMO[1], []), (ANSWER[0], ANSWER[1], []), (TEST[0], TEST[1], []))
    graded = _nb((DEMO[0], DEMO[1], ["Timeout"]), (ANSWER[0], ANSWER[1], []), (TEST[0], TEST[1], []))
    assert "ran past the per-cell time limit" in worker.grader_failure(graded, release)
    graded = _nb((DEMO[0], DEMO[1], ["KernelDied"]), (ANSWER[0], ANSWER[1], ["NotRun"]), (TEST[0], TEST[1], ["NotRun"]))
    assert "died" in worker.grader_failure(graded, release)


def test_the_students_own_slow_code_stays_the_students():
    release = _nb((DEMO[0], DEMO[1], []), (ANSWER[0], ANSWER[1], []), (TEST[0], TEST[1], []))
    # a test cell running the student's answer out of time: their answer is slow
    graded = _nb((DEMO[0], DEMO[1], []), (ANSWER[0], ANSWER[1], []), (TEST[0], TEST[1], ["Timeout"]))
    assert worker.grader_failure(graded, release) is None
    # a cell the student wrote or changed (not the release's source)
    graded = _nb(("while True: pass", {}, ["Timeout"]), (ANSWER[0], ANSWER[1], []), (TEST[0], TEST[1], []))
    assert worker.grader_failure(graded, release) is None
    graded = _nb((DEMO[0], DEMO[1], []), (ANSWER[0], ANSWER[1], ["Timeout"]), (TEST[0], TEST[1], []))
    assert worker.grader_failure(graded, release) is None


def test_a_kernel_that_never_started_is_the_graders_failure():
    release = _nb((DEMO[0], DEMO[1], []), (ANSWER[0], ANSWER[1], []))
    graded = _nb((DEMO[0], DEMO[1], ["NotRun"]), (ANSWER[0], ANSWER[1], ["NotRun"]))
    graded.metadata["autograder_stopped"] = "the kernel stopped (RuntimeError: Kernel didn't respond in 120 seconds)"
    assert "did not start" in worker.grader_failure(graded, release)


@pytest.mark.slow
def test_platforms_refuse_when_a_release_cell_cannot_run_here(tmp_path):
    """The fixture with a demonstration cell that sleeps past the per-cell limit: the solution
    check itself cannot run it, so Gradescope gets no results.json and PrairieLearn a
    not-gradable result with exit 0, and neither gives the student a score."""
    course = tmp_path / "course"
    source = tmp_path / "source"
    nb = nbformat.read(H.FIXTURE / A / NB, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell("import time\ntime.sleep(30)  # a demonstration too slow here"))
    (source / A).mkdir(parents=True)
    nbformat.write(nb, source / A / NB)
    H.make_course(course, source=source)
    upload = tmp_path / "upload"
    upload.mkdir()
    nbformat.write(H.honest(course, A, NB), upload / NB)
    env = dict(os.environ, PYTHONPATH=str(H.REPO))
    results = tmp_path / "results" / "gs.json"
    started = time.monotonic()
    gs = subprocess.run([H.PYTHON, "-m", "autograder", "gradescope", str(upload), str(results),
                         "--course-root", str(course), "--timeout", "4"], cwd=str(H.REPO), env=env,
                        capture_output=True, text=True, timeout=600)
    assert gs.returncode == 2, gs.stderr[-2000:]
    assert "could not be run here" in gs.stderr and "ran past the per-cell time limit" in gs.stderr
    assert not results.exists()
    pl_results = tmp_path / "results" / "pl.json"
    pl = subprocess.run([H.PYTHON, "-m", "autograder", "prairielearn", str(upload), str(pl_results),
                         "--course-root", str(course), "--timeout", "4"], cwd=str(H.REPO), env=env,
                        capture_output=True, text=True, timeout=600)
    assert pl.returncode == 0, pl.stderr[-2000:]
    data = json.loads(pl_results.read_text())
    assert data["gradable"] is False and "score" not in data
    print(f"two refusals in {time.monotonic() - started:.0f} s")


@pytest.mark.slow
def test_a_grader_killed_mid_grading_gives_no_score(tmp_path):
    """The grading process dies while grading the student (here by the worker's test hook; on
    the platforms, the container's OOM killer): the guard parent (platform_guard.py) turns it
    into a refusal. PrairieLearn shows a not-gradable result (exit 0, it reads results only
    then), Gradescope gets no results.json (exit 2), and nothing stale stands in for it."""
    course = H.make_course(tmp_path / "course")
    upload = tmp_path / "upload"
    upload.mkdir()
    nbformat.write(H.honest(course, A, NB), upload / NB)
    # The dying process cannot remove its temporary folders (a container is thrown away): they
    # go to a folder of the test's own, short as kernel socket paths need, removed at the end.
    leftovers = tempfile.mkdtemp(prefix="crash-")
    env = dict(os.environ, PYTHONPATH=str(H.REPO), AUTOGRADER_TEST_CRASH_ON="doomed", TMPDIR=leftovers)
    try:
        _refused_on_each_platform(course, upload, tmp_path, env)
    finally:
        shutil.rmtree(leftovers, ignore_errors=True)


def _refused_on_each_platform(course, upload, tmp_path, env):
    for platform, expected in (("prairielearn", 0), ("gradescope", 2)):
        results = tmp_path / platform / "results.json"
        results.parent.mkdir()
        results.write_text('{"score": 100, "gradable": true}')  # stale
        proc = subprocess.run([H.PYTHON, "-m", "autograder", platform, str(upload), str(results),
                               "--course-root", str(course), "--student", "doomed"], cwd=str(H.REPO),
                              env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == expected, proc.stderr[-2000:]
        assert "grading refused: the grading process stopped with status 70" in proc.stderr
        if platform == "gradescope":
            assert not results.exists()
        else:
            data = json.loads(results.read_text())
            assert data["gradable"] is False and data["format_errors"] and "score" not in data


def test_a_batch_that_fails_while_preparing_its_kernels_leaves_no_socket_folder(tmp_path, monkeypatch):
    """The kernels' socket folder (in the temporary folder) is removed whatever stops the batch
    after it was made, preparing the kernels included."""
    from autograder import batch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    job = object.__new__(batch.Batch)
    job.work, job.course_root = str(tmp_path / "work"), str(tmp_path / "course")
    monkeypatch.setattr(job, "check_sandbox", lambda: "bwrap", raising=False)
    monkeypatch.setattr(job, "_course_assignments", lambda: ["01_a"], raising=False)
    monkeypatch.setattr(job, "_verdict_folder", lambda: None, raising=False)
    monkeypatch.setattr(batch, "_course_utils_dir", lambda root: root)

    def refuse():
        raise batch.GradingRefused("the fallback cannot start here")
    monkeypatch.setattr(job, "_prepare_kernels", refuse, raising=False)
    with pytest.raises(batch.GradingRefused):
        job.run()
    assert os.listdir(tmp_path / "tmp") == []
