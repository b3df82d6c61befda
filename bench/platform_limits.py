"""What each assignment needs in a platform's container (`make bench`; issue 37 items 2 and 7).

For each assignment: the solution's answers uploaded to `python -m autograder gradescope` with
`--container-fallback`, run as the platforms run it (Docker's default capabilities, so bubblewrap
cannot start and the privilege drop grades; tests/grading/container_sim.py), in a cgroup of its
own, twice:
- at Gradescope's defaults (½ vCPU, 768 MB): the score, the wall and CPU seconds, the cgroup's
  peak memory and whether the OOM killer struck;
- without a memory limit (still ½ vCPU): the peak memory a grading really needs (the grader,
  nbgrader, the solution check and the student's kernel, which run one after another).
Each run is cold: a fresh course folder, so the solution check runs in it as on a container
whose image did not warm the cache. The README's table of limits comes from this output.

Usage: python bench/platform_limits.py [--capped-only] [--warm] [ASSIGNMENT ...]   (default: every
assignment; --capped-only: the 768 MB run alone; --warm: one more 768 MB row per assignment, a
submission graded after the image's warming run, as each student's is)
"""
import json
import os
import pathlib
import resource
import shutil
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "grading"))

import container_sim  # noqa: E402
import grading_helpers as H  # noqa: E402


def _cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def grade_in_container(assignment, memory_mb, cpus, warm=False):
    """(score, full, wall s, CPU s, peak MiB, OOM kills, the command's last stderr line).
    warm: the same upload is graded once first, untimed, in the same container, as setup.sh does
    while the image is built (same isolation, limits and CPU, so its verdict is reused); the
    figures are the second grading's: what each student's submission costs on the platform
    (the peak memory covers both)."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="limits-bench-"))
    try:
        course = H.make_course(root / "course", source=REPO / "solutions", assignments=[assignment])
        for package in ("autograder", "course_utils"):
            shutil.copytree(REPO / package, course / package, ignore=shutil.ignore_patterns("__pycache__"))
        upload = root / "submission"
        for name in sorted(p.name for p in (course / "solutions" / assignment).glob("*.ipynb")):
            upload.mkdir(exist_ok=True)
            import nbformat
            nbformat.write(H.honest(course, assignment, name), upload / name)
        results = root / "results" / "results.json"
        env = dict(os.environ, PYTHONPATH=str(course), HOME=str(root / "home"))
        command = [sys.executable, "-m", "autograder", "gradescope", str(upload), str(results),
                   "--course-root", str(course), "--assignment", assignment, "--container-fallback"]
        with container_sim.Container(memory_mb=memory_mb, cpus=cpus) as box:
            if warm:
                box.run(command, cwd=str(course), env=env, capture_output=True, text=True)
                results.unlink(missing_ok=True)
            start, cpu = time.monotonic(), _cpu()
            r = box.run(command, cwd=str(course), env=env, capture_output=True, text=True)
            seconds, cpu = time.monotonic() - start, _cpu() - cpu
        score = full = None
        if results.exists():
            data = json.loads(results.read_text())
            score, full = data.get("score"), sum(t["max_score"] for t in data.get("tests", []))
        last = (r.stderr.strip().splitlines() or [""])[-1][:160]
        return score, full, seconds, cpu, box.peak_mb, box.oom_kills, last
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    why = container_sim.why_not()
    if why:
        print(f"platform limits: cannot simulate a container here ({why})")
        return
    args = sys.argv[1:]
    capped_only, warm = "--capped-only" in args, "--warm" in args
    args = [a for a in args if a not in ("--capped-only", "--warm")]
    assignments = args or sorted(p.name for p in (REPO / "solutions").glob("[0-9][0-9]_*"))
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"Platform limits: the solution graded by the Gradescope command in a simulated container "
          f"(Docker's capabilities: privilege drop), cold cache, {os.cpu_count()} cores, load {load}")
    print(f"  {'assignment':24s} {'limits':>16s}  score    wall s   CPU s  peak MiB  OOM kills")
    for assignment in assignments:
        runs = ((768, "1/2 CPU, 768 MB", False),) + (() if capped_only else ((None, "1/2 CPU, no cap", False),))
        runs += ((768, "warm, 768 MB", True),) if warm else ()
        for memory_mb, label, warmed in runs:
            score, full, seconds, cpu, peak, ooms, last = grade_in_container(assignment, memory_mb, 0.5, warmed)
            shown = f"{score:g}/{full:g}" if score is not None and full else "none"
            print(f"  {assignment:24s} {label:>16s}  {shown:>6s}  {seconds:7.1f} {cpu:7.1f}  "
                  f"{(peak or 0):8.0f}  {ooms if ooms is not None else '?':>9}")
            if score is None or not full or score < full:
                print(f"      -> {last}")


if __name__ == "__main__":
    main()
