"""LMS files: the class's grades as Canvas's and Moodle's grade imports read them, and late penalties.

Why: an instructor's grades live in the LMS; nbgrader has no passback (nbgrader #530), and
typing sixty scores by hand loses some. Both LMSs import a CSV:

- Canvas (Grades > Import): one row per student with the identity columns of Canvas's own
  gradebook export, `Student, ID, SIS User ID, SIS Login ID, Section`; Canvas matches a row by
  ID, then SIS User ID, then SIS Login ID. Then one column per assignment, headed
  `Name (assignment id)` to fill an existing Canvas assignment, or `Name` alone to create one.
  A second row whose first cell is `Points Possible` gives each column's maximum.
- Moodle (Grades > Import > CSV file): a column that identifies the user (mapped on import to
  username, ID number or email address) and one column per grade item; the instructor maps
  columns to grade items on the import page.

Student ids are the course's (the submission folders' names); `mapping` is the instructor's
table from those ids to the LMS's identity columns. A student missing from it is still
exported, under the course id in the login column, and listed so nobody is lost silently.

Late penalties are a rule the instructor states (`LatePolicy`), applied to the submission's
timestamp and shown in their own columns; the LMS files carry the score after the penalty.

The configuration (`Settings.load`) lives in the course's `autograder/nbgrader_config.py`,
beside nbgrader's own, in two sections nbgrader ignores:

    c.LMSExport.roster = "roster.csv"            # student_id,Student,ID,SIS User ID,...,Email address
    c.LMSExport.canvas_assignment_ids = {"05_self_attention": 4711}
    c.LMSExport.moodle_identifier = "Email address"   # a roster column; "Username" without a roster
    c.LMSExport.zip_timezone = "Europe/Berlin"  # how to read a zip entry's zone-less time (UTC)
    c.LatePolicy.due = {"05_self_attention": "2026-11-20T23:59:00+01:00"}
    c.LatePolicy.per_day = 0.1                  # share of the points per started day late
    c.LatePolicy.cap = 0.5                      # at most this share
    c.LatePolicy.grace_minutes = 10
    c.LatePolicy.extensions = {"alice": "2 days",  # every assignment; or per assignment, "*" = the rest:
                               "bob": {"05_self_attention": "36 hours", "*": "1 day"}}

A mistake there (a due date without a zone, a share above 1, a missing roster, a due date or an
extension for an assignment the course does not have, a duration that is not one) refuses the run
before anything is graded.
"""
import csv
import dataclasses
import datetime as dt
import math
import os
import re
import zoneinfo

from . import csvsafe

CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


EVERY = "*"  # in a student's extensions: every assignment
_UNITS = {"day": 86400, "days": 86400, "d": 86400, "hour": 3600, "hours": 3600, "h": 3600,
          "minute": 60, "minutes": 60, "min": 60, "mins": 60}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*")


