"""Score: grade one student's assignment with nbgrader, in a private shard, in the sandbox.

Why a shard per student: SQLite is not safe for parallel writers (nbgrader #174), and a
disaster in one grading must not be able to touch another's results. Each (student, assignment)
gets its own folder holding a copy of the template gradebook, nbgrader's `submitted/`,
`autograded/` and `feedback/` steps, and the scratch folder the kernel sees. Only the batch
(single writer) merges shards into the course gradebook, at the end.

Why a long-lived worker process: each `nbgrader` command pays ~4 s of start-up, more than the
kernel needs for a small notebook. A worker imports nbgrader once and grades many students
through its Python API (`NbGraderAPI.autograde`, `generate_feedback`), one at a time, reading
tasks as JSON lines on stdin and answering on stdout. The batch kills and replaces a worker that
stops answering; the student it was grading is reported, never silently zeroed.
"""
import contextlib
import hashlib
import io
import json
import os
import resource
import shutil
import sys
import time
import traceback

from . import cellmeta, feedback_page, redact, sandbox, sanitize

KERNEL_NAME = "autograder-sandbox"
CASES_INSIDE = "/opt/course/hidden-cases.pt"  # where the sandbox sees the hidden-test cases


def kernel_spec(kernels_dir):
    """Write the sandbox kernelspec into kernels_dir/KERNEL_NAME; return its folder."""
    folder = os.path.join(kernels_dir, KERNEL_NAME)
    os.makedirs(folder, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-I", os.path.abspath(sandbox.__file__), "{connection_file}"],
        "display_name": "Python 3 (grading sandbox)",
        "language": "python",
        "interrupt_mode": "message",
        "env": {},
        "metadata": {"debugger": False},
    }
    with open(os.path.join(folder, "kernel.json"), "w") as fh:
        json.dump(spec, fh, indent=1)
    return folder


def _nbgrader_config(shard, task):
    from traitlets.config import Config
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute
    from .execute import SandboxedExecute

    limits = task["limits"]
    c = Config()
    c.CourseDirectory.root = shard
    c.CourseDirectory.source_directory = task["source_root"]
    c.CourseDirectory.db_url = "sqlite:///" + os.path.join(shard, "gradebook.db")
    c.Autograde.autograde_preprocessors = [
        SandboxedExecute if p is Execute else p for p in Autograde.class_traits()["autograde_preprocessors"].default()]
    c.Autograde.create_student = True
    c.OverwriteCells.add_missing_cells = True
    for section in ("Execute", "SandboxedExecute"):
        c[section].timeout = int(limits["timeout"])
        c[section].startup_timeout = 120
        c[section].iopub_timeout = 10
        c[section].shutdown_kernel = "immediate"
        c[section].error_on_timeout = {
            "ename": "Timeout", "evalue": f"This cell ran longer than {int(limits['timeout'])} s "
            "and was interrupted.", "traceback": [
                f"Timeout: This cell ran longer than {int(limits['timeout'])} s and was interrupted."]}
        if task.get("sandbox", True):
            c[section].kernel_name = KERNEL_NAME
    if task.get("cases_file"):
        c.SandboxedExecute.hidden_cases = task["cases_file"]
    c.SandboxedExecute.student_id = _numbers_for(task)
    if task.get("sandbox", True):
        c.KernelManager.transport = "ipc"
        c.KernelManager.ip = os.path.join(task["socket_dir"], "kernel")
    c.LimitOutput.max_lines = 1000
    # Outputs are the student's: no scripts or raw HTML of theirs in the feedback page.
    c.HTMLExporter.sanitize_html = True
    return c


def _chown_tree(path, uid):
    for root, dirs, files in os.walk(path):
        os.chown(root, uid, uid)
        for name in files:
            os.chown(os.path.join(root, name), uid, uid)


