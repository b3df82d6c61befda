"""Intake: turn a folder or an LMS zip into clean, staged submissions plus a list of problems.

Why a separate step: everything that comes from students is untrusted, including file names.
Intake copies only regular files (never symlinks), with checked names and sizes, into a staging
folder laid out `<student>/<assignment>/<notebook>.ipynb`, parses every notebook once, and
reports each thing it had to skip in words a person understands. Grading then only ever reads
the staging folder, so a bad submission is refused here, before a kernel starts.

Inputs:
- a folder `<student>/<assignment>/<notebook>.ipynb` (what `nbgrader collect` produces); or
- an LMS zip, either holding that same layout, or flat files named by the LMS. Flat names are
  parsed with nbgrader's own zip_collect plugin (`FileNameCollectorPlugin`) and its
  `named_regexp`, which must capture `student_id` and `file_id` (the notebook file name) and may
  capture `assignment_id`. The default fits Canvas/Moodle-style names such as
  `smithjane_12345_67890_self_attention.ipynb`; set
  `c.FileNameCollectorPlugin.named_regexp` in nbgrader_config.py or pass `--lms-pattern`.

When each submission was made (for late penalties, see lms.py) is read, never guessed from a
file's modification time (a copy changes it):
- `timestamp.txt` beside the notebooks, which nbgrader's exchange writes at submit and
  `nbgrader collect` keeps (with `submission_secret.txt`, the key `nbgrader release_feedback`
  needs: both are kept with the submission and are not reported as extra files);
- otherwise the zip entry's time: its extended-timestamp field (UTC) when the zip has one, else
  the DOS date and time, which carries no zone (`submitted_at` is then naive and the export
  reads it in the configured `zip_timezone`);
- otherwise none: a folder without timestamp.txt has no submission time.
"""
import datetime as dt
import json
import os
import re
import shutil
import stat
import time
import struct
import zipfile
import zlib
from dataclasses import dataclass, field

from . import lms

DEFAULT_LMS_PATTERN = (r"^(?:.*/)?(?P<student_id>[A-Za-z0-9][A-Za-z0-9.@-]*)_(?:late_)?"
                       r"(?:\d+_)*(?P<file_id>[A-Za-z][A-Za-z0-9_-]*(?: \(\d+\))?\.ipynb)$")
# Canvas renames a re-uploaded file `name-1.ipynb` or `name (1).ipynb`: the same notebook.
_COPY_SUFFIX = re.compile(r"^(?P<name>.+?)(?:-(?P<n>\d+)| \((?P<m>\d+)\))\.ipynb$")
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
# The solution check is graded under this id: not a valid student id, so never a real student's.
SOLUTION_STUDENT = "_solution_"
IGNORED = {"__MACOSX", ".ipynb_checkpoints", ".DS_Store", "Thumbs.db"}
# Written by nbgrader's exchange beside a submission's notebooks; kept, not reported as extra.
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")


@dataclass
class Problem:
    student_id: str
    assignment: str
    problem: str


@dataclass
class Submission:
    student_id: str
    assignment: str
    files: dict = field(default_factory=dict)  # notebook file name -> staged path
    submitted_at: object = None  # datetime (aware; naive = a zip's zone-less time) or None
    timestamp_from: str = ""     # "timestamp.txt", "zip entry (UTC)", "zip entry" or ""
    exchange_files: dict = field(default_factory=dict)  # timestamp.txt / submission_secret.txt -> text


@dataclass
class IntakeResult:
    submissions: list
    problems: list
    students: set
    attempted: set = field(default_factory=set)  # (student, assignment) pairs with a folder


def _ignored(name):
    return name in IGNORED or name.startswith(".") or name.startswith("~$")


