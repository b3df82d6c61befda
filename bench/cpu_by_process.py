"""Where a command's CPU goes, by kind of process: `python bench/cpu_by_process.py -- make test`.

Why: `make test` is CPU-bound on two cores (96 % of the machine busy from start to end), so its
time is its CPU, and pytest's --durations cannot say whose CPU it is: a test's time is spent in
kernels, browsers, grading workers and `alembic` commands it starts. This runs the command while
reading /proc twice a second (each process's own user + system time and its command line), then
prints the CPU of each kind of process (notebook kernels by who started them, pytest workers,
Chromium, the grader's batches and workers, ...) and how many there were. Figures, never
pass/fail. A process that lives less than half a second may be missed; its CPU then shows in
nobody's row, so the rows add up to a little less than the machine's busy time printed last.

The same code spent from 2,500 to 4,700 CPU-seconds on this workplace's shared host from one
day to the next, so a figure alone says little: before and after the command it times a fixed
piece of pure Python (`yardstick`), and prints both, so two runs compare by the ratio of their
yardsticks as well as by their own figures.
"""
import collections
import os
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def _read(pid):
    """(command line, parent pid, own CPU seconds, start tick) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return cmd, int(fields[1]), (int(fields[11]) + int(fields[12])) / HZ, fields[19]


def yardstick():
    """CPU seconds of a fixed pure-Python loop, the best of three: how fast this host is now."""
    best = float("inf")
    for _ in range(3):
        start, total = time.process_time(), 0
        for i in range(3_000_000):
            total += i * i
        best = min(best, time.process_time() - start)
    return best


def busy_seconds():
    """CPU seconds every core has spent busy since boot (not idle, not waiting on I/O)."""
    with open("/proc/stat") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / HZ


KINDS = (  # (what the command line holds, the row it counts in), first match wins
    ("autograder.worker", "grading worker"), ("-m autograder", "grading batch or platform command"),
    ("chrom", "Chromium"), ("jupyterhub", "JupyterHub"), ("configurable-http-proxy", "JupyterHub proxy"),
    ("jupyter-lab", "Jupyter server"), ("jupyter_server", "Jupyter server"), ("singleuser", "Jupyter server"),
    ("nbgrader", "nbgrader command"), ("alembic", "alembic command"), ("pip", "pip"),
    ("bwrap", "bubblewrap"), ("sandbox.py", "bubblewrap"), ("execnet", "pytest worker"),
    ("import sys;exec(eval(sys.stdin.readline()))", "pytest worker"), ("pytest", "pytest"),
)


def kind(cmd, parent_cmd):
    if "ipykernel_launcher" in cmd:
        parent_program = os.path.basename(parent_cmd.split()[0]) if parent_cmd.split() else ""
        # bubblewrap's own command line holds the kernel's: its program name decides first
        if parent_program in ("bwrap", "timeout"):
            return "notebook kernel (grading sandbox)"
        if "ipykernel_launcher" in parent_cmd:
            return "notebook kernel's forked worker (training in parallel)"
        for mark, name in (("autograder", "grading, no sandbox"), ("jupyter", "JupyterLab"),
                           ("run_notebook", "tests/run_notebook.py")):
            if mark in parent_cmd:
                return f"notebook kernel ({name})"
        return "notebook kernel (pytest: nbval and others)"
    return next((name for mark, name in KINDS if mark in cmd), "other")


def main(command):
    seen, first = {}, {}  # (pid, start) -> [cmd, ppid, cpu]; CPU already used when first seen
    for pid in filter(str.isdigit, os.listdir("/proc")):
        got = _read(pid)
        if got:
            first[(pid, got[3])] = got[2]
    before = yardstick()
    busy0, t0 = busy_seconds(), time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            got = _read(pid)
            if got:
                cmd, ppid, cpu, start = got
                entry = seen.setdefault((pid, start), [cmd, ppid, cpu])
                entry[0], entry[2] = cmd or entry[0], cpu
        time.sleep(0.5)
    wall, busy = time.monotonic() - t0, busy_seconds() - busy0
    by_pid = {pid: entry for (pid, _), entry in seen.items()}
    rows, counts = collections.Counter(), collections.Counter()
    for key, (cmd, ppid, cpu) in seen.items():
        name = kind(cmd, by_pid.get(str(ppid), ["", 0, 0])[0])
        rows[name] += cpu - first.get(key, 0.0)
        counts[name] += 1
    print(f"\n{' '.join(command)}: exit {proc.returncode}, {wall:.0f} s, {busy:.0f} CPU-seconds busy on "
          f"{os.cpu_count()} cores ({busy / wall / os.cpu_count():.0%} of the machine)")
    for name, cpu in rows.most_common():
        if cpu >= 1:
            print(f"  {cpu:7.0f} CPU-s  {counts[name]:5d} processes  {name}")
    print(f"yardstick (3 M additions in pure Python, best of 3): {before:.3f} CPU-s before the command, "
          f"{yardstick():.3f} after")
    return proc.returncode


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit(__doc__)
    sys.exit(main(args))
