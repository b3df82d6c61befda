"""The platforms' fallback, forced: bubblewrap cannot start (Docker's default capabilities, no
CAP_SYS_ADMIN), so `--container-fallback` runs student code as an unprivileged user without
namespaces (issue 37 items 1 and 10). The grader itself runs under Docker's default bounding set
(`setpriv --bounding-set`), as it does in Gradescope's and PrairieLearn's containers.

One hostile upload is graded, and its answers are the oracle: `double` returns a wrong result
if the kernel could read any of the course's answers (solutions/, the reference, the cache, the
upload's metadata), `rows` if it could write results.json, the cache or the course, or signal
the grader. A daemon it starts (its own session, as a detached process would) must be dead when
the command returns and must never write its marker. The solution check runs in the same mode
first, so the solution scoring full marks there is part of the test too.
"""
import json
import os
import pathlib
import shutil
import subprocess
import time

import nbformat
import pytest

import grading_helpers as H

A, NB = "00_fixture", "fixture.ipynb"
# Docker's default capabilities: no CAP_SYS_ADMIN, so no namespaces for bubblewrap.
DOCKER_CAPS = ("-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+setpcap,"
               "+net_bind_service,+net_raw,+sys_chroot,+mknod,+audit_write,+setfcap")

READ_PROBES = '''
import os, pathlib
_leaks, _wrote = [], []
def _try(what, action, found=_leaks):
    try:
        action()
        found.append(what)
    except Exception:
        pass
_try("list solutions", lambda: os.listdir({course!r} + "/solutions"))
_try("read the solution", lambda: open({course!r} + "/solutions/00_fixture/fixture.ipynb").read())
_try("list the reference", lambda: os.listdir({course!r} + "/course_utils/reference"))
_try("import the reference", lambda: __import__("course_utils.reference.attention", fromlist=["x"]).scaled_dot_product_attention)
_try("list the cache", lambda: os.listdir({course!r} + "/.autograder-cache"))
_try("read the upload's metadata", lambda: open({meta!r}).read())
_try("list the grader's code", lambda: os.listdir({course!r} + "/autograder"))
print("LEAKS", _leaks, os.getuid())
if _leaks:
    double = lambda x: x  # the oracle: a wrong answer costs the exercise
'''

WRITE_PROBES = '''
import os, signal, subprocess
_attempt = lambda what, action: _try(what, action, _wrote)  # defined with the read probes
_attempt("results.json", lambda: open({results!r}, "w").write('{{"score": 100}}'))
_attempt("a file beside results.json", lambda: open({results!r} + ".forged", "w").write("x"))
_attempt("the cache", lambda: open({course!r} + "/.autograder-cache/poison", "w").write("x"))
_attempt("the course", lambda: open({course!r} + "/poison", "w").write("x"))
for _pid in os.listdir("/proc"):
    if _pid.isdigit() and int(_pid) != os.getpid():
        try:
            if os.stat("/proc/" + _pid).st_uid == 0 and b"autograder" in open("/proc/" + _pid + "/cmdline", "rb").read():
                _attempt("signal the grader " + _pid, lambda: os.kill(int(_pid), signal.SIGSTOP))
        except OSError:
            pass
# A detached daemon, waiting for the grader to finish, that would forge the results and leave a mark.
subprocess.Popen(["sh", "-c", "sleep 12; echo forged > {results}; echo alive > {marker}"],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
print("WROTE", _wrote)
if _wrote:
    rows = lambda x: x
'''


def _can_simulate():
    if os.geteuid() != 0:
        return "needs root (the platforms run the grader as root)"
    probe = subprocess.run(["setpriv", f"--bounding-set={DOCKER_CAPS}", "--", "true"], capture_output=True)
    return None if probe.returncode == 0 else "setpriv cannot set a bounding set here"


