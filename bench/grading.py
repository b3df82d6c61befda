"""Benchmark of class grading (`make bench`).

For a synthetic class of honest students (the release of a real assignment with the solutions
filled in; the test fixture if the assignment is absent), prints:
- raw: executing the same notebooks one after another with nbclient (no nbgrader, no sandbox),
  as a student runs them and with the grading flag NBGRADER_EXECUTION set (what grading runs);
- grading with `python -m autograder grade --jobs 1`, then `--jobs 2`, on the same class;
- where one student's grading goes with one job: the worker's steps, and inside nbgrader's
  autograde the kernel's time in cells against the rest (kernel start, nbgrader, judging);
- the ratios: the class's grading per student / one notebook's own execution, with one job and
  with as many jobs as cores (the command's default; goal <= 0.6, issue 44), and jobs 1 / jobs 2
  (goal >= 1.7 on 2 cores).
Grading times are the student phase of the command (from its progress log); the fixed cost of a
run (nbgrader generate_assignment and the solution check, ~10-20 s) is printed separately.

Usage: python bench/grading.py [--students N] [--assignment ID]
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "grading"))

import grading_helpers as H  # noqa: E402


def _isolated_home(root):
    for var, sub in {"HOME": "home", "JUPYTER_CONFIG_DIR": "jc", "JUPYTER_DATA_DIR": "jd",
                     "JUPYTER_RUNTIME_DIR": "jr", "IPYTHONDIR": "ip", "MPLCONFIGDIR": "mpl"}.items():
        (root / sub).mkdir(parents=True, exist_ok=True)
        os.environ[var] = str(root / sub)


def raw_execution(paths, timeout, grading_flag):
    """Wall seconds to execute every notebook with plain nbclient, serially, each in a fresh
    kernel over IPC sockets as the grader's kernels talk, its client reading every message
    promptly (tests/run_notebook.py; plain nbclient sometimes waits out a whole cell timeout for a
    message that has arrived, which once made this baseline 47 s per notebook of 05 instead of 8,
    and the ratio below meaningless). grading_flag: with NBGRADER_EXECUTION set, as
    while grading (the notebooks then skip their costliest demonstrations), or without it, as a
    student runs them."""
    import nbformat

    from tests import run_notebook

    before = os.environ.pop("NBGRADER_EXECUTION", None)
    if grading_flag:
        os.environ["NBGRADER_EXECUTION"] = "autograde"
    start = time.monotonic()
    try:
        for path in paths:
            nb = nbformat.read(path, as_version=4)
            run_notebook.execute(nb, path.parent, timeout, allow_errors=True)
    finally:
        os.environ.pop("NBGRADER_EXECUTION", None)
        if before is not None:
            os.environ["NBGRADER_EXECUTION"] = before
    return time.monotonic() - start


def grading(subs, out, course, assignment, jobs):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out),
                        "--course-root", str(course), "--assignment", assignment, "--jobs", str(jobs),
                        "--regrade", "--gradebook", str(out.parent / f"gb{jobs}.db"),
                        # one verdict folder: the second command reuses the first's solution check
                        "--verdict-cache", str(out.parent / "verdicts")],
                       cwd=str(REPO), env=env, capture_output=True, text=True)
    total = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"grading failed:\n{r.stderr[-3000:]}")
    stamps = dict((m.group(2), float(m.group(1))) for m in
                  re.finditer(r"\[\s*([\d.]+) s\] (\S+)", r.stderr))
    # student phase: after the solution check, until merging starts
    phase = stamps["graded;"] - stamps["students:"]
    return total, phase, r


def _cell_seconds(nb_path):
    """(seconds the kernel spent in cells, from the first cell's start to the last one's end) of
    a graded notebook, from the execution times nbclient records in each cell's metadata."""
    import datetime
    import json

    def stamp(text):
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))

    inside, first, last = 0.0, None, None
    for cell in json.loads(pathlib.Path(nb_path).read_text())["cells"]:
        ran = cell.get("metadata", {}).get("execution", {})
        if "iopub.status.busy" in ran and "iopub.status.idle" in ran:
            start, end = stamp(ran["iopub.status.busy"]), stamp(ran["iopub.status.idle"])
            inside += (end - start).total_seconds()
            first, last = first or start, end
    return inside, ((last - first).total_seconds() if first else 0.0)


