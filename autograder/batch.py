"""The batch: intake -> prepare -> check the solution -> grade in parallel -> merge -> export.

Why it is built this way:
- The batch process never runs student code and never lets a worker write where another could
  read: workers are separate processes (own session, so a signal to the batch's process group
  cannot come from them), each grading one student at a time into a private shard
  (see worker.py). The batch is the only writer of the course gradebook and of the CSVs.
- Before any student, the assignment's own solution notebook is graded in the same sandbox. If
  it does not score full marks (say, the hidden tests' `import course_utils.reference` fails
  inside the sandbox), the run stops with an error instead of producing a class of zeros. A
  full-marks verdict is kept (verdict.py) and reused while nothing it depends on changes: a rerun,
  or another batch pointed at the same `--verdict-cache`, does not pay for the check again.
- Every finished student leaves `result.json` in its shard, keyed by a fingerprint of the
  submission, the assignment source and the limits; a rerun skips those (resume) unless
  `--regrade`. CSVs are rebuilt from the results, sorted, so two runs give identical files.
"""
import importlib.util
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field

from . import (export, gradebook_head, hidden_cases, intake, redact, report, sandbox, template_cache, verdict,
               worker)
from .intake import Problem

SOLUTION_STUDENT = intake.SOLUTION_STUDENT


class GradingRefused(Exception):
    """The batch cannot be graded honestly (no sandbox, a solution that fails its own tests)."""


@dataclass
class Options:
    submissions: str
    out: str
    course_root: str
    source_directory: str = "solutions"
    gradebook: str = ""
    assignments: list = field(default_factory=list)
    jobs: int = 0
    timeout: int = 60
    wall: int = 600
    memory_bytes: int = 4 * 2**30
    nproc: int = 64
    regrade: bool = False
    unsafe_no_sandbox: bool = False
    # Where bubblewrap cannot start (a platform's container), run student code as an unprivileged
    # user without namespaces (sandbox.drop_command) instead of refusing. Never as root.
    container_fallback: bool = False
    # Grade in this process instead of a worker process (platforms: one submission, one job). The
    # worker's imports (nbgrader, PyTorch: about 290 MB) then exist once instead of twice, which a
    # 768 MB container needs; what is lost is only the batch's protection of other students
    # from a grading that takes its process down, and there is no other student.
    in_process: bool = False
    # {student folder: the id whose think-first numbers the submission answers}; "" for the
    # example's numbers (a platform upload with no id: the notebook showed the example). A student
    # not listed answers their folder's own numbers.
    numbers_for: dict = field(default_factory=dict)
    lms_pattern: str = intake.DEFAULT_LMS_PATTERN
    max_file_bytes: int = 20 * 2**20
    progress: bool = True
    # Where full-marks solution verdicts are kept (verdict.py); "" means $AUTOGRADER_VERDICT_CACHE,
    # else the batch's private work folder.
    verdict_cache: str = ""

    def limits(self):
        return {"timeout": self.timeout, "wall": self.wall, "memory_bytes": self.memory_bytes,
                "nproc": self.nproc, "fsize_bytes": 512 * 2**20, "tmp_bytes": 512 * 2**20,
                "scratch_bytes": 256 * 2**20}


def course_assignments(source_root):
    """{assignment_id: [notebook file names]} found in the source folder."""
    found = {}
    if not os.path.isdir(source_root):
        return found
    for name in sorted(os.listdir(source_root)):
        path = os.path.join(source_root, name)
        if os.path.isdir(path) and not name.startswith("."):
            nbs = sorted(f for f in os.listdir(path) if f.endswith(".ipynb"))
            if nbs:
                found[name] = nbs
    return found


