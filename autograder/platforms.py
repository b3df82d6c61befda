"""Gradescope and PrairieLearn: grade ONE submission with the class batch, write the platform's
results file.

`python -m autograder gradescope SUBMISSION_DIR RESULTS_JSON [--assignment ID] [--visibility V]`
`python -m autograder prairielearn SUBMISSION_DIR RESULTS_JSON [--assignment ID]`

Why it is built this way:
- Nothing here grades. The notebook found in the submission folder is laid out as a class of one
  (`<tmp>/submissions/student/<assignment>/<notebook>.ipynb`) and graded by `batch.Batch`, the
  same object `python -m autograder grade` runs: intake, the solution check, the sandboxed
  worker, the judge outside the kernel, hidden-test redaction. A platform grade can then never
  differ from the class grade of the same notebook.
- What the student reads is what the class report reads (`report.py`): the exercise's title from
  the release notebook, the test cell's outcome (passed, not attempted, a catalogued mistake,
  wrong, did not run) and the cell's first error reduced to one sentence; a message that quotes a
  hidden-test line is withheld (`report.WITHHELD`), so no hidden test reaches a platform.
- A notebook that cannot be graded (no course notebook in the upload, invalid JSON) is the
  student's to fix: Gradescope gets score 0 with the reason in the top-level `output`, always
  visible so the student can resubmit; PrairieLearn gets `gradable: false` (no attempt used).
  A grader that refuses to grade (no sandbox, a solution that fails its own tests, a broken
  course) writes no Gradescope results at all (Gradescope then reports an autograder failure
  instead of recording a zero, exit status 2) and a `gradable: false` PrairieLearn result with
  exit status 0 (PrairieLearn reads results.json only after a zero exit; otherwise its student
  sees "Unknown error"); the reason goes to stderr for the instructor.
- The platforms' containers usually cannot create the namespaces bubblewrap needs. The default
  stays "no sandbox, no grading"; with `--container-fallback`, where bubblewrap cannot start,
  student code runs as an unprivileged user without namespaces (sandbox.drop_command): the
  course's answers, the upload's metadata and the grader's folders are made unreadable to it,
  the results folder unwritable, and every process of that user is killed before results are
  written. It says so on stderr and in the results' extra data (`isolation`).
- What does not depend on the upload is done once per assignment, not once per upload: the
  private release and template gradebook (nbgrader generate_assignment) are kept in
  `<course root>/.autograder-cache/<assignment>/<key>/`, the key a hash of the assignment's
  source, the installed packages and the Python; the solution check's full-marks verdict in
  `<course root>/.autograder-cache/.verdicts/` (or `--verdict-cache`), keyed by all it depends on
  (verdict.py). A change to any of them is a new key, so a stale entry is never used. Only the
  grader writes it, from its own private work folder, before any student code runs; it sits beside
  solutions/, which the sandbox never mounts (no cache is kept where the sandbox could see
  it). The class of one's gradebook is not filled (no second generate_assignment): it is thrown
  away with the temporary folder; the course gradebook is the batch's (`grade`).
"""
import json
import os
import re
import shutil
import sys
import tempfile
import time

from course_utils.grading import questions

from . import batch, intake, report, verdict

STUDENT = "student"  # the one student of the class of one (a valid intake id)
VISIBILITIES = ("after_due_date", "visible", "hidden", "after_published")


class NotGradable(Exception):
    """The upload cannot be graded; the message is for the student."""


# --- finding the notebook ------------------------------------------------------------------------