def _check_notebook(path):
    """None when the file is a readable nbformat-4 notebook, else a reason."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except UnicodeDecodeError:
        return "is not a text file (is it really a notebook?)"
    except json.JSONDecodeError as exc:
        return f"is not valid notebook JSON (line {exc.lineno}: {exc.msg}); open it in JupyterLab and save it again"
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return "is JSON but not a Jupyter notebook (no cell list)"
    try:
        import nbformat
        nbformat.validate(nbformat.from_dict(data))
    except Exception as exc:  # noqa: BLE001
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        return f"is not a valid notebook ({first})"
    return None


def zip_entry_time(info):
    """(datetime, source) of a zip entry: the extended-timestamp extra field (0x5455, a UTC
    Unix time) when present, else the DOS date and time as a naive datetime (no zone)."""
    extra, i = info.extra or b"", 0
    while i + 4 <= len(extra):
        tag, size = struct.unpack("<HH", extra[i:i + 4])
        body = extra[i + 4:i + 4 + size]
        if tag == 0x5455 and len(body) >= 5 and body[0] & 1:
            seconds = struct.unpack("<i", body[1:5])[0]
            return dt.datetime.fromtimestamp(seconds, dt.timezone.utc), "zip entry (UTC)"
        i += 4 + size
    try:
        return dt.datetime(*info.date_time), "zip entry"
    except ValueError:
        return None, ""


def _safe_extract(zip_path, dest, max_file_bytes, max_total_bytes, problems, times=None):
    """Extract regular files only, refusing absolute paths, '..', links and oversize entries.
    times: filled with {extracted path: (datetime, source)} (see zip_entry_time)."""
    total = 0
    with zipfile.ZipFile(zip_path) as zf:
        for info in zf.infolist():
            name = info.filename
            if info.is_dir():
                continue
            parts = [p for p in name.replace("\\", "/").split("/") if p]
            mode = (info.external_attr >> 16) & 0o170000
            if name.startswith("/") or ".." in parts or not parts:
                problems.append(Problem("", "", f"zip entry '{name}' has an unsafe path and was skipped"))
                continue
            if mode and mode != stat.S_IFREG:
                problems.append(Problem("", "", f"zip entry '{name}' is not a regular file and was skipped"))
                continue
            if any(_ignored(p) for p in parts):
                continue
            if info.file_size > max_file_bytes:
                problems.append(Problem("", "", f"zip entry '{name}' is {info.file_size / 2**20:.0f} MB, "
                                        f"over the {max_file_bytes / 2**20:.0f} MB limit, and was skipped"))
                continue
            total += info.file_size
            if total > max_total_bytes:
                raise ValueError(f"the zip expands to more than {max_total_bytes / 2**30:.1f} GB")
            target = os.path.join(dest, *parts)
            try:
                _extract_one(zf, info, target)
                if times is not None:
                    times[target] = zip_entry_time(info)
            except _BAD_ENTRY as exc:  # one bad entry is one problem, never the whole batch
                problems.append(Problem("", "", f"zip entry '{name[:120]}' could not be extracted "
                                        f"({_reason(exc)}) and was skipped"))


_BAD_ENTRY = (OSError, zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError,
              ValueError)


def _reason(exc):
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__


def _extract_one(zf, info, target):
    """Extract one entry (removed again if reading it fails half-way: a CRC error)."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        with zf.open(info) as src, open(target, "xb") as out:
            shutil.copyfileobj(src, out)
    except FileExistsError:
        raise OSError(17, "another entry has the same name") from None
    except BaseException:
        if os.path.isfile(target):
            os.remove(target)
        raise
    try:  # the LMS's upload time: among duplicates the newest wins
        stamp = time.mktime(info.date_time + (0, 0, -1))
        os.utime(target, (stamp, stamp))
    except (ValueError, OverflowError, OSError):
        pass


def _flat_files(root):
    found = []
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _ignored(d))
        for name in sorted(files):
            if not _ignored(name):
                found.append(os.path.join(base, name))
    return found


def _is_layout(root, assignments):
    """True when root looks like <student>/<assignment>/... for at least one known assignment."""
    for student in os.listdir(root):
        path = os.path.join(root, student)
        if os.path.isdir(path) and not os.path.islink(path):
            if any(a in assignments for a in os.listdir(path)):
                return True
    return False


def _from_lms_names(root, staging, assignments, pattern, problems, times):
    """Re-lay flat LMS files as <student>/<assignment>/<notebook> using nbgrader's collector."""
    from nbgrader.plugins.zipcollect import FileNameCollectorPlugin

    collector = FileNameCollectorPlugin(named_regexp=pattern)
    by_notebook = {nb: a for a, nbs in assignments.items() for nb in nbs}
    laid = os.path.join(staging, "_lms")
    candidates = {}  # (student, assignment, notebook) -> [(path, rel, late)]
    for path in _flat_files(root):
        rel = os.path.relpath(path, root)
        info = collector.collect(rel) if rel.endswith(".ipynb") else None
        if not info or not info.get("student_id") or not info.get("file_id"):
            problems.append(Problem("", "", f"file '{rel}' does not match the LMS file-name pattern "
                                    "(see autograder/README.md) and was skipped"))
            continue
        notebook = _canonical(os.path.basename(info["file_id"]), by_notebook)
        assignment = info.get("assignment_id") or by_notebook.get(notebook)
        if assignment is not None and assignment not in assignments:
            problems.append(Problem("", "", f"file '{rel}': '{assignment}' is not an assignment of "
                                    "this course; skipped"))
            continue
        if not STUDENT_ID.match(info["student_id"]) or not notebook.endswith(".ipynb"):
            problems.append(Problem("", "", f"file '{rel}': '{info['student_id']}' is not a valid "
                                    "student id; skipped"))
            continue
        if assignment is None:
            problems.append(Problem(info["student_id"], "", f"file '{rel}': no assignment has a "
                                    f"notebook named '{notebook}'; skipped"))
            continue
        late = os.path.basename(rel)[len(info["student_id"]) + 1:].startswith("late_")
        candidates.setdefault((info["student_id"], assignment, notebook), []).append((path, rel, late))
    for (student, assignment, notebook), copies in sorted(candidates.items()):
        path, rel, _ = chosen = choose_copy(copies)
        if len(copies) > 1:
            problems.append(Problem(student, assignment, _duplicates_message(notebook, chosen, copies)))
        target = os.path.join(laid, student, assignment, notebook)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(path, target)
            if path in times:  # the chosen copy's upload time is the submission's
                times[target] = times[path]
        except OSError as exc:
            problems.append(Problem(student, assignment, f"file '{rel}' could not be read "
                                    f"({_reason(exc)}); skipped"))
    return laid