def _on_every_worker(handles, serve):
    """Run serve(slot, handle) in one thread per worker (slots from 1) until all return."""
    threads = [threading.Thread(target=serve, args=(i + 1, h), daemon=True)
               for i, h in enumerate(handles)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():  # a timed join, so that Ctrl-C reaches this thread at once
            t.join(0.5)


def _course_utils_dir(course_root):
    local = os.path.join(course_root, "course_utils")
    if os.path.isfile(os.path.join(local, "__init__.py")):
        return os.path.realpath(local)
    import importlib.util
    spec = importlib.util.find_spec("course_utils")
    if spec is None or not spec.origin:
        raise GradingRefused("the course_utils package is not installed; the tests need it")
    return os.path.realpath(os.path.dirname(spec.origin))


def generate(source_root, release_root, db_path, assignment, work):
    """nbgrader generate_assignment (its Python API, in this process) into a private release
    folder and the given gradebook: creates or updates the assignment, its notebooks and cells.
    The course's own notebooks/ is never written."""
    from traitlets.config import Config
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    gradebook_head.install()  # a new gradebook without the `alembic` command (1 s each)
    root = os.path.dirname(release_root)
    os.makedirs(root, exist_ok=True)
    c = Config()
    c.CourseDirectory.root = root
    c.CourseDirectory.source_directory = source_root
    c.CourseDirectory.release_directory = release_root
    c.CourseDirectory.db_url = "sqlite:///" + db_path
    c.GenerateAssignment.force = True
    c.ClearOutput.enabled = True
    saved = {k: os.environ.get(k) for k in ("PATH", "HOME")}
    # nbgrader runs the `alembic` command when it creates a gradebook
    os.environ["PATH"] = os.path.join(sys.prefix, "bin") + os.pathsep + os.environ.get("PATH", "")
    os.environ["HOME"] = _plain_env(work)["HOME"]
    cwd = os.getcwd()
    try:
        api = NbGraderAPI(coursedir=CourseDirectory(config=c), config=c)
        result = api.generate_assignment(assignment, force=True, create=True)
    finally:
        os.chdir(cwd)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if not result["success"]:
        raise GradingRefused(f"nbgrader generate_assignment failed for {assignment}: "
                             + ((result.get("log") or "") + (result.get("error") or ""))[-3000:])


_generate = generate


def _plain_env(work):
    env = dict(os.environ)
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    env.update(PATH=os.path.join(sys.prefix, "bin") + os.pathsep + env.get("PATH", "/usr/bin:/bin"),
               HOME=home, JUPYTER_CONFIG_DIR=os.path.join(home, ".jupyter"),
               JUPYTER_DATA_DIR=os.path.join(home, ".local"),
               JUPYTER_RUNTIME_DIR=os.path.join(home, ".runtime"),
               IPYTHONDIR=os.path.join(home, ".ipython"), MPLCONFIGDIR=os.path.join(home, ".mpl"),
               PYTHONPATH=os.pathsep.join(
                   [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
                   + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]))
    env.pop(sandbox.ENV_VAR, None)
    env.pop("NBGRADER_EXECUTION", None)
    env.setdefault("MALLOC_MMAP_THRESHOLD_", "1048576")  # freed large buffers go back (worker.py)
    return env


class WorkerHandle:
    """One worker process (own session) that grades tasks sent as JSON lines."""

    def __init__(self, env, cwd, log_path):
        self.env, self.cwd, self.log_path, self.proc = env, cwd, log_path, None
        self.stopped = False  # after stop(): never start a worker again (Ctrl-C)
        self.guard = threading.Lock()

    def _start(self):
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.worker"], cwd=self.cwd,
                                     env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, start_new_session=True)
        self.buffer = b""

    def warm(self):
        """Start the process now, so that its imports overlap other work."""
        with self.guard:
            if not self.stopped and (self.proc is None or self.proc.poll() is not None):
                self._start()

    def run(self, task, deadline):
        """The reply dict, or None when the worker died or passed the deadline (then killed)."""
        self.warm()
        proc = self.proc
        if proc is None:  # stopped
            return None
        try:
            proc.stdin.write((json.dumps(task) + "\n").encode())
            proc.stdin.flush()
        except (OSError, ValueError):
            self.kill()
            return None
        end = time.monotonic() + deadline
        fd = proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = end - time.monotonic()
            if left <= 0:
                self.kill()
                return None
            try:
                ready, _, _ = select.select([fd], [], [], min(left, 5))
                chunk = os.read(fd, 65536) if ready else None
            except (OSError, ValueError):  # the worker was stopped under us
                chunk = b""
            if chunk is not None:
                if not chunk:
                    self.kill()
                    return None
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def kill(self):
        with self.guard:
            proc, self.proc = self.proc, None
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            self.log.close()

    def stop(self):
        """Kill the worker now (its kernels die with it) and start no other."""
        self.stopped = True
        self.kill()

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


