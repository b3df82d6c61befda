"""`make bench`: figures, never pass/fail. Prints how long each source notebook takes to run
top to bottom, the class report's time, every topic's own figures (`bench/topic_*.py`, each a
script that prints what its notebook's issue asks to measure), then the grading benchmark."""
import pathlib
import runpy
import sys
import time

import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[1]


def describe_machine():
    """What the timings below depend on: the CPU, its cores, the kernels PyTorch picked, and the time
    of one small PyTorch step on one thread (the course's models are made of such steps, so this
    figure, more than the clock rate, says how fast they train here)."""
    import os
    import platform

    import torch

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    cell, x, h = torch.nn.GRUCell(64, 64), torch.randn(8, 64), torch.zeros(8, 64)
    with torch.no_grad():
        for _ in range(200):
            h = cell(x, h)
        start = time.perf_counter()
        for _ in range(2000):
            h = cell(x, h)
        step = (time.perf_counter() - start) / 2000
    torch.set_num_threads(before)
    print(f"machine: {model}, {os.cpu_count()} cores, PyTorch {torch.__version__} on its "
          f"{torch.backends.cpu.get_cpu_capability()} kernels; one GRU step (batch 8, 64 units, one thread): "
          f"{step * 1e6:.1f} us")


def time_notebooks():
    """Each source notebook in a fresh kernel over IPC sockets, as the grader runs it, its client
    reading every message promptly (tests/run_notebook.py says why)."""
    sys.path.insert(0, str(ROOT))
    from tests.run_notebook import execute

    print("notebook run time (top to bottom, fresh kernel; goal: <= 30 s each, <= 200 s in all):")
    total = 0.0
    for path in sorted(ROOT.glob("solutions/[0-9][0-9]_*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        execute(nb, path.parent)
        seconds = time.perf_counter() - start
        total += seconds
        print(f"  {path.relative_to(ROOT)}: {seconds:.1f} s")
    print(f"  the whole course: {total:.1f} s")


def time_class_report(students=60):
    """The class report over a synthetic class of 60 students x 2 notebooks (goal: <= 5 s)."""
    import tempfile

    from autograder import report

    results = []
    for assignment in ("05_self_attention", "08_masking_transformer"):
        exercises = report.load_catalogue(assignment)
        for i in range(students):
            cells = []
            for j, (grade_id, exercise) in enumerate(sorted(exercises.items())):
                mistake = exercise.mistakes[(i + j) % len(exercise.mistakes)] if i % 3 else None
                cells.append({"notebook": assignment, "grade_id": grade_id + "_tests", "max_score": 2.0,
                              "score": 0.0 if mistake else 2.0,
                              "message": f"GradingError: {mistake.message}" if mistake else ""})
            results.append({"student": f"s{i}", "assignment": assignment, "status": "graded", "cells": cells})
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        report.write(results, out)
        print(f"class report, {students} students x 2 notebooks: {time.perf_counter() - start:.2f} s")


def main():
    describe_machine()
    time_notebooks()
    time_class_report()
    for topic_bench in sorted((ROOT / "bench").glob("topic_*.py")):
        print(f"== {topic_bench.name}")
        sys.argv = [str(topic_bench)]
        runpy.run_path(str(topic_bench), run_name="__main__")
    grading_bench = ROOT / "bench" / "grading.py"
    if grading_bench.exists():
        sys.argv = [str(grading_bench)]
        runpy.run_path(str(grading_bench), run_name="__main__")
    sys.argv = [str(ROOT / "bench" / "platforms.py")]  # Gradescope throughput (issue 33), default assignment
    runpy.run_path(sys.argv[0], run_name="__main__")
    # every assignment at a platform's limits, cold (issue 37) and warm (issue 44)
    sys.argv = [str(ROOT / "bench" / "platform_limits.py"), "--warm"]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