def _copy_number(rel):
    m = _COPY_SUFFIX.match(os.path.basename(rel))
    return int(m.group("n") or m.group("m")) if m else 0


def choose_copy(copies):
    """The copy to grade when an LMS zip holds several of one student's notebook.

    The rule (autograder/README.md): an on-time copy beats a late one; then the newest upload
    (the zip's timestamp); then the highest Canvas copy number (`-2` after `-1`); then the name.
    """
    def key(copy):
        path, rel, late = copy
        return (not late, os.stat(path).st_mtime, _copy_number(rel), rel)
    return max(copies, key=key)


def _duplicates_message(notebook, chosen, copies):
    others = [f"'{rel}'" + (" (late)" if late else "") for _, rel, late in copies if rel != chosen[1]]
    return (f"{len(copies)} copies of '{notebook}' were submitted: graded '{chosen[1]}'"
            + (" (late)" if chosen[2] else "") + f", ignored {', '.join(others)} (rule: on-time "
            "before late, then the newest upload; see autograder/README.md)")


def _canonical(notebook, by_notebook):
    """`fixture-1.ipynb` / `fixture (1).ipynb` -> `fixture.ipynb` when that is a course notebook."""
    m = _COPY_SUFFIX.match(notebook)
    if notebook not in by_notebook and m and m.group("name") + ".ipynb" in by_notebook:
        return m.group("name") + ".ipynb"
    return notebook


def collect(source, staging, assignments, *, lms_pattern=DEFAULT_LMS_PATTERN,
            max_file_bytes=20 * 2**20, max_total_bytes=2 * 2**30, only=None):
    """Stage the submissions found at `source` (folder or zip).

    assignments: {assignment_id: [notebook file names]} of the course (from the source folder).
    only: the assignment ids to grade (None: all). Returns an IntakeResult.
    """
    problems = []
    times = {}  # extracted file -> (datetime, source): the zip's upload times
    os.makedirs(staging, exist_ok=True)
    root = source
    if os.path.isfile(source):
        if not zipfile.is_zipfile(source):
            raise ValueError(f"{source} is neither a folder nor a zip file")
        root = os.path.join(staging, "_unzipped")
        if os.path.isdir(root):
            shutil.rmtree(root)
        _safe_extract(source, root, max_file_bytes, max_total_bytes, problems, times)
        entries = [e for e in os.listdir(root) if not _ignored(e)]
        if len(entries) == 1 and os.path.isdir(os.path.join(root, entries[0])) \
                and not _is_layout(root, assignments):
            root = os.path.join(root, entries[0])  # a zip of one top folder
        if not _is_layout(root, assignments):
            root = _from_lms_names(root, staging, assignments, lms_pattern, problems, times)
    elif not os.path.isdir(source):
        raise ValueError(f"{source} does not exist")

    submissions, students, attempted = [], set(), set()
    stage = os.path.join(staging, "students")
    if os.path.isdir(stage):
        shutil.rmtree(stage)
    for student in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        spath = os.path.join(root, student)
        if _ignored(student):
            continue
        if os.path.islink(spath) or not os.path.isdir(spath):
            problems.append(Problem("", "", f"'{student}' at the top level is not a student folder; skipped"))
            continue
        if not STUDENT_ID.match(student):
            problems.append(Problem("", "", f"folder '{student}' is not a valid student id (letters, "
                                    "digits, '.', '_', '-', '@'; at most 64); skipped"))
            continue
        students.add(student)
        for assignment in sorted(os.listdir(spath)):
            apath = os.path.join(spath, assignment)
            if _ignored(assignment):
                continue
            if assignment not in assignments or os.path.islink(apath) or not os.path.isdir(apath):
                problems.append(Problem(student, "", f"'{assignment}' is not an assignment of this "
                                        f"course (expected one of: {', '.join(sorted(assignments))}); skipped"))
                continue
            if only and assignment not in only:
                continue
            attempted.add((student, assignment))
            try:
                sub = _stage_assignment(student, assignment, apath, assignments[assignment],
                                        os.path.join(stage, student, assignment), max_file_bytes,
                                        problems, times)
            except OSError as exc:  # an unreadable file costs this submission, not the batch
                problems.append(Problem(student, assignment, "the submission could not be read "
                                        f"({_reason(exc)}: {str(exc.filename or '')[-80:]})"))
                sub = None
            if sub is not None:
                submissions.append(sub)
    return IntakeResult(submissions, problems, students, attempted)


