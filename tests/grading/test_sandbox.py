"""The sandbox on its own, without Jupyter: what code inside can and cannot do (fast)."""
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import grading_helpers as H
from autograder import sandbox



@pytest.fixture(autouse=True)
def _sandbox_must_run():
    """A sandbox that cannot run fails these tests (make test-tools sets it up); never a skip."""
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")


@pytest.fixture
def box(tmp_path):
    secret = tmp_path / "course" / "solutions"
    secret.mkdir(parents=True)
    (secret / "answers.txt").write_text("the answer")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.chown(scratch, sandbox.UID_BASE + 1, sandbox.UID_BASE + 1)
    sock = tmp_path / "sock"
    sock.mkdir()
    workdir = tmp_path / "course" / "autograded" / "alice" / "a1"
    spec = {
        "python": os.path.join(sys.prefix, "bin", "python"),
        "ro_paths": sorted({os.path.realpath(sys.base_prefix), sys.prefix}),
        "pythonpath": [], "scratch": str(scratch), "workdir": str(workdir),
        "socket_dir": str(sock), "uid": sandbox.UID_BASE + 1, "memory_bytes": 1 * 2**30,
        "nproc": 32, "fsize_bytes": 2**20, "tmp_bytes": 64 * 2**20, "wall_seconds": 60,
        "env": {"HOME": "/tmp/home"},
    }

    def run(code, timeout=60, **over):
        fd = os.open(os.devnull, os.O_RDONLY)
        try:
            cmd = sandbox.bwrap_command(dict(spec, **over), fd,
                                        command=[spec["python"], "-c", textwrap.dedent(code)])
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, pass_fds=(fd,))
        finally:
            os.close(fd)

    run.tmp, run.spec = tmp_path, spec
    return run


def test_sandbox_is_available_here():
    assert sandbox.why_unavailable() is None


def test_code_runs_unprivileged_without_capabilities(box):
    r = box("""
        import os
        status = open('/proc/self/status').read()
        caps = [l for l in status.splitlines() if l.startswith(('CapEff', 'CapBnd', 'NoNewPrivs'))]
        print(os.getuid(), os.getgid(), caps)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("60001 60001")
    assert "CapEff:\\t0000000000000000" in r.stdout and "NoNewPrivs:\\t1" in r.stdout


def test_the_known_escapes_fail(box):
    r = box("""
        import subprocess
        for cmd in (['mount', '-o', 'remount,rw', '/'], ['umount', '/tmp'], ['touch', '/etc/pwned'],
                    ['touch', '/usr/pwned']):
            print(cmd[-1], subprocess.run(cmd, capture_output=True).returncode)
    """)
    assert r.returncode == 0, r.stderr
    assert all(line.split()[-1] != "0" for line in r.stdout.splitlines()), r.stdout
    assert not os.path.exists("/etc/pwned") and not os.path.exists("/usr/pwned")


def test_only_the_scratch_folder_is_visible_and_writable(box):
    r = box(f"""
        import os
        print(os.getcwd())
        open('mine.txt', 'w').write('ok')
        print(os.path.exists({str(box.tmp / 'course' / 'solutions')!r}))
        print(sorted(os.listdir('/')))
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == box.spec["workdir"]
    assert lines[1] == "False"
    assert (box.tmp / "scratch" / "mine.txt").read_text() == "ok"


def test_no_network_even_to_the_hosts_loopback(box):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    r = box(f"""
        import socket
        try:
            socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')
        except OSError as e:
            print('refused', type(e).__name__)
    """)
    with pytest.raises(socket.timeout):
        server.accept()
    server.close()
    assert "refused" in r.stdout, r.stdout + r.stderr


def test_memory_limit_gives_a_clean_memory_error(box):
    r = box("""
        try:
            b = bytearray(2 * 2**30)
        except MemoryError:
            print('MemoryError')
    """)
    assert "MemoryError" in r.stdout, r.stderr


def test_process_limit(box):
    r = box("""
        import subprocess
        kids = []
        try:
            for _ in range(200):
                kids.append(subprocess.Popen(['sleep', '30']))
        except OSError as e:
            print('limited', len(kids))
    """)
    assert "limited" in r.stdout, r.stderr
    assert int(r.stdout.split()[-1]) < 32


def test_every_descendant_dies_with_the_sandbox(box):
    r = box("""
        import subprocess, sys
        subprocess.Popen([sys.executable, '-c', 'import os, time\\nos.setsid()\\ntime.sleep(300)'],
                         start_new_session=True)
        subprocess.Popen(['sleep', '300'])
        print('spawned')
    """)
    assert "spawned" in r.stdout
    time.sleep(0.5)
    ps = subprocess.run(["ps", "-eo", "uid="], capture_output=True, text=True).stdout.split()
    assert str(sandbox.UID_BASE + 1) not in ps


def test_wall_limit_kills_the_whole_sandbox(box):
    start = time.monotonic()
    r = box("import time\ntime.sleep(120)", wall_seconds=2)
    assert r.returncode != 0
    assert time.monotonic() - start < 30