class InProcessWorker:
    """WorkerHandle's interface, grading in this process (Options.in_process). A grading that
    kills this process leaves no results file at all: the platform reports the grader's failure,
    never a score."""

    def __init__(self):
        self.stopped = False

    def warm(self):
        pass

    def run(self, task, deadline):
        if self.stopped:
            return None
        result = worker.run_task(task)
        return {"done": task["shard"], "status": result["status"]}

    def stop(self):
        self.stopped = True

    def close(self):
        pass


class Batch:
    # Whether a solution check whose notebook the environment could not run (worker.grader_failure:
    # a demo cell out of time or memory) refuses the batch; a class run only warns (problems.csv
    # names it for every student it touches), a platform refuses (one upload, no second look).
    strict_environment = False

    def __init__(self, opts):
        self.o = opts
        self.course_root = os.path.abspath(opts.course_root)
        self.source_root = os.path.join(self.course_root, opts.source_directory)
        self.gradebook = opts.gradebook or os.path.join(self.course_root, "gradebook.db")
        self.out = os.path.abspath(opts.out)
        self.work = os.path.join(self.out, ".work")
        self.problems = []
        self.export_failures = []
        self.resumed = 0
        self.reused_verdicts = set()  # assignments whose solution check was not run again
        self.t0 = time.monotonic()
        self.say = ((lambda m: print(f"[{time.monotonic() - self.t0:6.1f} s] {m}", file=sys.stderr))
                    if opts.progress else (lambda m: None))

    def tell(self, message):
        """A line said even with --quiet: which verdict of the solution check the batch used."""
        if self.o.progress:
            self.say(message)
        else:
            print(f"autograder: {message}", file=sys.stderr)

    # -- steps -------------------------------------------------------------------------------
    def check_sandbox(self):
        """How student code is isolated: "bwrap" (the sandbox), "drop" (an unprivileged user
        without namespaces, only with container_fallback where bubblewrap cannot start) or
        False (--unsafe-no-sandbox). Raises GradingRefused when neither can run."""
        if self.o.unsafe_no_sandbox:
            print("autograder: WARNING: --unsafe-no-sandbox: student code runs as this user, "
                  "unconfined; only for submissions you trust.", file=sys.stderr)
            return False
        reason = sandbox.why_unavailable()
        if not reason:
            return "bwrap"
        if self.o.container_fallback:
            no_drop = sandbox.why_no_drop()
            if not no_drop:
                sandbox.claim_drop_uids()
                print(f"autograder: bubblewrap cannot run here ({reason}); --container-fallback: "
                      f"student code runs as an unprivileged user (uid {sandbox.slot_uid(1, 'drop')}, no "
                      "capabilities, no_new_privs) without namespaces, the course's answers made "
                      "unreadable to it", file=sys.stderr)
                return "drop"
            raise GradingRefused(f"cannot isolate student code: bubblewrap cannot run ({reason}) and "
                                 f"neither can the privilege drop ({no_drop}); student code would run "
                                 "as root beside the answers, so nothing was graded.")
        raise GradingRefused(f"cannot sandbox student code: {reason}. Grading unsandboxed lets "
                             "one submission read the hidden tests and destroy the gradebook; "
                             "pass --unsafe-no-sandbox only if you trust every submission.")

    def _harden(self):
        """The privilege drop has no mount namespace: what the student's uid must not read or
        write is made private to root before any student code runs (sandbox.harden_course)."""
        keep = sandbox.top_names_holding(self.course_root, [sys.prefix, sys.base_prefix,
                                                            os.path.realpath(sys.executable)])
        sandbox.harden_course(self.course_root, keep=keep)
        # The course's package, and the one the Python environment imports (an editable install's
        # finder resolves course_utils.reference there even when the kernel's path starts with
        # the copy without it).
        installed = importlib.util.find_spec("course_utils")
        for package in {self.course_utils, os.path.dirname(installed.origin) if installed else ""}:
            reference = os.path.join(package, "reference")
            if package and os.path.isdir(reference):
                os.chmod(reference, 0o700)
        for path in (self.out, self.work):
            os.chmod(path, 0o700)
        # (What an earlier run left running as a slot's uid is killed by the worker before that
        # slot's first kernel starts: worker.grade.)

    def prepare(self, assignment):
        """Template gradebook, private release and hidden lines for one assignment."""
        db, release, source_fp = self._template(assignment)
        cases_file = os.path.join(self.work, "cases", assignment + ".pt")
        cases_fp = self._write_cases(assignment, cases_file)
        secret = self._secret_lines(assignment, release)
        fp = worker.fingerprint([], source_fp + cases_fp + json.dumps(self.o.limits(), sort_keys=True))
        return {"template_db": db, "release_root": release, "secret_lines": secret, "fp": fp,
                "cases_file": cases_file}

    def _template(self, assignment):
        """(template gradebook, release folder, fingerprint of the source): nbgrader's
        generate_assignment, run again only when solutions/ changed since the last run."""
        tdir = os.path.join(self.work, "templates")
        os.makedirs(tdir, exist_ok=True)
        db = os.path.join(tdir, assignment + ".db")
        release = os.path.join(self.work, "course", "release")
        src_dir = os.path.join(self.source_root, assignment)
        sources = [os.path.join(root, f) for root, _, files in os.walk(src_dir) for f in files
                   if ".ipynb_checkpoints" not in root]
        source_fp = worker.fingerprint(sources, assignment)
        stamp = os.path.join(tdir, assignment + ".source")
        fresh = (os.path.exists(db) and os.path.isdir(os.path.join(release, assignment))
                 and os.path.exists(stamp) and open(stamp).read() == source_fp)
        if not fresh:  # the template follows solutions/: regenerated whenever the source changes
            for path in (db, stamp):
                if os.path.exists(path):
                    os.remove(path)
            kept_key = template_cache.key(source_fp, self.course_utils) if self.verdicts else None
            if kept_key and template_cache.restore(self.verdicts, assignment, kept_key, db, release):
                self.say(f"{assignment}: nbgrader's template of this source is reused")
            else:
                _generate(self.source_root, release, db, assignment, self.work)
                if kept_key:
                    template_cache.keep(self.verdicts, assignment, kept_key, db, release)
            with open(stamp, "w") as fh:
                fh.write(source_fp)
        return db, release, source_fp

    def _write_cases(self, assignment, cases_file):
        """Write the hidden tests' cases the sandbox is given; their fingerprint. Warns about
        test cells without a hidden check (only the kernel would decide them)."""
        src_dir = os.path.join(self.source_root, assignment)
        cases_fp, unchecked = hidden_cases.write_cases(
            [os.path.join(src_dir, nb) for nb in self.assignments[assignment]], cases_file)
        if unchecked:
            self.say(f"{assignment}: WARNING: {len(unchecked)} graded test cell(s) have no hidden "
                     f"catalogue check, so only the student's kernel says whether they passed: "
                     + ", ".join(unchecked))
        return cases_fp

    def _secret_lines(self, assignment, release):
        """{notebook: hidden lines the student has not seen} (not those the release shows too):
        what no output or feedback page may quote."""
        import nbformat
        src_dir = os.path.join(self.source_root, assignment)
        secret = {}
        for nb_name in self.assignments[assignment]:
            nb = nbformat.read(os.path.join(src_dir, nb_name), as_version=4)
            released = os.path.join(release, assignment, nb_name)
            released = nbformat.read(released, as_version=4) if os.path.exists(released) else None
            secret[nb_name[:-6]] = redact.secret_lines(nb, released)
        return secret

    def _task(self, student, assignment, files, shard, slot):
        prep = self.prepared[assignment]
        return {
            "student": student, "assignment": assignment, "files": files, "shard": shard,
            "numbers_for": self.o.numbers_for.get(student, student),
            "template_db": prep["template_db"], "release_root": prep["release_root"],
            "secret_lines": prep["secret_lines"], "source_root": self.source_root,
            "fingerprint": worker.fingerprint(list(files.values()), prep["fp"] + (
                f"numbers:{self.o.numbers_for[student]}" if student in self.o.numbers_for else "")),
            "limits": self.o.limits(), "sandbox": bool(self.sandboxed),
            "isolation": self.sandboxed or "none",
            "kernels_dir": os.path.join(self.work, "kernels"),
            "socket_dir": os.path.join(self.sockets, f"slot{slot}"),
            "uid": sandbox.slot_uid(slot, self.sandboxed), "kernel_python": os.path.join(sys.prefix, "bin", "python"),
            "ro_paths": self.ro_paths, "pythonpath": [os.path.dirname(self.course_utils)],
            "cases_file": prep["cases_file"], "course_utils": self.course_utils,
            "kernel_package": self.kernel_package,
        }

    def _deadline(self, task):
        return self.o.wall * max(1, len(task["files"])) + 240

    def check_solutions(self, assignments, handles):
        """check_solution for every assignment, one per worker at a time (a batch of twelve
        assignments no longer waits for twelve solution runs in a row); the first refusal, in
        assignment order, stops the batch."""
        pending = queue.Queue()
        for assignment in assignments:
            pending.put(assignment)
        refused = {}

        def serve(slot, handle):
            while not handle.stopped:
                try:
                    assignment = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    self.check_solution(assignment, handle, slot)
                except GradingRefused as exc:
                    refused[assignment] = exc

        _on_every_worker(handles, serve)
        for assignment in assignments:
            if assignment in refused:
                raise refused[assignment]

    def check_solution(self, assignment, handle, slot=1):
        files = {nb: os.path.join(self.source_root, assignment, nb)
                 for nb in self.assignments[assignment]}
        shard = os.path.join(self.work, "solution_check", assignment)
        task = self._task(SOLUTION_STUDENT, assignment, files, shard, slot)
        verdict_key = verdict.key(task, isolation=self.sandboxed, strict=self.strict_environment,
                                  course_utils=self.course_utils, folder=self.verdicts) if self.verdicts else None
        kept = verdict.reused(self.verdicts, assignment, verdict_key) if self.verdicts else None
        if kept:
            self.reused_verdicts.add(assignment)
            self.tell(f"{assignment}: the solution's verdict from {kept['time']} is reused "
                      "(nothing it depends on changed)")
            return
        self.tell(f"{assignment}: grading the solution notebook in the sandbox first ...")
        reply = handle.run(task, self._deadline(task))
        result = _read_result(shard) if reply else None
        got, full = self._judge_solution(assignment, shard, result)
        if self.verdicts and not result.get("grader_failure"):
            verdict.keep(self.verdicts, assignment, verdict_key, got, full)

    def _judge_solution(self, assignment, shard, result):
        """(score, full marks) of the solution check's result; GradingRefused unless full marks."""
        if not result or result["status"] != "graded":
            why = "; ".join(result["problems"]) if result else "the grading worker stopped"
            raise GradingRefused(f"{assignment}: the solution notebook could not be graded ({why}).")
        if result.get("grader_failure") and self.strict_environment:
            raise GradingRefused(f"{assignment}: the solution notebook could not be run here "
                                 f"({result['grader_failure']}); no submission can be graded fairly.")
        got = sum(c["score"] for c in result["cells"])
        full = sum(c["max_score"] for c in result["cells"])
        if got < full or full == 0:
            failing = [c["grade_id"] for c in result["cells"] if c["score"] < c["max_score"]]
            detail = _failing_messages(shard, SOLUTION_STUDENT, assignment)
            raise GradingRefused(
                f"{assignment}: the solution notebook scores {got:g}/{full:g} in the grading sandbox "
                f"(failing: {', '.join(failing) or 'no graded cells'}). Every student would be graded "
                f"wrong, so nothing was graded. {detail}")
        return got, full

    def _verdict_folder(self):
        """Where verdicts are kept, or None (said why) when that folder could be reached by
        student code: then every solution check runs."""
        given = verdict.chosen_folder(self.o.verdict_cache, self._default_verdict_folder())
        folder, why = verdict.private_folder(given)
        if why:
            print(f"autograder: WARNING: solution verdicts are not kept or reused: {why}", file=sys.stderr)
        return folder

    def _default_verdict_folder(self):
        return os.path.join(self.work, "verdicts")

    def run(self):
        self.sandboxed = self.check_sandbox()
        self.assignments = self._course_assignments()
        os.makedirs(self.work, exist_ok=True)
        self.course_utils = _course_utils_dir(self.course_root)
        self.verdicts = self._verdict_folder()
        # Kernel sockets live in a short, neutral folder: bound into each sandbox at the same
        # path, it must not reveal (or sit under) the output folder; AF_UNIX paths are short.
        self.sockets = tempfile.mkdtemp(prefix="autograder-")
        try:  # removed even when preparing the kernels fails (a refused batch leaves nothing)
            self._prepare_kernels()
            return self._run()
        finally:
            shutil.rmtree(self.sockets, ignore_errors=True)

    def _course_assignments(self):
        """The course's assignments; refuses a course without any, or a request for one it lacks."""
        assignments = course_assignments(self.source_root)
        if not assignments:
            raise GradingRefused(f"no assignments found in {self.source_root}")
        unknown = [a for a in self.o.assignments if a not in assignments]
        if unknown:
            raise GradingRefused(f"unknown assignment(s): {', '.join(unknown)} (known: "
                                 f"{', '.join(assignments)})")
        return assignments

    def _prepare_kernels(self):
        """What every kernel is started with: the kernelspec, the read-only paths, and the
        kernel's course_utils, a copy without the reference, mounted over the real one (bwrap) or
        first on the kernel's path from a folder its uid can reach (drop)."""
        package_root = self.work
        if self.sandboxed == "drop":
            self._harden()
            os.chmod(self.sockets, 0o711)  # the slots' own folders are reachable, not listable
            package_root = os.path.join(self.sockets, "pkg")
            os.makedirs(package_root)
            os.chmod(package_root, 0o755)
        self.kernel_package = hidden_cases.kernel_package(
            self.course_utils, os.path.join(package_root, "kernel_package", "course_utils"))
        if self.sandboxed == "drop":
            os.chmod(os.path.dirname(self.kernel_package), 0o755)
        self.ro_paths = sorted({os.path.realpath(sys.base_prefix), os.path.abspath(sys.prefix),
                                os.path.realpath(sys.prefix)})
        worker.kernel_spec(os.path.join(self.work, "kernels"))

    def _run(self):
        taken, graded_assignments = self._intake()
        self.prepared = {a: self.prepare(a) for a in graded_assignments}
        self.say("assignments prepared (nbgrader generate_assignment)")
        results = self._grade(taken, graded_assignments)
        self.say("graded; merging into the course gradebook")
        self._write_results(taken, results, graded_assignments)
        return results

    def _intake(self):
        """(the submissions taken in, the assignments to grade): those asked for, else every
        assignment someone handed in (or tried to)."""
        taken = intake.collect(self.o.submissions, os.path.join(self.work, "intake"),
                               self.assignments, lms_pattern=self.o.lms_pattern,
                               max_file_bytes=self.o.max_file_bytes,
                               only=set(self.o.assignments) or None)
        self.problems += taken.problems
        graded_assignments = sorted(set(self.o.assignments) or
                                    {s.assignment for s in taken.submissions} |
                                    {a for _, a in taken.attempted})
        self.say(f"intake: {len(taken.submissions)} submission(s), {len(taken.problems)} problem(s)")
        return taken, graded_assignments

    def _workers(self):
        """(the workers, how many jobs): worker processes, or this process (Options.in_process)."""
        jobs = self.o.jobs or os.cpu_count() or 1
        env = _plain_env(self.work)
        if not self.o.in_process:
            return [WorkerHandle(env, self.work, os.path.join(self.work, f"worker{i + 1}.log"))
                    for i in range(jobs)], jobs
        # What a worker process would get: a private home and Jupyter folders, no grading flag.
        for key in ("HOME", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                    "IPYTHONDIR", "MPLCONFIGDIR", "MALLOC_MMAP_THRESHOLD_"):
            os.environ[key] = env[key]
        os.environ.pop("NBGRADER_EXECUTION", None)
        return [InProcessWorker()], jobs

    def _grade(self, taken, graded_assignments):
        """Check each assignment's solution, then grade every submission, on the workers."""
        handles, jobs = self._workers()
        try:
            for h in handles:
                h.warm()
            self.check_solutions(graded_assignments, handles)
            self.say(f"students: grading {len(taken.submissions)} submission(s) with {jobs} job(s)")
            return self.grade_all(taken.submissions, handles)
        except BaseException:
            # Ctrl-C or a crash: stop every worker now (their kernels die with them) instead
            # of waiting for each to finish its student.
            for h in handles:
                h.stop()
            raise
        finally:
            for h in handles:
                h.close()

    def _write_results(self, taken, results, graded_assignments):
        """The course gradebook, the CSVs and feedback, and the class report; what fails in one
        is said, never fatal to the others."""
        try:
            self.merge(results)
        except Exception as exc:  # noqa: BLE001 - the CSVs are still complete and correct
            self.problems.append(Problem("", "", "the course gradebook could not be updated "
                                         f"({type(exc).__name__}: {str(exc)[:300]}); the CSVs and "
                                         "feedback are complete, the gradebook is unchanged"))
        self.export_failures = export.write_all(self, taken, results, graded_assignments)
        try:  # what the class got wrong: mistakes.csv, report.html, class_overview.html (instructor only)
            report.write(results.values(), self.out, release_root=os.path.join(self.work, "course", "release"),
                         secret_lines={a: p["secret_lines"] for a, p in self.prepared.items()},
                         late=getattr(getattr(self, "export_settings", None), "late", None))
        except Exception as exc:  # noqa: BLE001 - the grades are complete; the report is extra
            self.export_failures.append(f"report.html / mistakes.csv: {type(exc).__name__}: {str(exc)[:300]}")
        self.say("exported" if not self.export_failures else "export incomplete")

    def _already_graded(self, submissions):
        """(results kept from an earlier run, tasks left to grade): a submission whose shard holds
        a graded result with the same fingerprint is not graded again unless --regrade."""
        results, todo = {}, []
        for sub in submissions:
            shard = os.path.join(self.work, "shards", sub.assignment, sub.student_id)
            task = self._task(sub.student_id, sub.assignment, sub.files, shard, 1)
            old = _read_result(shard)
            if (old and not self.o.regrade and old.get("fingerprint") == task["fingerprint"]
                    and old.get("status") == "graded"):
                results[(sub.student_id, sub.assignment)] = old
            else:
                todo.append(task)
        return results, todo

    def grade_all(self, submissions, handles):
        results, todo = self._already_graded(submissions)
        self.resumed = len(results)
        if len(results):
            self.say(f"resuming: {len(results)} submission(s) already graded (use --regrade to redo)")
        bar = _progress(len(todo), self.o.progress)
        pending = queue.Queue()
        for task in todo:
            pending.put(task)
        lock = threading.Lock()

        def serve(slot, handle):
            while True:
                try:
                    task = pending.get_nowait()
                except queue.Empty:
                    return
                task = dict(task, socket_dir=os.path.join(self.sockets, f"slot{slot}"),
                            uid=sandbox.slot_uid(slot, self.sandboxed))
                reply = handle.run(task, self._deadline(task))
                if handle.stopped:
                    return
                result = _read_result(task["shard"]) if reply else None
                if result is None:
                    result = _worker_lost(task)
                with lock:
                    results[(task["student"], task["assignment"])] = result
                    bar.update(1)

        _on_every_worker(handles, serve)
        bar.close()
        return results

    def merge(self, results):
        """Copy every graded shard into the course gradebook (the only writer), once the
        gradebook knows the assignments as they are now."""
        for a in sorted(self.prepared):
            _generate(self.source_root, os.path.join(self.work, "course", "release"),
                      self.gradebook, a, self.work)
        merge_shards(results, self.gradebook, os.path.join(self.work, "shards"))

    def known_students(self):
        from nbgrader.api import Gradebook
        if not os.path.exists(self.gradebook):
            return set()
        with Gradebook("sqlite:///" + self.gradebook) as gb:
            return {s.id for s in gb.students}