@dataclasses.dataclass(frozen=True)
class LatePolicy:
    """`per_day` of the points are taken off for each started day late (after `grace_minutes`),
    at most `cap` of them. Due dates are per assignment, timezone-aware ISO 8601.

    `extensions` moves a student's due date: {student: {assignment or EVERY: timedelta}}. The
    config writes a duration for every assignment (`{"alice": "2 days"}`), or one per assignment,
    optionally with `"*"` for the rest (`{"bob": {"05_self_attention": "36 hours", "*": "1 day"}}`);
    the assignment's own entry wins over `"*"`. Lateness (and the grace) counts from the moved date."""

    due: dict  # assignment -> datetime
    per_day: float = 0.1
    cap: float = 0.5
    grace_minutes: float = 0.0
    extensions: dict = dataclasses.field(default_factory=dict)

    SETTINGS = ("due", "per_day", "cap", "grace_minutes", "extensions")

    @classmethod
    def from_config(cls, config, assignments=None):
        """assignments: the course's ids, to refuse a due date or an extension for one it lacks."""
        unknown = set(config) - set(cls.SETTINGS)
        if unknown:
            raise ValueError(f"c.LatePolicy has no setting {', '.join(sorted(unknown))} "
                             f"(it has {', '.join(cls.SETTINGS)})")
        due = {}
        for assignment, when in dict(config.get("due") or {}).items():
            try:
                due[assignment] = when if isinstance(when, dt.datetime) else parse_time(str(when))
            except ValueError as exc:
                raise ValueError(f"c.LatePolicy.due[{assignment!r}]: {exc}") from None
            if due[assignment].tzinfo is None:
                raise ValueError(f"c.LatePolicy.due[{assignment!r}] has no time zone")
        _known(due, "c.LatePolicy.due", assignments)
        policy = cls(due=due, per_day=_number(config, "per_day", 0.1), cap=_number(config, "cap", 0.5),
                     grace_minutes=_number(config, "grace_minutes", 0.0, top=None),
                     extensions=_extensions(config.get("extensions"), due, assignments))
        return policy

    def extension(self, student, assignment):
        """The time `student` was given beyond `assignment`'s due date (a timedelta), or None."""
        given = self.extensions.get(student) or {}
        return given.get(assignment, given.get(EVERY))

    def due_for(self, student, assignment):
        """The due date that counts for this student: the assignment's, moved by an extension."""
        due = self.due.get(assignment)
        extra = self.extension(student, assignment)
        return due + extra if due is not None and extra is not None else due

    def describe_extension(self, student, assignment):
        """A student's extension in words, for any report: '' without one (or without a due
        date), else e.g. 'extension of 2 days: due 2026-11-22T23:59:00+01:00'."""
        extra = self.extension(student, assignment)
        if extra is None or assignment not in self.due:
            return ""
        return f"extension of {format_duration(extra)}: due {self.due_for(student, assignment).isoformat()}"

    def penalty(self, assignment, submitted, student=None):
        """(days late, share of the points taken off) for a submission time; (0, 0) when on time,
        without a due date, or without a timestamp. With `student`, their extension counts."""
        due = self.due_for(student, assignment)
        if due is None or submitted is None:
            return 0, 0.0
        late = (submitted - due).total_seconds() - 60 * self.grace_minutes
        if late <= 0:
            return 0, 0.0
        days = math.ceil(late / 86400)
        return days, min(self.cap, days * self.per_day)


def _known(ids, name, assignments):
    wrong = sorted(a for a in ids if assignments is not None and a not in assignments)
    if wrong:
        raise ValueError(f"{name} names {', '.join(wrong)}, not an assignment of this course "
                         f"(known: {', '.join(sorted(assignments))})")


def parse_duration(value):
    """'2 days', '36 hours', '90 minutes', '1 day 12 hours' (or a timedelta) as a timedelta."""
    if isinstance(value, dt.timedelta):
        if value < dt.timedelta(0):
            raise ValueError(f"{value} is negative")
        return value
    text = str(value).strip().lower()
    pos, seconds = 0, 0.0
    while pos < len(text):
        m = _DURATION.match(text, pos)
        if not m or m.group(2) not in _UNITS:
            break
        seconds += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    else:
        if text:
            return dt.timedelta(seconds=seconds)
    raise ValueError(f"{value!r} is not a duration (write e.g. '2 days', '36 hours', '90 minutes' "
                     "or '1 day 12 hours')")


def format_duration(delta):
    """A timedelta in words, to the minute: '2 days', '1 day 12 hours', '90 minutes' -> '1 hour 30 minutes'."""
    minutes = round(delta.total_seconds() / 60)
    parts = []
    for name, size in (("day", 1440), ("hour", 60), ("minute", 1)):
        n, minutes = divmod(minutes, size)
        if n:
            parts.append(f"{n} {name}{'s' if n != 1 else ''}")
    return " ".join(parts) or "0 minutes"