def _notebooks_in(folder):
    """Every .ipynb under folder (relative paths), skipping what intake skips (__MACOSX, checkpoints,
    dot files), links and non-files; shallowest first."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not intake._ignored(d) and not d.startswith(".")
                         and not os.path.islink(os.path.join(root, d)))
        for name in sorted(files):
            path = os.path.join(root, name)
            if (name.endswith(".ipynb") and not intake._ignored(name) and not name.startswith(".")
                    and os.path.isfile(path) and not os.path.islink(path)):
                found.append(os.path.relpath(path, folder))
    return sorted(found, key=lambda rel: (rel.count(os.sep), rel))


def find_notebooks(submission_dir, assignments, chosen=None):
    """(assignment, {notebook name: path}) of the submission.

    assignments: {assignment_id: [notebook file names]} (batch.course_assignments). A file counts
    by its name (a re-upload's `name (1).ipynb` / `name-1.ipynb` as `name.ipynb`); with `chosen`
    only that assignment's notebooks count, and one notebook of another name is graded under the
    assignment's name (intake says so). Raises NotGradable with a sentence for the student."""
    if not os.path.isdir(submission_dir):
        raise NotGradable(f"the submission folder {submission_dir} does not exist")
    files = _notebooks_in(submission_dir)
    wanted = {chosen: assignments[chosen]} if chosen else assignments
    by_notebook = {}
    for assignment, names in wanted.items():
        for name in names:
            by_notebook.setdefault(name, []).append(assignment)
    matches = {}  # assignment -> {notebook: relative path}, the first (shallowest, exact) kept
    for rel in sorted(files, key=lambda r: (os.path.basename(r) not in by_notebook, r.count(os.sep), r)):
        name = intake._canonical(os.path.basename(rel), by_notebook)
        for assignment in by_notebook.get(name, []):
            matches.setdefault(assignment, {}).setdefault(name, rel)
    expected = "; ".join(f"{a}: {', '.join(n)}" for a, n in sorted(wanted.items()))
    if not matches:
        if chosen and len(files) == 1 and len(assignments[chosen]) == 1:
            return chosen, {os.path.basename(files[0]): os.path.join(submission_dir, files[0])}
        seen = ", ".join(files[:10]) if files else "no .ipynb file at all"
        raise NotGradable(f"No notebook of this course was found in your submission (found: {seen}). "
                          f"Upload the notebook under its released name ({expected}) and submit again.")
    if len(matches) > 1:
        which = "; ".join(f"{a} ({', '.join(sorted(n))})" for a, n in sorted(matches.items()))
        raise NotGradable(f"Your submission holds notebooks of several assignments ({which}), so "
                          "it is not clear which one to grade: submit one assignment's notebook, "
                          "or ask your instructor to set the assignment (--assignment).")
    (assignment, found), = matches.items()
    return assignment, {name: os.path.join(submission_dir, rel) for name, rel in found.items()}


def _grade_ids(path):
    """The nbgrader grade ids of a notebook file (empty when it cannot be read as one)."""
    try:
        with open(path, encoding="utf-8") as fh:
            cells = json.load(fh).get("cells") or []
        return {c["metadata"]["nbgrader"]["grade_id"] for c in cells
                if isinstance(c, dict) and isinstance(c.get("metadata"), dict)
                and isinstance(c["metadata"].get("nbgrader"), dict)
                and isinstance(c["metadata"]["nbgrader"].get("grade_id"), str)}
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        return set()


def check_belongs(files, assignment, source_root, names):
    """Raise NotGradable, in one sentence, when an uploaded notebook is another assignment's: it
    has graded cells and none of them is one of this assignment's. (nbgrader would otherwise fail
    on it with a paragraph per foreign cell and "see the above traceback", which the student
    cannot see.) An unreadable notebook is left to intake, which says why."""
    expected = set()
    for name in names:
        expected |= _grade_ids(os.path.join(source_root, assignment, name))
    for name, path in files.items():
        found = _grade_ids(path)
        if expected and found and not found & expected:
            shown = ", ".join(sorted(found)[:3]) + (", ..." if len(found) > 3 else "")
            raise NotGradable(
                f"{os.path.basename(path)} is the notebook of another assignment (its exercises, {shown}, "
                f"are not those of {assignment}): upload {' and '.join(names)}, the notebook of "
                f"{assignment}, and submit again.")


# --- grading: the class batch on a class of one -------------------------------------------------

# Gradescope's ids and emails may hold characters a grading folder's id cannot (intake.STUDENT_ID:
# letters, digits, ".", "_", "@", "-"; at most 64, a letter or digit first), "+" above all
# (ada+cs101@uni.edu). Such an id is not dropped but made valid by one documented rule.
ID_RULE = ("every character other than a letter, a digit, '.', '_', '@' or '-' becomes '-', "
           "leading punctuation is dropped and the id is cut at 64 characters")


def valid_id(text):
    """`text` as a valid student id by ID_RULE (ada+cs101@uni.edu -> ada-cs101@uni.edu), or None
    when nothing is left of it."""
    if not isinstance(text, (str, int)) or isinstance(text, bool):
        return None
    made = questions.canonical_id(str(text))  # the form the student's notebook draws numbers from
    return made if made and intake.STUDENT_ID.match(made) else None


def identify(submission_dir, given=None):
    """Who a submission is graded for: {"id", "source", "raw", "members"}.

    `given` (--student) first, else on Gradescope the first user of submission_metadata.json
    beside the upload: their Student ID, else their email; else the placeholder STUDENT (source
    None). An id intake would refuse is made valid by ID_RULE (raw keeps what was given).
    `members`: every user of a group submission ([] for one student): it is graded once, for the
    first of them."""
    users = []
    meta = os.path.join(os.path.dirname(os.path.abspath(submission_dir)), "submission_metadata.json")
    try:
        with open(meta, encoding="utf-8") as fh:
            data = json.load(fh)
        users = [u for u in (data.get("users") or []) if isinstance(u, dict)]
    except (OSError, ValueError, AttributeError, TypeError):
        pass
    first = users[0] if users else {}
    members = [str(u.get("email") or u.get("name") or u.get("sid") or "?") for u in users] if len(users) > 1 else []
    for source, raw in (("--student", given), ("Student ID", first.get("sid")), ("email", first.get("email"))):
        made = valid_id(raw)
        if made:
            return {"id": made, "source": source, "raw": str(raw).strip(), "members": members}
    return {"id": STUDENT, "source": None, "raw": None, "members": members}


def submitter_id(submission_dir, given=None):
    """The id a submission is graded under (`identify`). Think-first questions have numbers per
    student (course_utils/grading/questions.py): this id must be the one the student worked
    under, or their own right answers read as another student's (the feedback then says so)."""
    return identify(submission_dir, given)["id"]


def identity_note(ident):
    """What the results say about whose numbers were graded (one or two sentences)."""
    sid = ident["id"]
    if ident["source"] is None:
        text = ("No student id was given, so the Think first questions were checked against the "
                "example's numbers, the ones a notebook shows when no student id is set.")
    elif ident["raw"] != sid:
        text = (f"Graded for student id {sid}, made from your {_source_words(ident['source'])} "
                f"{ident['raw']} ({ID_RULE}): the Think first questions were checked against that "
                "id's numbers.")
    else:
        text = (f"Graded for student id {sid} (your {_source_words(ident['source'])}): the Think "
                "first questions were checked against that id's numbers.")
    if ident["members"]:
        text += (f" This is a group submission of {len(ident['members'])} students "
                 f"({', '.join(ident['members'])}); it was graded once, for its first member, "
                 f"{ident['members'][0]}, whose numbers were used.")
    return text


def _source_words(source):
    return {"--student": "instructor-given id", "Student ID": "Gradescope Student ID",
            "email": "Gradescope email"}.get(source, source)


def grade_one(submission_dir, *, course_root, assignment=None, container_fallback=False,
              unsafe_no_sandbox=False, timeout=60, wall=600, memory_gib=4.0, work=None, student=None,
              verdict_cache=""):
    """Grade one submission with batch.Batch, as `student` (`submitter_id`). Returns a dict: status ('graded' / 'not_gradable'),
    assignment, cells (name, grade_id, notebook, score, max_score, outcome, message), problems
    (sentences for the student), sandboxed, seconds. Raises batch.GradingRefused (or ValueError)
    when the grader cannot grade honestly."""
    from . import sandbox

    started = time.monotonic()
    ident = identify(submission_dir, student)
    student = ident["id"]
    course_root = os.path.abspath(course_root)
    assignments = batch.course_assignments(os.path.join(course_root, "solutions"))
    if not assignments:
        raise batch.GradingRefused(f"no assignments found in {os.path.join(course_root, 'solutions')}")
    if assignment and assignment not in assignments:
        raise batch.GradingRefused(f"unknown assignment {assignment} (known: {', '.join(assignments)})")
    # --container-fallback: where bubblewrap cannot start, the batch runs student code as an
    # unprivileged user instead (batch.Batch.check_sandbox says so on stderr); never as root.
    fallback = container_fallback and not unsafe_no_sandbox
    isolation = "none" if unsafe_no_sandbox else (
        "bwrap" if not fallback or not sandbox.why_unavailable() else "drop")
    unsandboxed = isolation != "bwrap"
    root = work or tempfile.mkdtemp(prefix="autograder-one-")
    try:
        try:
            chosen, files = find_notebooks(submission_dir, assignments, assignment)
            check_belongs(files, chosen, os.path.join(course_root, "solutions"), assignments[chosen])
        except NotGradable as exc:
            return {"status": "not_gradable", "assignment": assignment or "", "cells": [],
                    "problems": [str(exc)], "sandboxed": not unsandboxed, "isolation": isolation,
                    "seconds": round(time.monotonic() - started, 1)}
        folder = os.path.join(root, "submissions", student, chosen)
        os.makedirs(folder)
        for name, path in files.items():
            shutil.copyfile(path, os.path.join(folder, name))
        opts = batch.Options(
            submissions=os.path.join(root, "submissions"), out=os.path.join(root, "out"),
            course_root=course_root, gradebook=os.path.join(root, "gradebook.db"),
            assignments=[chosen], jobs=1, timeout=timeout, wall=wall,
            memory_bytes=int(memory_gib * 2**30), unsafe_no_sandbox=unsafe_no_sandbox,
            container_fallback=fallback, in_process=True, progress=False, verdict_cache=verdict_cache,
            # no id given: the notebook showed the example's numbers, so they are the question
            numbers_for={student: ""} if ident["source"] is None else {})
        job = OneSubmission(opts, cache=_cache_root(course_root))
        results = job.run()
        result = results.get((student, chosen))
        problems = [_student_text(p.problem, root) for p in job.problems
                    if p.student_id in ("", student) and p.assignment in ("", chosen)]
        if result is not None:
            problems += [_student_text(p, root) for p in result.get("problems", [])
                         if _student_text(p, root) not in problems]
        if result is not None and result.get("grader_failure"):
            # Not the student's: never a score (a cached verdict must not hide it either).
            raise batch.GradingRefused(f"the grading environment could not grade {chosen}: "
                                       f"{result['grader_failure']}")
        if result is None and not problems:
            raise batch.GradingRefused(f"{chosen}: the grader stopped before it graded the notebook "
                                       "(out of memory or time?)")
        if result is not None and result.get("status") == "could_not_grade" and _grader_side(result):
            raise batch.GradingRefused(f"{chosen}: the notebook could not be graded here: "
                                       + "; ".join(result.get("problems", []))[:2000])
        if result is None or result.get("status") != "graded":
            return {"status": "not_gradable", "assignment": chosen, "cells": [],
                    "problems": problems or ["the notebook could not be graded"],
                    "sandboxed": not unsandboxed, "isolation": isolation, "seconds": round(time.monotonic() - started, 1)}
        release_root = os.path.join(job.work, "course", "release")
        cells = _cells(result, chosen, release_root, job.prepared[chosen]["secret_lines"])
        return {"status": "graded", "assignment": chosen, "cells": cells, "problems": problems,
                "student": student, "identity": identity_note(ident),
                "sandboxed": not unsandboxed, "isolation": isolation, "seconds": round(time.monotonic() - started, 1),
                "cached": sorted(job.cached)}
    finally:
        if work is None:
            shutil.rmtree(root, ignore_errors=True)


# --- what does not depend on the upload, once per assignment -----------------------------------

CACHE_DIR = ".autograder-cache"


def _cache_root(course_root):
    """Where the per-assignment cache lives, or None when it would sit where the sandbox mounts
    (the Python prefixes, /usr, /etc) or cannot be made private."""
    root, _ = verdict.private_folder(os.path.join(course_root, CACHE_DIR))
    return root


class OneSubmission(batch.Batch):
    """The class batch, for one upload: the release, the template gradebook and the solution
    check's verdict come from the cache when an earlier grading of the same assignment, source,
    grader and environment made them (Gradescope re-runs the whole command per submission)."""

    strict_environment = True

    def __init__(self, opts, cache=None):
        super().__init__(opts)
        self.cache = cache
        self.cached = set()  # what this run took from the cache (for the bench and the tests)

    def _entry(self, assignment):
        """The assignment's cache folder for its current source, Python and packages."""
        from . import worker
        sources = verdict.source_files(os.path.join(self.source_root, assignment))
        key = worker.fingerprint(sources, assignment + verdict.packages_key())[:32]
        return os.path.join(self.cache, assignment, key)

    def prepare(self, assignment):
        if self.cache is None:
            return super().prepare(assignment)
        entry = self._entry(assignment)
        tdir = os.path.join(self.work, "templates")
        release = os.path.join(self.work, "course", "release", assignment)
        if os.path.isdir(os.path.join(entry, "release")) and not os.path.exists(release):
            try:
                os.makedirs(tdir, exist_ok=True)
                for suffix in (".db", ".source"):
                    shutil.copyfile(os.path.join(entry, "templates", assignment + suffix),
                                    os.path.join(tdir, assignment + suffix))
                shutil.copytree(os.path.join(entry, "release"), release)
                self.cached.add("release")
            except OSError:  # an incomplete entry: prepare regenerates (its own check)
                shutil.rmtree(release, ignore_errors=True)
        prep = super().prepare(assignment)  # regenerates unless the copied stamp matches the source
        if "release" not in self.cached:
            self._save(entry, lambda tmp: (
                shutil.copytree(tdir, os.path.join(tmp, "templates"),
                                ignore=lambda d, names: [n for n in names if not n.startswith(assignment + ".")]),
                shutil.copytree(release, os.path.join(tmp, "release"))))
        return prep

    def _default_verdict_folder(self):
        """The solution check's verdicts beside the release cache (the image build's warming
        run leaves one there), not in the throwaway work folder."""
        if self.cache is None:
            return super()._default_verdict_folder()
        return os.path.join(self.cache, ".verdicts")  # a dot: never an assignment's folder

    def check_solutions(self, assignments, handles):
        super().check_solutions(assignments, handles)
        if self.reused_verdicts:
            self.cached.add("solution check")

    def _save(self, entry, fill):
        """Write a cache entry atomically (made in a temporary sibling, then renamed), dropping
        the assignment's older entries; a failure only means no cache."""
        parent = os.path.dirname(entry)
        tmp = None
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=".new-", dir=parent)
            fill(tmp)
            os.rename(tmp, entry)
            tmp = None
            for old in os.listdir(parent):
                if old != os.path.basename(entry) and not old.startswith(".new-"):
                    shutil.rmtree(os.path.join(parent, old), ignore_errors=True)
        except OSError:
            pass
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)

    def merge(self, results):
        """Nothing: the class of one's gradebook goes with its temporary folder (filling it
        would cost a second nbgrader generate_assignment per upload)."""