def _worker_lost(task):
    """The result of a task whose worker died or ran out of time before writing one."""
    return {"student": task["student"], "assignment": task["assignment"],
            "status": "could_not_grade", "cells": [], "feedback": {},
            "problems": ["the grading worker stopped or went over its time limit "
                         "while grading this submission; try again with --regrade"]}


def merge_shards(results, gradebook, shards):
    """Copy the grades, comments and flags of every graded result's shard gradebook
    (shards/<assignment>/<student>/gradebook.db) into the course gradebook."""
    from nbgrader.api import Gradebook

    with warnings.catch_warnings(), Gradebook("sqlite:///" + gradebook) as master:
        warnings.simplefilter("ignore")
        for key in sorted(results):
            if results[key]["status"] != "graded":
                continue
            student, a = key
            shard_db = os.path.join(shards, a, student, "gradebook.db")
            with Gradebook("sqlite:///" + shard_db) as shard:
                _copy_submission(shard.find_submission(a, student), master, a, student)
            master.db.commit()


def _copy_submission(sub, master, assignment, student):
    """One shard's submission into the course gradebook: scores, comments, flags."""
    master.update_or_create_student(student)
    master.update_or_create_submission(assignment, student, timestamp=sub.timestamp)
    for nb in sub.notebooks:
        for g in nb.grades:
            mg = master.find_grade(g.name, nb.name, assignment, student)
            mg.auto_score, mg.manual_score = g.auto_score, g.manual_score
            mg.extra_credit = g.extra_credit
            mg.needs_manual_grade = g.needs_manual_grade
        for c in nb.comments:
            mc = master.find_comment(c.name, nb.name, assignment, student)
            mc.auto_comment, mc.manual_comment = c.auto_comment, c.manual_comment
        master.find_submission_notebook(nb.name, assignment, student).flagged = nb.flagged


def _read_result(shard):
    try:
        with open(os.path.join(shard, "result.json")) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _failing_messages(shard, student, assignment):
    import nbformat
    folder = os.path.join(shard, "autograded", student, assignment)
    messages = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".ipynb"):
            nb = nbformat.read(os.path.join(folder, name), as_version=4)
            for cell in nb.cells:
                for o in cell.get("outputs", []):
                    if o.get("output_type") == "error":
                        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "?")
                        messages.append(f"[{gid}] {o.get('ename')}: {str(o.get('evalue'))[:300]}")
    return ("Errors: " + " | ".join(messages[:5])) if messages else ""


class _NoBar:
    def update(self, n):
        pass

    def close(self):
        pass


def _progress(total, enabled):
    if not enabled or total == 0:
        return _NoBar()
    from tqdm import tqdm
    return tqdm(total=total, unit="student", desc="grading", file=sys.stderr)