def where_the_time_goes(out, assignment):
    """Per student, the mean of each step the worker times (result.json) and, inside nbgrader's
    autograde, what the kernel spent running cells; the rest of autograde is the kernel's start
    in the sandbox, nbgrader's own steps and the judging between cells."""
    import json

    steps, cells, spans, n = {}, 0.0, 0.0, 0
    for result in sorted((out / ".work" / "shards" / assignment).glob("*/result.json")):
        data = json.loads(result.read_text())
        for step, seconds in (data.get("timing") or {}).items():
            steps[step] = steps.get(step, 0.0) + seconds
        for nb in (result.parent / "autograded").glob(f"*/{assignment}/*.ipynb"):
            inside, span = _cell_seconds(nb)
            cells, spans = cells + inside, spans + span
        n += 1
    if not n:
        return
    autograde = steps.get("autograde", 0.0) / n
    print(f"  where one student's grading goes (--jobs 1, mean of {n}): "
          + ", ".join(f"{k} {v / n:.2f} s" for k, v in sorted(steps.items())))
    print(f"    inside autograde: cells {cells / n:.2f} s (first cell to last {spans / n:.2f} s); "
          f"kernel start in the sandbox, nbgrader's steps and judging {autograde - spans / n:.2f} s")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--students", type=int, default=8)
    p.add_argument("--assignment", default="05_self_attention")
    p.add_argument("--timeout", type=int, default=120)
    args = p.parse_args()

    root = pathlib.Path(tempfile.mkdtemp(prefix="grading-bench-"))
    _isolated_home(root / "home")
    source = REPO / "solutions"
    if not (source / args.assignment).is_dir():
        print(f"(no solutions/{args.assignment}: using the test fixture)")
        source, args.assignment = H.FIXTURE, "00_fixture"
    course = H.make_course(root / "course", source=source, assignments=[args.assignment])
    nb_names = sorted(p.name for p in (course / "solutions" / args.assignment).glob("*.ipynb"))
    subs = root / "subs"
    paths = []
    for i in range(args.students):
        for name in nb_names:
            paths.append(H.write_student(subs, f"student{i:03d}", args.assignment, name,
                                         H.honest(course, args.assignment, name)))

    print(f"class: {args.students} students x {len(nb_names)} notebook(s) of {args.assignment}; "
          f"{os.cpu_count()} cores")
    own = raw_execution(paths, args.timeout, grading_flag=False)
    print(f"the notebooks as a student runs them, serial: {own:7.1f} s ({own / len(paths):.2f} s per notebook)")
    raw = raw_execution(paths, args.timeout, grading_flag=True)
    print(f"the same with the grading flag (NBGRADER_EXECUTION), serial: {raw:7.1f} s "
          f"({raw / len(paths):.2f} s per notebook)")
    results = {}
    for jobs in (1, 2):
        total, phase, _ = grading(subs, root / f"out{jobs}", course, args.assignment, jobs)
        results[jobs] = phase
        print(f"grading --jobs {jobs}: students {phase:7.1f} s ({phase / args.students:.2f} s per "
              f"student), whole command {total:.1f} s (fixed cost {total - phase:.1f} s)")
        if jobs == 1:
            where_the_time_goes(root / "out1", args.assignment)
    for jobs in (1, 2):
        per_student = results[jobs] / args.students
        print(f"grading per student (--jobs {jobs}) / one notebook's own execution: "
              f"{per_student / (own / len(paths) * len(nb_names)):.2f} as a student runs it, "
              f"{per_student / (raw / len(paths) * len(nb_names)):.2f} with the grading flag"
              + ("  (goal <= 0.6 with the default jobs, one per core)" if jobs == 2 else ""))
    print(f"speed-up 2 jobs vs 1: {results[1] / results[2]:.2f}  (goal >= 1.7)")


if __name__ == "__main__":
    main()