# Reasons the worker gives for could_not_grade that are the grader's, not the upload's.
_GRADER_SIDE_PROBLEMS = ("internal grading error", "needed more memory than the grader allows itself",
                "the grading worker stopped")


def _grader_side(result):
    return any(marker in str(p) for p in result.get("problems", []) for marker in _GRADER_SIDE_PROBLEMS)


def _student_text(text, root):
    """A problem sentence without the grader's temporary paths."""
    return str(text).replace(root + os.sep, "").replace(root, "")


def _sentence(message):
    """The cell's first error as the student reads it in the feedback: a check's own sentence
    without its exception name (GradingError, TamperError), any other error on its first line."""
    text = str(message or "").strip()
    name, sep, rest = text.partition(": ")
    if sep and name in ("GradingError", "TamperError"):
        return report.clean(rest, 600)
    return report.clean(text.splitlines()[0] if text else "", 300)


_LATEX_WORDS = {"times": "x", "cdot": "·", "le": "<=", "leq": "<=", "ge": ">=", "geq": ">=",
                "neq": "!=", "to": "->", "rightarrow": "->", "approx": "~", "infty": "inf",
                "ldots": "...", "dots": "...", "cdots": "..."}


def _plain_math(match):
    s = match.group(1) or match.group(2)
    s = re.sub(r"\\sqrt\{([^{}]*)\}", r"sqrt(\1)", s)
    s = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", s)
    s = re.sub(r"\\(?:operatorname|mathrm|text|textrm|mathbf|mathit|boldsymbol|mathcal)\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\(?:left|right)(?=[()\[\]|.])", "", s)
    s = re.sub(r"\\[,;:! ]", " ", s)
    s = re.sub(r"\\([A-Za-z]+)", lambda w: _LATEX_WORDS.get(w.group(1), w.group(1)), s)
    return s.replace("{", "").replace("}", "")


