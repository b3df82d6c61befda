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
"""
import csv
import dataclasses
import datetime as dt
import math
import os

CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


@dataclasses.dataclass(frozen=True)
class LatePolicy:
    """`per_day` of the points are taken off for each started day late (after `grace_minutes`),
    at most `cap` of them. Due dates are per assignment, timezone-aware ISO 8601."""

    due: dict  # assignment -> datetime
    per_day: float = 0.1
    cap: float = 0.5
    grace_minutes: float = 0.0

    @classmethod
    def from_config(cls, config):
        due = {a: parse_time(t) for a, t in (config.get("due") or {}).items()}
        return cls(due=due, per_day=float(config.get("per_day", 0.1)), cap=float(config.get("cap", 0.5)),
                   grace_minutes=float(config.get("grace_minutes", 0.0)))

    def penalty(self, assignment, submitted):
        """(days late, share of the points taken off) for a submission time; (0, 0) when on time,
        without a due date, or without a timestamp."""
        due = self.due.get(assignment)
        if due is None or submitted is None:
            return 0, 0.0
        late = (submitted - due).total_seconds() - 60 * self.grace_minutes
        if late <= 0:
            return 0, 0.0
        days = math.ceil(late / 86400)
        return days, min(self.cap, days * self.per_day)


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


def read_mapping(path):
    """{course student id: {column: value}} from a CSV whose first column is `student_id`."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or reader.fieldnames[0] != "student_id":
            raise ValueError(f"{path}: the first column must be 'student_id' (the course's ids)")
        return {row["student_id"]: {k: v for k, v in row.items() if k != "student_id"} for row in reader}


def apply_penalties(grades, policy, submitted_at):
    """grades: [{student_id, assignment, score, max_score, status}]; submitted_at: {(student,
    assignment): datetime}. Returns new rows with `submitted_at, days_late, penalty, final_score`."""
    out = []
    for row in grades:
        when = submitted_at.get((row["student_id"], row["assignment"]))
        days, share = policy.penalty(row["assignment"], when) if policy else (0, 0.0)
        score = row.get("score")
        final = None if score is None else round(score - share * score, 6)
        out.append(dict(row, submitted_at=when.isoformat() if when else "", days_late=days,
                        penalty=share, final_score=final))
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
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    os.replace(tmp, path)
