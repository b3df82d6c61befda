"""The platform commands' watchman: a small parent process that outlives the grading.

Why: on Gradescope and PrairieLearn the grader runs in a container with a hard memory limit, and
the grading process (nbgrader, PyTorch, the judge) is what the kernel's OOM killer picks when a
notebook needs more than the container has. A process killed that way writes nothing: Gradescope
then shows "autograder failed" (right: never a score), but PrairieLearn reads results.json only
after a zero exit and shows its student "Unknown error". So `python -m autograder gradescope|
prairielearn ...` runs here first: stdlib only (a few MB, nothing worth killing), it starts the
real command as a child and waits. When the child ends normally (0, 2, 130) its status is passed
on; when it dies (a signal, an uncaught error), the guard makes it a refusal the platform shows:
no Gradescope results.json (exit 2), a not-gradable PrairieLearn result (exit 0). Either way,
when it runs as root it then kills every process of the fallback's student uid, which a killed
grader could not do.

The child tells the guard where its results go (the parsed arguments) through a small file
named by AUTOGRADER_GUARD_FILE, so the guard needs no copy of the command's argument parser.
"""
import json
import os
import subprocess
import sys
import tempfile

CHILD_VAR = "AUTOGRADER_PLATFORM_CHILD"
FILE_VAR = "AUTOGRADER_GUARD_FILE"
PLATFORMS = ("gradescope", "prairielearn")
NORMAL = (0, 2, 130)

REFUSAL = ("The grader could not run, so your submission was not graded (this is not about your "
           "work and uses no attempt). Your instructor has the details.")


def wanted(argv):
    """Whether this invocation should run under the guard."""
    return len(argv) > 1 and argv[1] in PLATFORMS and not os.environ.get(CHILD_VAR)


def tell_guard(platform, results_json, uids=()):
    """Called by the child once its arguments are parsed, and again with the student uids it
    ran kernels as (the privilege drop's), so that the guard can end them if the child dies."""
    path = os.environ.get(FILE_VAR)
    if path:
        with open(path, "w") as fh:
            json.dump({"platform": platform, "results": os.path.abspath(results_json), "uids": list(uids)}, fh)


def _why(code):
    if code < 0:
        name = {9: "SIGKILL: most often the container's out-of-memory killer"}.get(-code, f"signal {-code}")
        return f"the grading process was killed ({name})"
    return f"the grading process stopped with status {code} (an error it did not handle)"


def run(argv):
    fd, guard_file = tempfile.mkstemp(prefix="autograder-guard-")
    os.close(fd)
    env = dict(os.environ, **{CHILD_VAR: "1", FILE_VAR: guard_file})
    try:
        try:
            code = subprocess.call([sys.executable, "-m", "autograder", *argv[1:]], env=env)
        except KeyboardInterrupt:
            code = 130
        try:
            with open(guard_file) as fh:
                told = json.load(fh)
        except (OSError, ValueError):
            told = None
    finally:
        os.remove(guard_file)
    _kill_students((told or {}).get("uids", ()))
    if code in NORMAL:
        return code
    print(f"autograder: grading refused: {_why(code)}; nothing of it is a grade", file=sys.stderr)
    if not told:
        return 2
    results = told["results"]
    if told["platform"] == "gradescope":
        if os.path.exists(results):
            os.remove(results)
        return 2
    os.makedirs(os.path.dirname(results), exist_ok=True)
    tmp = results + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"gradable": False, "tests": [], "message": REFUSAL, "format_errors": [REFUSAL]}, fh)
        fh.write("\n")
    os.replace(tmp, results)
    return 0


def _kill_students(uids):
    if os.geteuid() != 0 or not uids:
        return
    from . import sandbox  # stdlib only
    try:
        for uid in uids:
            sandbox.kill_user(int(uid))
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"autograder: could not end every student process: {exc}", file=sys.stderr)