def _kernel_env(task, home, cases):
    """The kernel's whole environment: its own home, the grading flag, one thread per library."""
    return {
        "HOME": home, "IPYTHONDIR": home + "/.ipython",
        "JUPYTER_CONFIG_DIR": home + "/.jupyter", "JUPYTER_DATA_DIR": home + "/.local",
        "JUPYTER_RUNTIME_DIR": home + "/.runtime", "MPLCONFIGDIR": home + "/.mpl",
        "NBGRADER_EXECUTION": "autograde", "PATH": os.path.dirname(task["kernel_python"])
        + ":/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "MALLOC_ARENA_MAX": "2", "TQDM_DISABLE": "1",
        # Large buffers always from mmap and handed back when freed (glibc otherwise raises the
        # threshold after the first big free and keeps what is freed): a smaller peak.
        "MALLOC_MMAP_THRESHOLD_": "1048576",
        **({"COURSE_HIDDEN_CASES": cases} if task.get("cases_file") else {}),
        "COURSE_STUDENT_ID": _numbers_for(task),  # the notebook shows this student's numbers
    }



def _numbers_for(task):
    """The id whose think-first numbers this submission answers: the student's own, or "" for
    the example's (batch.Options.numbers_for)."""
    return task.get("numbers_for", task["student"])

def _sandbox_spec(task, scratch, workdir):
    limits = task["limits"]
    return {
        "python": task["kernel_python"],
        "ro_paths": task["ro_paths"],
        # The kernel's course_utils is a copy without reference/ (see batch.kernel_package),
        # mounted where the real one is; the hidden-test cases sit beside it, read-only.
        "ro_binds": [[task["kernel_package"], task["course_utils"]]] * bool(task.get("kernel_package"))
        + [[task["cases_file"], CASES_INSIDE]] * bool(task.get("cases_file")),
        "pythonpath": task["pythonpath"],
        "scratch": scratch,
        "workdir": workdir,
        "socket_dir": task["socket_dir"],
        "uid": task["uid"],
        "memory_bytes": limits["memory_bytes"],
        "nproc": limits["nproc"],
        "fsize_bytes": limits["fsize_bytes"],
        "tmp_bytes": limits["tmp_bytes"],
        "scratch_bytes": limits.get("scratch_bytes", 256 * 2**20),
        "wall_seconds": limits["wall"],
        "env": _kernel_env(task, "/tmp/home", CASES_INSIDE),
    }


def _dropped_spec(task, scratch):
    """The privilege drop's kernel (no namespaces): everything it may write lives in its slot's
    own folder (socket_dir, mode 700, owned by its uid): the sockets, a copy of the submission
    (its working folder), its home and temporary folder, and a copy of the hidden-test cases
    (inputs only, as the sandbox mounts them). The course_utils on its path is the copy without
    reference/; the real reference is unreadable to it (sandbox.harden_course)."""
    private = task["socket_dir"]
    workdir = os.path.join(private, "work")
    shutil.copytree(scratch, workdir)
    for sub in ("home", "tmp"):
        os.makedirs(os.path.join(private, sub))
    cases = os.path.join(private, "hidden-cases.pt")
    if task.get("cases_file"):
        shutil.copyfile(task["cases_file"], cases)
    _chown_tree(private, task["uid"])
    spec = _sandbox_spec(task, workdir, workdir)
    spec.update(mode="drop", private_dir=private,
                pythonpath=[os.path.dirname(task["kernel_package"])])
    spec["env"] = dict(_kernel_env(task, os.path.join(private, "home"), cases),
                       TMPDIR=os.path.join(private, "tmp"))
    return spec


def _locked_cells(nb):
    """grade_id -> source of the locked cells of a notebook (release or submission)."""
    found = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("locked") and meta.get("grade_id"):
            found.setdefault(meta["grade_id"], []).append(cell.source)
    return found


def check_cells(submitted, release):
    """Problems with the locked cells of a submission, compared with the student release."""
    problems = []
    sub, rel = _locked_cells(submitted), _locked_cells(release)
    for grade_id, sources in rel.items():
        got = sub.get(grade_id, [])
        if not got:
            problems.append(f"locked cell '{grade_id}' was deleted; the original was used for grading")
        elif len(got) > 1:
            problems.append(f"locked cell '{grade_id}' appears {len(got)} times; the duplicates "
                            "were ignored")
        elif got[0].strip() != sources[0].strip():
            problems.append(f"locked cell '{grade_id}' was edited; the original was used for grading")
    return problems


