"""Where a pytest run's CPU goes, test by test and module by module: a pytest plugin (issue 44).

    python -m pytest -p bench.cpu_per_test tests/grading

prints, at the end of the run, the modules and the tests that kept the machine busiest. Why the
machine's CPU and not the test process's own: a grading test spends its CPU in processes the
test never waits for (a batch's workers, their sandboxed kernels, bubblewrap's children), and
`RUSAGE_CHILDREN` counts only descendants reaped all the way up; measured on the grading suite,
it saw 379 of the 1,007 CPU-seconds the machine spent. The price: the figure is everything the
machine ran while the test ran, so run nothing beside it and no `-n` (two workers' tests would
share each other's CPU). Wall time (`--durations`) says which test waits; this says which one
computes. Figures only, never pass/fail.
"""
import collections
import os
import time

import pytest

from bench.cpu_by_process import busy_seconds

_rows = []  # (test id, machine CPU seconds, wall seconds)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = busy_seconds(), time.perf_counter()
    yield
    _rows.append((item.nodeid, busy_seconds() - cpu, time.perf_counter() - wall))


def summary(rows, top=15):
    """The lines printed at the end: totals, the costliest modules, the costliest tests."""
    modules = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for test, cpu, wall in rows:
        module = modules[test.split("::")[0]]
        module[0], module[1], module[2] = module[0] + cpu, module[1] + wall, module[2] + 1
    lines = [f"machine CPU while the tests ran: {sum(r[1] for r in rows):.0f} CPU-s in "
             f"{sum(r[2] for r in rows):.0f} s of tests ({os.cpu_count()} cores)", "by module:"]
    for name, (cpu, wall, count) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"  {cpu:7.1f} CPU-s {wall:7.1f} s {count:5d} tests  {name}")
    lines.append("by test (setup, call and teardown together):")
    for test, cpu, wall in sorted(rows, key=lambda r: -r[1])[:top]:
        lines.append(f"  {cpu:7.1f} CPU-s {wall:7.1f} s  {test}")
    return lines


def pytest_terminal_summary(terminalreporter):
    if not _rows:
        terminalreporter.write_line("cpu_per_test: no test ran in this process (with -n, run without it)")
        return
    terminalreporter.section("CPU per test (the whole machine's, bench/cpu_per_test.py)")
    for line in summary(_rows):
        terminalreporter.write_line(line)