def plain_name(text):
    """A test's name as plain text (the platforms show names verbatim): LaTeX math without its
    markup ("$n^2$" -> "n^2", "$\\sqrt{d_k}$" -> "sqrt(d_k)", "$T \\times T$" -> "T x T"), code
    and emphasis marks dropped."""
    text = re.sub(r"\$\$(.+?)\$\$|\$(.+?)\$", _plain_math, str(text))
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"\1", text)
    return " ".join(text.split())


def _cells(result, assignment, release_root, secret_lines):
    """The graded test cells as the student should read them, in notebook order."""
    catalogue = report.load_catalogue(assignment)
    releases, rows = {}, []
    for cell in result.get("cells", []):
        nb = cell.get("notebook", "")
        if nb not in releases:
            releases[nb] = report.read_release(os.path.join(release_root, assignment, nb + ".ipynb"))
            releases[nb].secret = tuple((secret_lines or {}).get(nb, ()))
        release = releases[nb]
        gid = cell["grade_id"]
        exercise = report.exercise_of(gid)
        message = str(cell.get("message") or "")
        if any(line in message for line in release.secret):
            message = report.WITHHELD
        judged = dict(cell, message=message)
        outcome = report.classify(judged, catalogue.get(exercise), exercise in release.blank_stubs)
        if outcome.kind == report.PASSED:
            text = "Passed."
        elif outcome.kind == report.NOT_ATTEMPTED:
            text = "Not attempted: the answer cell is still the stub as released."
        elif message == report.WITHHELD:
            text = "Failed (the message quoted a hidden test, so it is not shown)."
        else:
            text = _sentence(message) or "Failed (the test cell raised an error without a message)."
        rows.append({"name": plain_name(release.title_of(gid) or gid),
                     "grade_id": gid, "notebook": nb, "score": float(cell.get("score") or 0),
                     "max_score": float(cell.get("max_score") or 0), "outcome": outcome.kind,
                     "mistake": outcome.mistake, "message": text,
                     "position": release.order.get(gid, 10**6)})
    rows.sort(key=lambda r: (r["notebook"], r["position"], r["grade_id"]))
    names = [r["name"] for r in rows]
    for r in rows:
        del r["position"]
        if names.count(r["name"]) > 1:
            r["name"] = f"{r['name']} ({r['grade_id']})"
    return rows