@pytest.fixture(scope="module")
def fallback_run(tmp_path_factory):
    reason = _can_simulate()
    if reason:
        pytest.fail(f"cannot simulate a platform container: {reason}")
    root = tmp_path_factory.mktemp("fallback")
    course = H.make_course(root / "course")
    # As in the Gradescope zip: the course's own course_utils (with its reference) in the course.
    shutil.copytree(H.REPO / "course_utils", course / "course_utils",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (course / "autograder").mkdir()
    (course / "autograder" / "README.md").write_text("grader")
    (course / ".autograder-cache").mkdir()
    upload_dir = root / "autograder" / "submission"
    upload_dir.mkdir(parents=True)
    meta = root / "autograder" / "submission_metadata.json"
    meta.write_text(json.dumps({"users": [{"sid": "ada", "email": "ada@example.org"}]}))
    results_dir = root / "autograder" / "results"
    results_dir.mkdir()
    os.chmod(results_dir, 0o777)  # the worst case: the platform made it writable by anyone
    results = results_dir / "results.json"
    marker_dir = root / "open"
    marker_dir.mkdir()
    os.chmod(marker_dir, 0o777)  # where a surviving daemon could leave its mark
    marker = marker_dir / "daemon-was-alive"
    for path in (root, root / "autograder"):
        os.chmod(path, 0o755)

    nb = H.honest(course, A, NB)
    H.cell(nb, "fixture_double").source += READ_PROBES.format(course=str(course), meta=str(meta))
    H.cell(nb, "fixture_rows").source += WRITE_PROBES.format(course=str(course), results=str(results),
                                                             marker=str(marker))
    nbformat.write(nb, upload_dir / NB)
    # No shared verdict folder: the solution check must run here, as the unprivileged user, and
    # keep its verdict in the course's .autograder-cache, which the probes must not reach.
    env = dict(os.environ, PYTHONPATH=str(H.REPO), AUTOGRADER_VERDICT_CACHE="")
    started = time.monotonic()
    proc = subprocess.run(
        ["setpriv", f"--bounding-set={DOCKER_CAPS}", "--", H.PYTHON, "-m", "autograder", "gradescope",
         str(upload_dir), str(results), "--course-root", str(course), "--container-fallback",
         "--visibility", "visible"], cwd=str(H.REPO), env=env, capture_output=True, text=True, timeout=900)
    from autograder import sandbox
    ran_as = [int(m) for m in __import__("re").findall(r"unprivileged user \(uid (\d+)", proc.stderr)]
    left = [p for uid in ran_as for p in sandbox.user_processes(uid)]
    return {"proc": proc, "results": results, "marker": marker, "course": course, "left": left,
            "seconds": time.monotonic() - started}


@pytest.mark.slow
def test_the_fallback_grades_as_an_unprivileged_user_and_says_so(fallback_run):
    proc = fallback_run["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "bubblewrap cannot run here" in proc.stderr and "unprivileged user" in proc.stderr
    assert "--unsafe-no-sandbox" not in proc.stderr
    data = json.loads(fallback_run["results"].read_text())
    assert data["extra_data"]["isolation"] == "drop" and data["extra_data"]["sandboxed"] is False
    # the solution was checked here, as the unprivileged user, and its verdict kept where the
    # course's cache is (made root's alone before any student code ran)
    assert f"{A}: grading the solution notebook in the sandbox first" in proc.stderr
    assert list((fallback_run["course"] / ".autograder-cache" / ".verdicts" / A).glob("*.json"))


@pytest.mark.slow
def test_no_answer_is_readable_and_nothing_of_the_graders_is_writable(fallback_run):
    """The score is the oracle: 5/5 means no read probe and no write probe succeeded (and the
    solution, graded the same way first, scored full marks, or nothing would be graded)."""
    data = json.loads(fallback_run["results"].read_text())
    assert [(t["name"], t["score"]) for t in data["tests"]] == [
        ("fixture_double_tests", 2), ("fixture_rows_tests", 3)], data
    assert not (fallback_run["course"] / "poison").exists()
    assert not (fallback_run["course"] / ".autograder-cache" / "poison").exists()
    assert not pathlib.Path(str(fallback_run["results"]) + ".forged").exists()


@pytest.mark.slow
def test_no_student_process_outlives_the_grading(fallback_run):
    assert fallback_run["left"] == [], "processes of the student's uid outlived the grader"
    assert "unprivileged user (uid 61" in fallback_run["proc"].stderr
    time.sleep(max(0.0, 14 - fallback_run["seconds"]))  # past the daemon's 12 s, had it lived
    assert not fallback_run["marker"].exists()
    assert json.loads(fallback_run["results"].read_text())["score"] == 5  # not rewritten


def test_harden_course_leaves_only_what_the_kernel_needs(tmp_path):
    from autograder import sandbox
    course = tmp_path / "course"
    for d in ("solutions", "notebooks", "course_utils/reference", "course_utils/grading", ".venv",
              ".autograder-cache", "autograder"):
        (course / d).mkdir(parents=True)
    (course / "pyproject.toml").write_text("")
    (course / "gradebook.db").write_text("")
    private = sandbox.harden_course(course, keep={".venv"})
    mode = lambda p: os.stat(course / p).st_mode & 0o777  # noqa: E731
    assert mode(".") == 0o711
    for p in ("solutions", ".autograder-cache", "autograder", "gradebook.db", "course_utils/reference"):
        assert mode(p) & 0o077 == 0, p
        assert str(course / p) in private
    for p in ("notebooks", "course_utils", "course_utils/grading", ".venv", "pyproject.toml"):
        assert mode(p) & 0o005 == 0o005 or p == "pyproject.toml", p


def test_kill_user_ends_a_detached_process_of_that_user():
    from autograder import sandbox
    if os.geteuid() != 0:
        pytest.fail("needs root")
    uid = 60099
    proc = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                             "sh", "-c", "sleep 300 & sleep 300 & wait"], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(sandbox.user_processes(uid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(sandbox.user_processes(uid)) >= 3
    assert sandbox.kill_user(uid) >= 1
    assert sandbox.user_processes(uid) == []
    proc.wait(timeout=10)