def _extensions(config, due, assignments):
    """{student: {assignment or EVERY: timedelta}} from c.LatePolicy.extensions, refused when wrong."""
    if not config:
        return {}
    if not isinstance(config, dict):
        raise ValueError("c.LatePolicy.extensions must be a dict {student: duration} or "
                         "{student: {assignment: duration}}, not " + repr(config))
    out = {}
    for student, given in config.items():
        name = f"c.LatePolicy.extensions[{student!r}]"
        if not isinstance(student, str) or not student.strip():
            raise ValueError(f"{name}: a student id must be a non-empty string")
        flat = not isinstance(given, dict)
        if flat:
            given = {EVERY: given}
        if not given:
            raise ValueError(f"{name} is empty (give a duration, or {{assignment: duration}})")
        _known([a for a in given if a != EVERY], name, assignments)
        out[student] = {}
        for assignment, duration in given.items():
            where = name if flat else f"{name}[{assignment!r}]"
            if assignment != EVERY and assignment not in due:
                raise ValueError(f"{where}: {assignment} has no due date in c.LatePolicy.due, so an "
                                 "extension would change nothing")
            try:
                out[student][assignment] = parse_duration(duration)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
    return out


def _number(config, key, default, top=1.0):
    value = config.get(key, default)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"c.LatePolicy.{key} must be a number, not {value!r}") from None
    if value < 0 or (top is not None and value > top) or math.isnan(value):
        raise ValueError(f"c.LatePolicy.{key} = {value:g} is out of range "
                         + (f"(a share of the points: 0 to {top:g})" if top else "(0 or more)"))
    return value


def parse_time(text):
    """An ISO 8601 time with a zone; nbgrader's timestamp.txt ('2026-11-20 17:03:01.123456 UTC')
    too. A time without a zone is refused: a deadline must not move with the grader's clock."""
    text = text.strip()
    if text.endswith(" UTC"):
        text = text[:-4] + "+00:00"
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"the time {text!r} has no time zone (write e.g. 2026-11-20T23:59:00+01:00)")
    return value


def aware(value, zone):
    """A submission time with a zone: a zip's zone-less time is read in `zone` (a tzinfo)."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=zone)


@dataclasses.dataclass
class Settings:
    """What the export needs beyond the grades: who is who in the LMS, and the late rule."""

    roster: dict = dataclasses.field(default_factory=dict)  # student id -> {column: value}
    roster_path: str = ""
    canvas_ids: dict = dataclasses.field(default_factory=dict)
    moodle_identifier: str = "Username"
    zip_timezone: object = dt.timezone.utc
    late: LatePolicy = None

    SECTIONS = {"LMSExport": {"roster", "canvas_assignment_ids", "moodle_identifier", "zip_timezone"},
                "LatePolicy": set(LatePolicy.SETTINGS)}

    @classmethod
    def load(cls, sections, course_root, assignments=None):
        """From the config's LMSExport and LatePolicy sections ({name: {key: value}});
        assignments: the course's ids, to refuse a due date for one that does not exist."""
        lms_cfg = dict(sections.get("LMSExport") or {})
        unknown = set(lms_cfg) - cls.SECTIONS["LMSExport"]
        if unknown:
            raise ValueError(f"c.LMSExport has no setting {', '.join(sorted(unknown))} "
                             f"(it has {', '.join(sorted(cls.SECTIONS['LMSExport']))})")
        settings = cls()
        if lms_cfg.get("roster"):
            path = os.path.join(course_root, str(lms_cfg["roster"]))
            if not os.path.isfile(path):
                raise ValueError(f"c.LMSExport.roster: {path} does not exist")
            settings.roster, settings.roster_path = read_mapping(path), path
        settings.canvas_ids = {str(a): str(i) for a, i in dict(lms_cfg.get("canvas_assignment_ids") or {}).items()}
        default_id = "Email address" if settings.roster else "Username"
        settings.moodle_identifier = str(lms_cfg.get("moodle_identifier") or default_id)
        if settings.roster and not any(settings.moodle_identifier in row for row in settings.roster.values()):
            raise ValueError(f"c.LMSExport.moodle_identifier: the roster has no column "
                             f"{settings.moodle_identifier!r} (columns: "
                             f"{', '.join(next(iter(settings.roster.values()), {}))})")
        zone = lms_cfg.get("zip_timezone") or "UTC"
        try:
            settings.zip_timezone = zoneinfo.ZoneInfo(str(zone))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"c.LMSExport.zip_timezone: unknown time zone {zone!r} "
                             "(an IANA name such as 'UTC' or 'Europe/Berlin')") from None
        late = sections.get("LatePolicy")
        if late:
            settings.late = LatePolicy.from_config(dict(late), assignments)
        _known(settings.canvas_ids, "c.LMSExport.canvas_assignment_ids", assignments)
        return settings