# --- the platforms' files -----------------------------------------------------------------------

def _points(x):
    return int(x) if float(x).is_integer() else round(float(x), 4)


def gradescope_results(graded, visibility="after_due_date"):
    """Gradescope's results.json (autograder specification) for grade_one's dict."""
    extra = {"assignment": graded["assignment"], "sandboxed": graded["sandboxed"],
             "isolation": graded.get("isolation", "bwrap" if graded["sandboxed"] else "none"),
             "seconds": graded["seconds"]}
    if graded["status"] != "graded":
        # The upload is the student's to fix before the deadline: shown at once, whatever
        # the chosen visibility (it reveals nothing of the tests).
        return {"score": 0, "output": "Your submission could not be graded: "
                + " ".join(graded["problems"]), "visibility": "visible",
                "stdout_visibility": "hidden", "tests": [], "extra_data": extra}
    tests = [{"name": c["name"], "score": _points(c["score"]), "max_score": _points(c["max_score"]),
              "status": "passed" if c["score"] >= c["max_score"] else "failed",
              "output": c["message"], "visibility": visibility,
              "extra_data": {"grade_id": c["grade_id"], "notebook": c["notebook"], "outcome": c["outcome"]}}
             for c in graded["cells"]]
    if graded.get("student"):
        extra["student"] = graded["student"]
    out = {"score": _points(sum(c["score"] for c in graded["cells"])), "tests": tests,
           "visibility": visibility, "stdout_visibility": "hidden", "extra_data": extra}
    notes = [graded["identity"]] if graded.get("identity") else []
    if graded["problems"]:
        notes.append("Notes from the grader: " + " ".join(graded["problems"]))
    if notes:
        out["output"] = "\n\n".join(notes)
    return out


