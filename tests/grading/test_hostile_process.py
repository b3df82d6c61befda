"""The grader as a process (issue 17): two graders on one --out (8b), Ctrl-C (stopping at once,
every child gone) and a full disk at export (6c). No assertion depends on machine speed."""
import os
import signal
import subprocess
import sys
import time

import pytest

import grading_helpers as H

pytestmark = pytest.mark.slow
A, NB = "00_fixture", "fixture.ipynb"


def _needs_sandbox():
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")


def test_item8b_a_second_grader_on_the_same_out_is_refused(tmp_path):
    from autograder import lock
    course = H.make_course(tmp_path / "course")
    H.write_student(tmp_path / "subs", "alice", A, NB, H.honest(course, A, NB))
    held = lock.hold(tmp_path / "out")  # the first grader, still running
    try:
        proc = H.grade(tmp_path / "subs", tmp_path / "out", course, timeout=300)
    finally:
        held.close()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "another grader is already writing to" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "grades.csv").exists()


def _children(pid):
    """Every descendant of pid (host view; sandboxed kernels included)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for child, parent in parents.items():
            if parent == p and child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_ctrl_c_stops_the_batch_and_every_child(tmp_path):
    _needs_sandbox()
    course = H.make_course(tmp_path / "course")
    for name in ("sleeper1", "sleeper2"):
        nb = H.honest(course, A, NB)
        H.cell(nb, "fixture_rows").source += "\nimport time\ntime.sleep(10**6)\n"
        H.write_student(tmp_path / "subs", name, A, NB, nb)
    env = dict(os.environ, PYTHONPATH=str(H.REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder", "grade", str(tmp_path / "subs"), "--out",
         str(tmp_path / "out"), "--course-root", str(course), "--jobs", "2", "--timeout", "600"],
        cwd=str(H.REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A shell starts background jobs with SIGINT ignored, and a child inherits that: the
        # grader must get Ctrl-C as a terminal gives it, whoever runs this test.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    family = []
    try:
        kernels = set()
        give_up = time.monotonic() + 600
        while len(kernels) < 2 and time.monotonic() < give_up and proc.poll() is None:
            # both students' kernels running (the solution check's kernel has ended by then)
            if (tmp_path / "out" / ".work" / "shards").exists():
                kernels = {p for p in _children(proc.pid) if "ipykernel_launcher" in _cmdline(p)}
            time.sleep(1)
        assert len(kernels) >= 2, "the students' kernels never started"
        time.sleep(3)  # let the cells reach their sleep
        family = _children(proc.pid)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:  # the test failed: leave nothing running for the tests after it
            for pid in [proc.pid, *_children(proc.pid), *family]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    print(f"Ctrl-C: the grader exited {took:.1f} s after SIGINT")
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 60
    while any(_alive(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [(p, _cmdline(p)) for p in family if _alive(p)]


def test_item6c_export_survives_a_full_disk(tmp_path):
    """Export into a 64 kB filesystem: the files that do not fit are reported, nothing crashes,
    and no half-written CSV replaces a good one."""
    _needs_sandbox()
    code = (
        "import os, sys\n"
        "sys.path.insert(0, os.environ['REPO'])\n"
        "from autograder import export\n"
        "open('/out/grades.csv', 'w').write('the earlier, complete file\\n')\n"
        "failures = []\n"
        "export._write('/out/grades.csv', ['student_id', 'x'], [['s%d' % i, 'y' * 100] for i in range(5000)], failures)\n"
        "print('FAILURES', failures)\n"
        "print('KEPT', open('/out/grades.csv').read().strip())\n"
        "print('LEFT', sorted(os.listdir('/out')))\n")
    env = dict(os.environ, REPO=str(H.REPO))
    r = subprocess.run(["bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                        "--size", str(64 * 1024), "--tmpfs", "/out", sys.executable, "-c", code],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "No space left on device" in r.stdout
    assert "KEPT the earlier, complete file" in r.stdout
    assert "LEFT ['grades.csv']" in r.stdout


def test_item7_output_past_the_cell_budget_is_dropped_as_it_arrives():
    """SandboxedExecute.output keeps a cell's first CELL_OUTPUT_BYTES, then one note."""
    from autograder.execute import CELL_OUTPUT_BYTES, SandboxedExecute
    ex = SandboxedExecute()
    ex.reset_budgets()
    ex.clear_before_next_output = False
    outs = []
    line = "z" * 2**20
    for _ in range(3 * CELL_OUTPUT_BYTES // len(line)):
        ex.output(outs, {"msg_type": "stream", "parent_header": {"msg_id": "m"},
                         "header": {"msg_type": "stream"},
                         "content": {"name": "stdout", "text": line}}, None, 0)
    kept = sum(len(o.get("text", "")) for o in outs)
    assert kept <= CELL_OUTPUT_BYTES + 200
    assert sum("output cut" in o.get("text", "") for o in outs) == 1