_GRADER_SIDE = ("KernelDied", "Timeout")  # errors execute.py and nbgrader's timeout give a cell


def grader_failure(graded, release):
    """A sentence when the grading environment, not the student, stopped the notebook, else None.

    The kernel never started (every cell unrun), or a cell the student did not write (neither an
    answer cell nor a test cell, and its source as released) died or ran out of time: such a
    cell fails the same way for every submission, the solution included, so the environment
    (too little memory, a machine too slow for the time limit) cannot grade this assignment. A
    test cell is not counted: it runs the student's answer, whose slowness is theirs."""
    stopped = str(graded.metadata.get("autograder_stopped", ""))
    code = [c for c in graded.cells if c.cell_type == "code"]
    if stopped and code and all(any(o.get("ename") == "NotRun" for o in c.get("outputs", [])) for c in code):
        return f"the kernel did not start or stopped before the first cell ({stopped})"
    released = {c.source.strip() for c in release.cells if c.cell_type == "code"} if release else set()
    for index, cell in enumerate(graded.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("solution") or meta.get("grade"):
            continue
        errors = [o.get("ename") for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if any(e in _GRADER_SIDE for e in errors) and cell.source.strip() in released:
            what = "died (out of memory, or past the notebook's time limit)" if "KernelDied" in errors \
                else "ran past the per-cell time limit"
            return (f"cell {index} ({meta.get('grade_id') or 'a cell of the release'}), which the student "
                    f"did not write, {what}: this environment cannot run the assignment's own code")
    return None


def normalize(nb):
    """Make a submission safe for nbgrader's sanitizers; in place.

    A cell repeating an earlier grade_id, or carrying nbgrader metadata without one, loses that
    metadata (what nbgrader's DeduplicateIds means to do; in 0.9.6 it leaves a half-stripped
    cell that crashes OverwriteCells.add_missing_task_cells). Such cells then count for nothing,
    and missing graded cells are restored from the gradebook.
    """
    seen = set()
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader")
        if meta is None:
            continue
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        if not grade_id or grade_id in seen:
            del cell.metadata["nbgrader"]
            continue
        seen.add(grade_id)
    return nb


def _scores(db_url, assignment, student):
    from nbgrader.api import Gradebook
    cells = []
    with Gradebook(db_url) as gb:
        submission = gb.find_submission(assignment, student)
        for nb in submission.notebooks:
            for grade in nb.grades:
                cells.append({"notebook": nb.name, "grade_id": grade.name,
                              "score": float(grade.score), "max_score": float(grade.max_score)})
    cells.sort(key=lambda r: (r["notebook"], r["grade_id"]))
    return cells


class _Shard:
    """The folders of one grading, all under the shard: nbgrader's course root (its `submitted/`,
    `autograded/` and `feedback/` steps, its gradebook) and the scratch copy the kernel sees."""

    def __init__(self, task):
        self.root, self.student, self.assignment = task["shard"], task["student"], task["assignment"]
        self.submitted = os.path.join(self.root, "submitted", self.student, self.assignment)
        self.graded = os.path.join(self.root, "autograded", self.student, self.assignment)
        self.feedback = os.path.join(self.root, "feedback", self.student, self.assignment)
        self.scratch = os.path.join(self.root, "scratch")
        self.gradebook = os.path.join(self.root, "gradebook.db")

    def make_fresh(self):
        """An empty shard: nothing of an earlier grading of this student may count."""
        if os.path.isdir(self.root):
            shutil.rmtree(self.root)
        os.makedirs(self.submitted)
        os.makedirs(self.scratch)


class _Stopwatch:
    """Seconds spent in each step of a grading, each measured from the end of the one before."""

    def __init__(self):
        self.started = time.monotonic()
        self.laps = {}

    def lap(self, step):
        self.laps[step] = time.monotonic() - self.started - sum(self.laps.values())

    def rounded(self):
        return {step: round(seconds, 2) for step, seconds in self.laps.items()}

    def total(self):
        return round(time.monotonic() - self.started, 2)


def _notebooks(task):
    """The submission's notebook file names, sorted."""
    return sorted(name for name in task["files"] if name.endswith(".ipynb"))


def _read_release(task, name):
    """The student release of a notebook, or None when the assignment has no such notebook.
    Read once per grading: the batch wrote it before any worker started, in a folder no kernel
    can write (and cellmeta.restore, check_cells and grader_failure only read it)."""
    import nbformat
    path = os.path.join(task["release_root"], task["assignment"], name)
    return nbformat.read(path, as_version=4) if os.path.exists(path) else None


class _Staged:
    """What staging a submission found: problems for problems.csv; each notebook's release; and,
    for check_cells, each notebook as the student sent it (duplicate cells included) with the
    metadata an editor dropped given back, so a restored cell is not reported as deleted."""

    def __init__(self):
        self.problems, self.releases, self.as_sent = [], {}, {}


def _stage_submission(task, shard):
    """Copy the student's files into nbgrader's `submitted/` (notebooks made safe for nbgrader and
    their cell metadata restored from the release) and, untouched, into the kernel's scratch."""
    import nbformat
    staged = _Staged()
    for name, path in task["files"].items():
        if name.endswith(".ipynb"):
            nb = normalize(nbformat.read(path, as_version=4))
            release = staged.releases[name] = _read_release(task, name)
            if release is not None:
                staged.problems.extend(f"{name}: {p}" for p in cellmeta.restore(nb, release))
                staged.as_sent[name] = nbformat.read(path, as_version=4)
                cellmeta.restore(staged.as_sent[name], release)
            nbformat.write(nb, os.path.join(shard.submitted, name))
        else:
            shutil.copyfile(path, os.path.join(shard.submitted, name))
        shutil.copyfile(path, os.path.join(shard.scratch, name))
    return staged


def _copy_assignment_files(task, scratch):
    """The assignment's other files (data the notebooks open), beside the submission in scratch."""
    src_assignment = os.path.join(task["source_root"], task["assignment"])
    for root, _, files in os.walk(src_assignment):
        for name in files:
            if name.endswith(".ipynb") or ".ipynb_checkpoints" in root:
                continue
            rel = os.path.relpath(os.path.join(root, name), src_assignment)
            os.makedirs(os.path.dirname(os.path.join(scratch, rel)), exist_ok=True)
            shutil.copyfile(os.path.join(root, name), os.path.join(scratch, rel))


def _prepare_kernel(task, scratch):
    """Tell the kernel nbgrader will start where and how it runs (through this process's
    environment, which the sandbox's launcher and jupyter_client read)."""
    if not task.get("sandbox", True):
        # Unsandboxed (trusted submissions only): the kernel inherits this environment.
        if task.get("cases_file"):
            os.environ["COURSE_HIDDEN_CASES"] = task["cases_file"]
        os.environ["COURSE_STUDENT_ID"] = _numbers_for(task)
        return
    # A fresh socket folder per student: whatever the last kernel left there (files,
    # folders, sockets) must not reach or break the next student.
    shutil.rmtree(task["socket_dir"], ignore_errors=True)
    os.makedirs(task["socket_dir"])
    os.chmod(task["socket_dir"], 0o700)
    os.chown(task["socket_dir"], task["uid"], task["uid"])
    if task.get("isolation") == "drop":
        sandbox.kill_user(task["uid"])  # nothing of an earlier kernel may meet this one
        spec = _dropped_spec(task, scratch)
    else:
        _chown_tree(scratch, task["uid"])
        inside = "/home/student/" + task["assignment"]  # no host path of the course shows inside
        spec = _sandbox_spec(task, scratch, inside)
    os.environ[sandbox.ENV_VAR] = json.dumps(spec)
    # jupyter_client finds kernelspecs in $JUPYTER_PATH/kernels/<name>/kernel.json
    os.environ["JUPYTER_PATH"] = os.path.dirname(task["kernels_dir"])


def _autograde(api, task, log):
    """nbgrader's autograde of the shard's submission, its chatter into `log`; nbgrader's outcome."""
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        try:
            return api.autograde(task["assignment"], task["student"], force=True, create=True)
        finally:
            if task.get("isolation") == "drop":
                # Without a PID namespace, what the kernel started (a daemon, a process waiting
                # to rewrite a result) outlives it: every process of its uid dies before any
                # result is read or written.
                sandbox.kill_user(task["uid"])


def _not_autograded(result, outcome):
    """The result of a submission nbgrader could not autograde, with its last word and its log."""
    result["status"] = "could_not_grade"
    detail = (outcome.get("error") or outcome.get("log") or "").strip().splitlines()
    result["problems"].append("nbgrader could not autograde this submission: "
                              + (detail[-1] if detail else "unknown error"))
    result["log"] = (outcome.get("log") or "")[-4000:]
    return result


class _CellSentences:
    """What the graded test cells said, for grades_by_cell.csv and the class report: each cell's
    first error (or the judge's partial-credit sentence), keyed (notebook, grade_id)."""

    def __init__(self):
        self.first = {}  # the test cell's first error, or the judge's sentence for a partly credited cell
        self.partial = {}  # the judge's sentence for a partly credited cell

    def read(self, nb_name, graded):
        """Read one graded notebook; returns (tampering sentences, grade_ids of cells that timed out)."""
        tampering, timed_out = set(), []
        for cell in graded.cells:
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            # A partly credited cell has no error output: its sentence is the judge's (written in
            # this process, after the kernel ran; judge.PARTS_KEY).
            parts = cell.get("metadata", {}).get("autograder_parts")
            if gid and isinstance(parts, dict) and parts.get("message"):
                self.partial[(nb_name, gid)] = str(parts["message"])[:1000]
                self.first.setdefault((nb_name, gid), f"GradingError: {str(parts['message'])}"[:1000])
            for output in cell.get("outputs", []):
                if output.get("output_type") != "error":
                    continue
                if gid:
                    self.first.setdefault((nb_name, gid), f"{output.get('ename')}: {output.get('evalue')}"[:1000])
                if output.get("ename") == "TamperError":
                    tampering.add(str(output.get("evalue", "")).strip())
                elif output.get("ename") == "Timeout":
                    timed_out.append(gid)
        return tampering, timed_out

    def annotate(self, rows):
        """Give each grades_by_cell row its message (and its partial-credit sentence, if any)."""
        for row in rows:
            key = (row["notebook"], row["grade_id"])
            row["message"] = self.first.get(key, "")
            if key in self.partial:
                row["partial_message"] = self.partial[key]


def _review_graded_notebook(task, shard, name, staged, sentences, result):
    """Read one graded notebook for what the instructor must hear (a stop, the environment's
    failure, timeouts, tampering, edited locked cells), collect its cells' sentences, and redact
    it for feedback (written back in place). Problems go into result["problems"]."""
    import nbformat
    from .execute import BROKEN_KEY

    problems = result["problems"]
    graded_path = os.path.join(shard.graded, name)
    if not os.path.exists(graded_path):
        problems.append(f"{name}: nbgrader wrote no graded notebook")
        return
    graded = nbformat.read(graded_path, as_version=4)
    stopped = graded.metadata.get(BROKEN_KEY)
    if stopped:
        problems.append(f"{name}: {stopped}; the cells after it were not run and scored zero")
    release = staged.releases.get(name)
    failure = grader_failure(graded, release)
    if failure:
        result["grader_failure"] = f"{name}: {failure}"
        problems.append(f"{name}: the grading environment could not run this notebook: {failure}. "
                        "This grade may be the environment's, not the student's: regrade with "
                        "more memory or a longer --timeout")
    nb_name = name[:-len(".ipynb")]
    tampering, timed_out = sentences.read(nb_name, graded)
    if not stopped:  # after a stop, the stop says it all
        problems.extend(f"{name}: cell {gid or '(unnamed)'} ran longer than {task['limits']['timeout']} s "
                        "and was interrupted" for gid in timed_out)
    problems.extend(f"{name}: {message}" for message in sorted(tampering))
    if release is not None:
        try:
            problems.extend(f"{name}: {p}" for p in check_cells(staged.as_sent[name], release))
        except Exception:  # noqa: BLE001 - a broken notebook was already reported by nbgrader
            pass
    if redact.redact_notebook(graded, task.get("secret_lines", {}).get(nb_name, [])):
        problems.append(f"{name}: an output quoted the hidden tests and was removed from feedback")
    nbformat.write(graded, graded_path)


def _finish_feedback_pages(task, shard, result, generated):
    """Improve and sanitize each notebook's feedback page; withhold a page that would reveal a
    hidden test. `generated`: whether nbgrader's generate_feedback said it succeeded."""
    secret = task.get("secret_lines", {})
    for name in _notebooks(task):
        nb_name = name[:-len(".ipynb")]
        html_path = os.path.join(shard.feedback, nb_name + ".html")
        if not os.path.exists(html_path):
            result["problems"].append(f"{name}: no feedback was generated"
                                      + ("" if generated else " (nbgrader generate_feedback failed)"))
            continue
        with open(html_path, encoding="utf-8") as fh:
            rows = [r for r in result["cells"] if r["notebook"] == nb_name]
            text = sanitize.clean_page(feedback_page.improve(fh.read(), rows))  # sanitizer last
        with open(html_path, "w", encoding="utf-8") as fh:
            fh.write(text)
        if redact.leaks(text, secret.get(nb_name, [])):
            os.remove(html_path)
            result["problems"].append(f"{name}: feedback withheld because it would reveal hidden tests")
            continue
        result["feedback"][name] = html_path


def grade(task):
    """Grade one (student, assignment). Returns the result dict (also written to result.json).

    The steps: a fresh shard; the submission staged for nbgrader and the kernel; the kernel's
    sandbox; nbgrader's autograde; each graded notebook reviewed and redacted; the scores and
    sentences of its cells; nbgrader's feedback, improved and checked for leaks."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    stopwatch = _Stopwatch()
    shard = _Shard(task)
    shard.make_fresh()
    staged = _stage_submission(task, shard)
    _copy_assignment_files(task, shard.scratch)
    shutil.copyfile(task["template_db"], shard.gradebook)
    _prepare_kernel(task, shard.scratch)

    config = _nbgrader_config(shard.root, task)
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    log = io.StringIO()
    stopwatch.lap("setup")
    outcome = _autograde(api, task, log)
    stopwatch.lap("autograde")
    result = {"student": task["student"], "assignment": task["assignment"], "fingerprint": task["fingerprint"],
              "status": "graded", "cells": [], "problems": staged.problems, "feedback": {}}
    if not outcome.get("success"):
        return _not_autograded(result, outcome)

    result["cells"] = _scores("sqlite:///" + shard.gradebook, task["assignment"], task["student"])
    sentences = _CellSentences()
    for name in _notebooks(task):
        _review_graded_notebook(task, shard, name, staged, sentences, result)
    sentences.annotate(result["cells"])
    stopwatch.lap("redact")
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        feedback = api.generate_feedback(task["assignment"], task["student"], force=True)
    stopwatch.lap("feedback")
    result["timing"] = stopwatch.rounded()
    _finish_feedback_pages(task, shard, result, feedback.get("success"))
    result["seconds"] = stopwatch.total()
    return result


def _clean_up(task):
    """Delete what only the grading needed (the kernel's copy of the submission, nbgrader's
    `submitted/` copy, the sockets); keep what the results need: result.json, the shard
    gradebook (merged later), the graded notebook and the feedback."""
    for path in (os.path.join(task["shard"], "scratch"), os.path.join(task["shard"], "submitted"),
                 task.get("socket_dir")):
        if path:
            shutil.rmtree(path, ignore_errors=True)


# The worker's own memory limit, the last line of defence behind the output and probe budgets
# (execute.py) and the record limits (probe.py): an address-space limit (RLIMIT_AS, soft only,
# so the kernel's prlimit can still set its own) of what the worker had after its imports plus
# the kernel's --memory plus WORKER_HEADROOM_BYTES. Going over it raises MemoryError in the
# worker: that student is could_not_grade with MEMORY_PROBLEM in problems.csv, what the grading
# held is freed with it, and the worker goes on with the next student (each task sets the limit
# afresh). Should the worker die instead (a C library aborting), the batch reports that
# student alone and starts a new worker.
WORKER_HEADROOM_BYTES = 2**30
MEMORY_PROBLEM = ("grading this submission needed more memory than the grader allows itself "
                  "({:.1f} GiB; its output or hidden-test results were too large), so it was not "
                  "graded: look at the notebook by hand")
_BASE = {}


def _address_space():
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _limit_own_memory(task):
    """Set the worker's address-space limit for this task; return it in bytes (0: none)."""
    base = _BASE.setdefault("vm", _address_space())
    if not base:
        return 0
    limit = base + int(task["limits"]["memory_bytes"]) + WORKER_HEADROOM_BYTES
    test = os.environ.get("AUTOGRADER_TEST_WORKER_MEMORY_MB", "")  # tests only: "student:MB"
    if test.partition(":")[0] == task["student"]:
        limit = _address_space() + int(test.partition(":")[2]) * 2**20
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return limit


def _memory_result(task, limit, log=""):
    return {"student": task["student"], "assignment": task["assignment"],
            "fingerprint": task["fingerprint"], "status": "could_not_grade", "cells": [],
            "feedback": {}, "problems": [MEMORY_PROBLEM.format(limit / 2**30)], "log": log[-4000:],
            "worker_memory_exceeded": True}


def run_task(task):
    if os.environ.get("AUTOGRADER_TEST_CRASH_ON") == task["student"]:
        os._exit(70)  # tests only: a worker that dies (say, killed by the OOM killer)
    limit = 0
    try:
        limit = _limit_own_memory(task)
        result = grade(task)
        if limit and result.get("status") == "could_not_grade" and "MemoryError" in result.get("log", ""):
            result = _memory_result(task, limit, result.get("log", ""))
    except MemoryError:
        result = None  # built below, once what the grading held is freed
        mem_log = traceback.format_exc()[-4000:]
    except Exception as exc:  # noqa: BLE001 - reported, never fatal to the batch
        result = {"student": task["student"], "assignment": task["assignment"],
                  "fingerprint": task["fingerprint"], "status": "could_not_grade", "cells": [],
                  "feedback": {}, "problems": [f"internal grading error: {type(exc).__name__}: {exc}"],
                  "log": traceback.format_exc()[-4000:]}
    finally:
        os.environ.pop(sandbox.ENV_VAR, None)
        os.environ.pop("COURSE_HIDDEN_CASES", None)
        _clean_up(task)
    if result is None:
        import gc
        gc.collect()
        result = _memory_result(task, limit, mem_log)
    # The worker's peak memory so far (a student printing gigabytes must not raise it much).
    result["worker_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    os.makedirs(task["shard"], exist_ok=True)
    tmp = os.path.join(task["shard"], "result.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(result, fh, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(task["shard"], "result.json"))
    return result


def main():
    """Serve tasks: one JSON object per stdin line, one JSON reply per stdout line."""
    # The task and reply pipes move to private, non-inheritable descriptors; fds 0 and 1 become
    # /dev/null and the log, so no kernel (which inherits 0-2) can read tasks or forge replies.
    import nbformat  # noqa: F401  (warm up: import nbgrader before the first task arrives)
    from nbgrader.apps import NbGraderAPI  # noqa: F401
    from . import execute  # noqa: F401
    tasks = os.fdopen(os.dup(0), "r")
    out = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)
    sys.stdout = sys.stderr
    for line in tasks:
        if not line.strip():
            continue
        task = json.loads(line)
        result = run_task(task)
        out.write(json.dumps({"done": task["shard"], "status": result["status"]}) + "\n")
        out.flush()


def fingerprint(paths, extra=""):
    h = hashlib.sha256(extra.encode())
    for path in sorted(paths):
        h.update(os.path.basename(path).encode())
        with open(path, "rb") as fh:
            h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


if __name__ == "__main__":
    main()