def prairielearn_results(graded):
    """PrairieLearn's external-grading results.json for grade_one's dict."""
    if graded["status"] != "graded":
        message = "Your submission could not be graded: " + " ".join(graded["problems"])
        return {"gradable": False, "message": message, "format_errors": [message], "tests": []}
    got = sum(c["score"] for c in graded["cells"])
    full = sum(c["max_score"] for c in graded["cells"])
    tests = [{"name": c["name"], "description": c["grade_id"], "points": _points(c["score"]),
              "max_points": _points(c["max_score"]), "message": c["message"], "output": ""}
             for c in graded["cells"]]
    return {"gradable": True, "score": round(got / full, 6) if full else 0.0,
            "message": (f"{_points(got)} of {_points(full)} points."
                        + (" Notes from the grader: " + " ".join(graded["problems"]) if graded["problems"] else "")),
            "output": graded.get("identity") or "", "tests": tests}


def write_json(path, data):
    """Write path atomically (a half-written results file must never be read)."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)


# --- the commands ------------------------------------------------------------------------------

def add_arguments(sub, course_root):
    for name, what in (("gradescope", "Gradescope's results.json"),
                       ("prairielearn", "PrairieLearn's external-grading results.json")):
        p = sub.add_parser(name, help=f"grade ONE submission folder and write {what}")
        p.add_argument("submission_dir", help="the folder holding the student's upload")
        p.add_argument("results_json", help="where to write the results file")
        p.add_argument("--assignment", default=None,
                       help="the assignment to grade (default: the one whose notebook name matches)")
        if name == "gradescope":
            p.add_argument("--visibility", choices=VISIBILITIES, default="after_due_date",
                           help="when students see the tests (default after_due_date)")
        p.add_argument("--timeout", type=int, default=60, help="per-cell timeout in seconds (default 60)")
        p.add_argument("--wall", type=int, default=600, help="per-notebook wall limit in seconds (default 600)")
        p.add_argument("--memory", type=float, default=4.0, help="memory limit per kernel, GiB (default 4)")
        p.add_argument("--course-root", default=course_root, help="course folder holding solutions/")
        p.add_argument("--student", default=None,
                       help="the id the student worked under (their think-first numbers come from it); "
                            "default: Gradescope's submission_metadata.json (Student ID, else email)")
        p.add_argument("--container-fallback", action="store_true",
                       help="if bubblewrap cannot create its sandbox here, grade without it, relying on "
                            "the container's isolation (see autograder/README.md)")
        p.add_argument("--unsafe-no-sandbox", action="store_true",
                       help="never use the sandbox (trusted submissions only)")
        p.add_argument("--verdict-cache", default="", metavar="DIR",
                       help="where the solution check's full-marks verdicts are kept (default: "
                            "$AUTOGRADER_VERDICT_CACHE, else COURSE_ROOT/.autograder-cache/.verdicts)")
        p.set_defaults(platform=name)


def _protect(submission_dir, results_json):
    """Before student code runs as an unprivileged user without namespaces (the fallback): the
    upload and the platform's metadata beside it become root's alone, and the folder of the
    results file is not writable by anyone else, so no student process can write, replace or
    pre-create results.json."""
    upload = os.path.abspath(submission_dir)
    os.chmod(upload, 0o700)
    meta = os.path.join(os.path.dirname(upload), "submission_metadata.json")
    if os.path.isfile(meta):
        os.chmod(meta, 0o600)
    results_dir = os.path.dirname(os.path.abspath(results_json))
    os.makedirs(results_dir, exist_ok=True)
    os.chown(results_dir, 0, 0)
    os.chmod(results_dir, os.stat(results_dir).st_mode & 0o7755)


def _refusal(platform, out, reason):
    """The grader cannot grade: never a score. Gradescope: no results.json (an autograder failure,
    exit 2). PrairieLearn: a not-gradable result it displays, which it reads only after exit 0."""
    print(f"autograder: grading refused: {reason}", file=sys.stderr)
    if platform == "gradescope":
        if os.path.exists(out):  # a stale file must not stand in for this grading
            os.remove(out)
        return 2
    message = ("The grader could not run, so your submission was not graded (this is not about "
               "your work and uses no attempt). Your instructor has the details.")
    write_json(out, {"gradable": False, "tests": [], "message": message, "format_errors": [message]})
    return 0


def main(args):
    from . import platform_guard, sandbox
    out = args.results_json
    platform_guard.tell_guard(args.platform, out)
    dropping = args.container_fallback and not args.unsafe_no_sandbox and os.geteuid() == 0
    try:
        if dropping:
            _protect(args.submission_dir, out)
            sandbox.claim_drop_uids()  # the block the batch will use; the guard ends it if we die
            platform_guard.tell_guard(args.platform, out, uids=[sandbox.slot_uid(1, "drop")])
        graded = grade_one(args.submission_dir, course_root=args.course_root, assignment=args.assignment,
                           container_fallback=args.container_fallback,
                           unsafe_no_sandbox=args.unsafe_no_sandbox, timeout=args.timeout,
                           wall=args.wall, memory_gib=args.memory, student=args.student,
                           verdict_cache=args.verdict_cache)
        if graded.get("isolation") == "drop":
            sandbox.kill_user(sandbox.slot_uid(1, "drop"))  # nothing of the student's runs past here
    except (batch.GradingRefused, ValueError, OSError, RuntimeError) as exc:
        return _refusal(args.platform, out, exc)
    except KeyboardInterrupt:
        print("autograder: interrupted; nothing was written", file=sys.stderr)
        return 130
    data = (gradescope_results(graded, args.visibility) if args.platform == "gradescope"
            else prairielearn_results(graded))
    write_json(out, data)
    how = {"bwrap": "", "drop": " (no sandbox: student code ran as an unprivileged user)",
           "none": " (no sandbox)"}[graded.get("isolation", "none")]
    if graded["status"] == "graded":
        got = sum(c["score"] for c in graded["cells"])
        full = sum(c["max_score"] for c in graded["cells"])
        whose = f" for {graded['student']}" if graded.get("student") else ""
        print(f"autograder: {graded['assignment']}{whose}: {got:g}/{full:g} in {graded['seconds']:.1f} s" + how
              + (f" (from the cache: {', '.join(graded['cached'])})" if graded.get("cached") else "")
              + f"; wrote {os.path.abspath(out)}",
              file=sys.stderr)
    else:
        print("autograder: not gradable: " + " ".join(graded["problems"]) + f"; wrote {os.path.abspath(out)}",
              file=sys.stderr)
    return 0