def read_mapping(path):
    """{course student id: {column: value}} from a CSV whose first column is `student_id`."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or reader.fieldnames[0] != "student_id":
            raise ValueError(f"{path}: the first column must be 'student_id' (the course's ids)")
        mapping = {}
        for row in reader:
            if row["student_id"] in mapping:
                raise ValueError(f"{path}: student_id {row['student_id']!r} appears twice")
            mapping[row["student_id"]] = {k: v for k, v in row.items() if k != "student_id"}
        return mapping


def apply_penalties(grades, policy, submitted_at):
    """grades: [{student_id, assignment, score, max_score, status}]; submitted_at: {(student,
    assignment): datetime}. Returns new rows with `submitted_at, days_late, penalty, final_score`,
    and `extension` (the student's extension in words, '' without one)."""
    out = []
    for row in grades:
        student, assignment = row["student_id"], row["assignment"]
        when = submitted_at.get((student, assignment))
        days, share = policy.penalty(assignment, when, student) if policy else (0, 0.0)
        extra = policy.extension(student, assignment) if policy and assignment in policy.due else None
        score = row.get("score")
        final = None if score is None else round(score - share * score, 6)
        out.append(dict(row, submitted_at=when.isoformat() if when else "", days_late=days,
                        penalty=share, final_score=final,
                        extension=format_duration(extra) if extra is not None else ""))
    return out


def _score(row):
    value = row.get("final_score", row.get("score"))
    return "" if value is None else f"{value:g}"


def canvas_rows(grades, mapping, canvas_ids=None):
    """The rows of a Canvas gradebook import (header, Points Possible, one per student) and the
    students the mapping lacks. canvas_ids: {assignment: Canvas assignment id} (else new columns)."""
    canvas_ids = canvas_ids or {}
    assignments = sorted({g["assignment"] for g in grades})
    maxima = {a: max(g["max_score"] or 0 for g in grades if g["assignment"] == a) for a in assignments}
    columns = [f"{a} ({canvas_ids[a]})" if a in canvas_ids else a for a in assignments]
    rows = [list(CANVAS_IDENTITY) + columns,
            ["Points Possible", "", "", "", ""] + [f"{maxima[a]:g}" for a in assignments]]
    unmapped = []
    for student in sorted({g["student_id"] for g in grades}):
        who = mapping.get(student)
        if who is None:
            unmapped.append(student)
            who = {"Student": student, "SIS Login ID": student}
        scores = {g["assignment"]: _score(g) for g in grades if g["student_id"] == student}
        rows.append([who.get(c, "") for c in CANVAS_IDENTITY] + [scores.get(a, "") for a in assignments])
    return rows, unmapped


def moodle_rows(grades, mapping, identifier="Email address"):
    """The rows of a Moodle CSV grade import: the identifying column, then one per assignment."""
    assignments = sorted({g["assignment"] for g in grades})
    rows, unmapped = [[identifier] + assignments], []
    for student in sorted({g["student_id"] for g in grades}):
        who = mapping.get(student, {}).get(identifier)
        if not who:
            unmapped.append(student)
            who = student
        scores = {g["assignment"]: _score(g) for g in grades if g["student_id"] == student}
        rows.append([who] + [scores.get(a, "") for a in assignments])
    return rows, unmapped


def write_csv(path, rows):
    """rows to path (whole or not at all), formula cells neutralised (csvsafe)."""
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        csvsafe.writer(fh, lineterminator="\n").writerows(rows)
    os.replace(tmp, path)