def _read_exchange_file(path, name, report):
    """The text of timestamp.txt / submission_secret.txt, or None (reported) when unusable."""
    if os.path.getsize(path) > 1024:
        report(f"'{name}' is over 1 KB, so it is not nbgrader's; ignored")
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (UnicodeDecodeError, OSError) as exc:
        report(f"'{name}' could not be read ({_reason(exc)}); ignored")
        return None


def _submission_time(text):
    """An exchange timestamp.txt as an aware datetime: ISO 8601 or nbgrader's
    '%Y-%m-%d %H:%M:%S.%f %Z'; a time without a zone is UTC (what nbgrader writes and means)."""
    try:
        return lms.parse_time(text)
    except ValueError as exc:
        if "time zone" not in str(exc):
            raise
        return dt.datetime.fromisoformat(text.strip()).replace(tzinfo=dt.timezone.utc)


def _stage_assignment(student, assignment, apath, expected, dest, max_file_bytes, problems,
                      times=None):
    def report(text):
        problems.append(Problem(student, assignment, text))

    notebooks, invalid, exchange = {}, [], {}
    for path in _flat_files(apath):
        rel = os.path.relpath(path, apath)
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
            report(f"'{rel}' is not a regular file; ignored")
            continue
        if st.st_size > max_file_bytes:
            report(f"'{rel}' is {st.st_size / 2**20:.0f} MB, over the {max_file_bytes / 2**20:.0f} MB "
                   "limit; ignored")
            continue
        if rel in EXCHANGE_FILES:
            text = _read_exchange_file(path, rel, report)
            if text is not None:
                exchange[rel] = text
            continue
        if not rel.endswith(".ipynb") or os.sep in rel:
            report(f"extra file '{rel}' is not part of the assignment; ignored")
            continue
        reason = _check_notebook(path)
        if reason:
            report(f"'{rel}' {reason}")
            invalid.append(rel)
            continue
        notebooks[rel] = path
    staged = {}
    for name in expected:
        if name in notebooks:
            staged[name] = notebooks.pop(name)
    missing = [n for n in expected if n not in staged]
    if len(missing) == 1 and len(notebooks) == 1 and not invalid:
        (other, path), = notebooks.items()
        report(f"notebook '{other}' should be named '{missing[0]}'; graded under the right name")
        staged[missing[0]] = path
        notebooks.clear()
        missing = []
    for name in sorted(notebooks):
        report(f"notebook '{name}' is not part of the assignment (expected: {', '.join(expected)}); ignored")
    for name in missing:
        if name not in invalid:
            report(f"notebook '{name}' is missing; it scores zero")
    if not staged:
        return None
    os.makedirs(dest, exist_ok=True)
    sub = Submission(student, assignment, exchange_files=exchange)
    for name, path in sorted(staged.items()):
        target = os.path.join(dest, name)
        shutil.copyfile(path, target)
        sub.files[name] = target
    if "timestamp.txt" in exchange:
        try:
            sub.submitted_at, sub.timestamp_from = _submission_time(exchange["timestamp.txt"]), "timestamp.txt"
        except ValueError:
            report(f"timestamp.txt ({exchange['timestamp.txt'].strip()[:60]!r}) is not a time; "
                   "the submission time is unknown")
    else:  # the newest upload among the notebooks graded (a zip's entries)
        stamped = [times[p] for p in staged.values() if times and times.get(p, (None,))[0]]
        if stamped:
            aware = {t.tzinfo is not None for t, _ in stamped}
            if len(aware) == 1:
                sub.submitted_at, sub.timestamp_from = max(stamped, key=lambda ts: ts[0])
    return sub
