"""Throughput of the Gradescope command (`make bench`; issue 33 item 5).

Seconds per submission through `python -m autograder gradescope SUBMISSION_DIR RESULTS_JSON`,
beside the per-student time of the class batch (`python -m autograder grade`), for one assignment:
- cold: the first run, in a fresh process, with a fresh course folder and a fresh home (nothing
  prepared or cached yet: what a submission costs when setup built nothing);
- warm: the second and third runs of the same upload in the same course folder, which then holds
  the cache the first run left (`<course>/.autograder-cache`: the release, the template gradebook,
  the solution check's verdict; autograder/platforms.py): what a submission costs once setup has
  graded one notebook in the image, and on a regrade. The table says what each run took from it;
  beside wall seconds it gives CPU seconds (user + system of the command and every process under
  it), which a loaded machine inflates far less;
- batch: `grade --jobs 1` on a class of 3 students, per student (the student phase from the
  command's progress log, and the whole command divided by 3).
Every upload is the assignment's release with the solutions' answer cells (as in
tests/grading/test_platforms.py), so each scores full marks; a lower score stops the bench. The
course folder holds copies of autograder/ and course_utils/ beside solutions/, as the Gradescope
zip does, and the commands run from it.

Usage: python bench/platforms.py [ASSIGNMENT]   (default 05_self_attention)
"""
import json
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "grading"))

import grading_helpers as H  # noqa: E402

STUDENTS = 3


def _isolated_env(root, course):
    """A fresh home for the commands (no Jupyter or IPython state carried from this machine),
    and the course's own copy of the code first on the path."""
    env = dict(os.environ, PYTHONPATH=str(course))
    for var, sub in {"HOME": "home", "JUPYTER_CONFIG_DIR": "jc", "JUPYTER_DATA_DIR": "jd",
                     "JUPYTER_RUNTIME_DIR": "jr", "IPYTHONDIR": "ip", "MPLCONFIGDIR": "mpl"}.items():
        (root / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(root / sub)
    return env


def _cpu():
    """CPU seconds (user + system) of the finished child processes and their descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def gradescope(env, upload, results, course, assignment, extra):
    """(wall seconds, CPU seconds, what came from the cache) of one gradescope run in a new
    process."""
    if results.exists():
        results.unlink()
    start, cpu = time.monotonic(), _cpu()
    r = subprocess.run([sys.executable, "-m", "autograder", "gradescope", str(upload), str(results),
                        "--course-root", str(course), "--assignment", assignment, *extra],
                       cwd=str(course), env=env, capture_output=True, text=True)
    seconds, cpu = time.monotonic() - start, _cpu() - cpu
    if r.returncode != 0 or not results.exists():
        sys.exit(f"the gradescope command failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    data = json.loads(results.read_text())
    full = sum(t["max_score"] for t in data["tests"])
    if not data["tests"] or data["score"] < full:
        sys.exit(f"the solution's answers scored {data['score']}/{full} on Gradescope:\n"
                 + json.dumps(data, indent=1)[:3000])
    cached = re.search(r"from the cache: ([^)]*)\)", r.stderr)
    return seconds, cpu, cached.group(1) if cached else "nothing"


def batch(env, subs, out, course, assignment):
    """(whole command seconds, its CPU seconds, student phase seconds) of `grade --jobs 1`."""
    start, cpu = time.monotonic(), _cpu()
    r = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out),
                        "--course-root", str(course), "--assignment", assignment, "--jobs", "1",
                        "--regrade", "--gradebook", str(out.parent / "batch-gradebook.db")],
                       cwd=str(course), env=env, capture_output=True, text=True)
    total, cpu = time.monotonic() - start, _cpu() - cpu
    if r.returncode != 0:
        sys.exit(f"the grade command failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    stamps = {m.group(2): float(m.group(1)) for m in re.finditer(r"\[\s*([\d.]+) s\] (\S+)", r.stderr)}
    return total, cpu, stamps["graded;"] - stamps["students:"]


def main():
    assignment = sys.argv[1] if len(sys.argv) > 1 else "05_self_attention"
    if not (REPO / "solutions" / assignment).is_dir():
        sys.exit(f"no solutions/{assignment}")
    # Where bubblewrap cannot run, grade as Gradescope's containers do (run_autograder's default).
    extra = ["--container-fallback"] if H.sandbox_unavailable() else []
    root = pathlib.Path(tempfile.mkdtemp(prefix="platforms-bench-"))
    course = H.make_course(root / "course", source=REPO / "solutions", assignments=[assignment])
    # The code as it is now, copied beside solutions/ as in the Gradescope zip: an edit to the
    # working tree during the bench changes neither the figures nor the cache's keys.
    for package in ("autograder", "course_utils"):
        shutil.copytree(REPO / package, course / package, ignore=shutil.ignore_patterns("__pycache__"))
    names = sorted(p.name for p in (course / "solutions" / assignment).glob("*.ipynb"))
    upload = root / "upload"
    for name in names:
        H.write_student(root, "upload", assignment, name, H.honest(course, assignment, name))
    upload = upload / assignment
    subs = root / "subs"
    for i in range(STUDENTS):
        for name in names:
            H.write_student(subs, f"student{i:03d}", assignment, name, H.honest(course, assignment, name))

    env = _isolated_env(root / "home", course)
    results = root / "results" / "results.json"
    try:
        runs = [gradescope(env, upload, results, course, assignment, extra) for _ in range(3)]
        total, cpu, phase = batch(env, subs, root / "out", course, assignment)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    cores = os.cpu_count()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"Gradescope throughput: {assignment} ({len(names)} notebook(s)), {cores} cores, "
          f"load average {load}" + (" (no sandbox here: --container-fallback)" if extra else ""))
    rows = [("gradescope, cold (1st run, fresh course and home)", *runs[0]),
            ("gradescope, warm (2nd run, same course)", *runs[1]),
            ("gradescope, warm (3rd run, same course)", *runs[2]),
            (f"grade --jobs 1, {STUDENTS} students: whole command / {STUDENTS}", total / STUDENTS,
             cpu / STUDENTS, ""),
            (f"grade --jobs 1, {STUDENTS} students: student phase / {STUDENTS}", phase / STUDENTS, None, "")]
    width = max(len(row[0]) for row in rows)
    print(f"  {'per submission':<{width}}  wall s   CPU s  taken from the cache")
    for label, seconds, cpu, cached in rows:
        print(f"  {label:<{width}}  {seconds:6.1f}  " + (f"{cpu:6.1f}" if cpu is not None else " " * 6)
              + f"  {cached}")
    print(f"  (the batch's fixed cost, generate_assignment and the solution check once for the "
          f"class: {total - phase:.1f} s)")


if __name__ == "__main__":
    main()
