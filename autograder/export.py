"""Export: the class's results as CSVs and feedback files, rebuilt from the per-student results.

Why from results and not from the gradebook: the results are what this run decided (including
students who could not be graded, who have no gradebook rows), and rebuilding every CSV from
them, sorted, makes two runs on the same input byte-identical. The course gradebook still gets
every grade (batch.merge), so nbgrader's own `export` and formgrader keep working.

Columns: see autograder/README.md. `status` is `graded`, `not_submitted` or `could_not_grade`.

Beside them: `canvas.csv` and `moodle.csv` (lms.py: the LMS's import formats, students named by
the configured roster), the late penalty of each submission when a due date is configured (four
more columns of grades.csv, a fifth, `extension`, when students have extensions, and a line in
problems.csv for each late or undated submission and each one an extension kept on time: a
penalty is never silent), `regrade.csv` and `history/` (regrade.py: what a rerun changed, and
the previous run's files). The settings arrive as `batch.export_settings` (an lms.Settings, set
by the command line from the course's config); without it nothing is mapped or penalised.
"""
import hashlib
import os
import re
import shutil

from . import csvsafe, lms, regrade, report
from .intake import SOLUTION_STUDENT

LATE_COLUMNS = ["submitted_at", "days_late", "penalty", "final_score"]


def _num(x):
    return f"{x:g}" if x is not None else ""


# A test cell of an exercise with separable parts (mistakes.Part) gets, below its own row in
# grades_by_cell.csv, one row per part: grade_id `<test cell id>:<part name>`, the part's points
# and its maximum (the cell's max_score times the part's share). The cell's own row, and
# grades.csv, keep nbgrader's score; the part rows only split it.
PART_SEPARATOR = ":"


def _parts_of(assignment):
    """{test cell grade_id: the exercise's parts} of an assignment's catalogue."""
    try:
        exercises = report.load_catalogue(assignment)
    except Exception:  # noqa: BLE001 - a broken catalogue already failed the grading itself
        return {}
    return {f"{gid}_tests": tuple(ex.parts) for gid, ex in exercises.items() if getattr(ex, "parts", ())}


def _graded_parts(batch, student, assignment, notebook, grade_id):
    """The judge's record of a partially credited cell (judge.PARTS_KEY), or None."""
    work = getattr(batch, "work", None)
    if not work:
        return None
    path = os.path.join(work, "shards", assignment, student, "autograded", student, assignment, notebook + ".ipynb")
    try:
        import nbformat
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - no notebook: the parts are told from the score alone
        return None
    from .judge import PARTS_KEY
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            record = cell.get("metadata", {}).get(PARTS_KEY)
            return record if isinstance(record, dict) else None
    return None


def _part_rows(batch, parts, row):
    """The rows of one cell's parts, from its grades_by_cell row [s, a, nb, gid, score, max, status].
    Full or zero marks split evenly into full or zero parts; a partial score is split as the judge
    recorded it, when that record adds up to the score (else the parts' scores are left empty)."""
    s, a, nb, gid, score, max_score, status = row
    maxima = [float(max_score or 0) * p.share for p in parts]
    if score == "":
        scores = [None] * len(parts)
    elif float(score) >= float(max_score or 0):
        scores = maxima
    elif float(score) == 0:
        scores = [0.0] * len(parts)
    else:
        record = _graded_parts(batch, s, a, nb, gid) or {}
        got = {p.get("name"): p.get("points") for p in record.get("parts", []) if isinstance(p, dict)}
        try:
            scores = [float(got[p.name]) for p in parts]
            if abs(sum(scores) - float(score)) > 1e-3:
                raise ValueError("the parts do not add up to the cell's score")
        except (KeyError, TypeError, ValueError):
            scores = [None] * len(parts)
    return [[s, a, nb, f"{gid}{PART_SEPARATOR}{p.name}", _num(None if v is None else round(v, 4)),
             _num(round(m, 4)), status] for p, v, m in zip(parts, scores, maxima)]


def _template_cells(db_path):
    """[(notebook, grade_id, max_score)] of an assignment's template gradebook."""
    from nbgrader.api import Gradebook
    cells = []
    with Gradebook("sqlite:///" + db_path) as gb:
        for assignment in gb.assignments:
            for nb in assignment.notebooks:
                for gc in nb.grade_cells:
                    cells.append((nb.name, gc.name, float(gc.max_score)))
    return sorted(cells)


def _write(path, header, rows, failures):
    """Write a whole CSV or leave the old one: a temp file, then os.replace. A full disk is
    reported in `failures`, never a traceback that loses every other file. Every cell goes
    through csvsafe: no text a student controls becomes a spreadsheet formula."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csvsafe.writer(fh, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)
        os.replace(tmp, path)
    except OSError as exc:
        failures.append(f"{path}: {exc.strerror or exc}")
        try:
            os.remove(tmp)
        except OSError:
            pass


def _copy(src, dest, failures):
    try:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(src, dest)
    except OSError as exc:
        failures.append(f"{dest}: {exc.strerror or exc}")


def _submission_hash(files):
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0")
        try:
            with open(files[name], "rb") as fh:
                digest.update(hashlib.sha256(fh.read()).digest())
        except OSError:
            digest.update(b"?")
    return digest.hexdigest()


def _late(settings, taken, grades, problems, students=()):
    """grades.csv's late columns ({(student, assignment): [cells]}: LATE_COLUMNS, and `extension`
    when c.LatePolicy.extensions is set); problems.csv says why, and names an extension that
    moved a submission from late to on time, or that names a student the run does not know."""
    policy = settings.late
    subs = {(s.student_id, s.assignment): s for s in taken.submissions}
    when = {}
    for key, sub in subs.items():
        if sub.submitted_at is not None:
            when[key] = lms.aware(sub.submitted_at, settings.zip_timezone)
    rows = [{"student_id": g[0], "assignment": g[1], "score": float(g[2]) if g[2] else None,
             "max_score": float(g[3]) if g[3] else 0.0, "status": g[4]} for g in grades]
    columns, rows = {}, lms.apply_penalties(rows, policy, when)
    for row in rows:
        key = (row["student_id"], row["assignment"])
        columns[key] = [row["submitted_at"], str(row["days_late"]), f"{row['penalty']:g}",
                        "" if row["final_score"] is None else f"{row['final_score']:g}"]
        if policy.extensions:
            columns[key].append(row["extension"])
        due = policy.due.get(row["assignment"])
        if due is None or row["status"] == "not_submitted":
            continue
        sub = subs.get(key)
        moved = policy.due_for(*key)
        due_text = (f"the due date {due.isoformat()}" if moved == due else
                    f"the due date {moved.isoformat()} ({due.isoformat()} with an extension of "
                    f"{row['extension']})")
        if key not in when:
            problems.add((*key, "no submission time is known (no timestamp.txt, not from a zip): "
                          "no late penalty was applied; check it by hand"))
        elif row["days_late"]:
            problems.add((*key, f"submitted {row['submitted_at']} (from {sub.timestamp_from}), "
                          f"{row['days_late']} started day(s) after {due_text}: "
                          f"{row['penalty']:.0%} of the points taken off (score "
                          f"{_cell(row['score'])} -> final_score {_cell(row['final_score'])})"))
        elif policy.penalty(key[1], when[key])[0]:
            problems.add((*key, f"submitted {row['submitted_at']} (from {sub.timestamp_from}), after "
                          f"the due date {due.isoformat()} but within the extension of "
                          f"{row['extension']} (due {moved.isoformat()}): no late penalty"))
    for student in sorted(set(policy.extensions) - set(students)):
        problems.add((student, "", "c.LatePolicy.extensions gives this student an extension, but no "
                      "such student is in this run: a misspelt id?"))
    return columns, rows


def _cell(x):
    return "" if x is None else f"{x:g}"


def _lms_files(settings, rows, problems):
    """{file name: rows} of canvas.csv and moodle.csv; a student the roster lacks is a problem."""
    canvas, unmapped = lms.canvas_rows(rows, settings.roster, settings.canvas_ids)
    moodle, _ = lms.moodle_rows(rows, settings.roster, settings.moodle_identifier)
    if settings.roster:
        for student in unmapped:
            problems.add((student, "", f"not in the roster ({os.path.basename(settings.roster_path)}): "
                          "canvas.csv and moodle.csv list this student under the course id; add a row"))
    return {"canvas.csv": canvas, "moodle.csv": moodle}


def _outcome(outcome):
    """A cell's outcome as regrade.csv's text: the mistake's name, else its kind ('passed', ...);
    report.classify gives a string or an object with `kind` and `mistake`."""
    if isinstance(outcome, str):
        return outcome
    return getattr(outcome, "mistake", "") or str(getattr(outcome, "kind", outcome))


def _record(batch, taken, results):
    """The entries of .work/graded.json (see regrade.py)."""
    files = {(s.student_id, s.assignment): s.files for s in taken.submissions}
    catalogues, entries = {}, {}
    for (student, assignment), r in results.items():
        if student == SOLUTION_STUDENT:
            continue
        if assignment not in catalogues:
            catalogues[assignment] = report.load_catalogue(assignment)
        cells = []
        for c in r.get("cells", []):
            exercise = report.exercise_of(c["grade_id"])
            cells.append({"notebook": c["notebook"], "grade_id": c["grade_id"], "score": c["score"],
                          "message": c.get("message", ""),
                          "outcome": _outcome(report.classify(c, catalogues[assignment].get(exercise)))})
        prepared = getattr(batch, "prepared", {}).get(assignment, {})
        entries[(student, assignment)] = {
            "student_id": student, "assignment": assignment, "status": r["status"],
            "cells": sorted(cells, key=lambda c: (c["notebook"], c["grade_id"])),
            "inputs": prepared.get("fp"),
            "submission": _submission_hash(files[(student, assignment)]) if (student, assignment) in files else None}
    return entries


def _text(text, dest, failures):
    try:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        failures.append(f"{dest}: {exc.strerror or exc}")


_REVIEW_WHERE = re.compile(r"(cell \d+) .*?\(`(.*)`\)")


def _review(batch, student, assignment, result):
    """The "worth a look" lines of a graded submission (judge.REVIEW_KEY on its test cells: what
    the forbidden-route reader could not tell from a habit; they cost no point), read from the
    graded notebooks in its shard, once each, prefixed by the notebook's name; also kept in
    result["review"] for the class overview (report.py)."""
    if result.get("status") != "graded" or "review" in result:
        return result.get("review", [])
    from .judge import REVIEW_KEY
    import nbformat
    folder = os.path.join(getattr(batch, "work", ""), "shards", assignment, student, "autograded", student, assignment)
    notes, quoted = [], set()
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not name.endswith(".ipynb"):
            continue
        try:
            nb = nbformat.read(os.path.join(folder, name), as_version=4)
        except Exception:  # noqa: BLE001 - nbgrader's notebook; its problems are reported elsewhere
            continue
        for cell in nb.cells:
            for note in cell.get("metadata", {}).get(REVIEW_KEY, []) or []:
                # One line per line of the notebook: each test cell reads the same cells, and one
                # line can name several paths (`importlib`, `importlib.util`, ...): the first says it.
                where = _REVIEW_WHERE.search(str(note))
                key = (name, where.group(1), where.group(2)) if where else (name, str(note))
                if key not in quoted:
                    quoted.add(key)
                    notes.append(f"{name}: {note}"[:1000])
    result["review"] = notes
    return notes


def write_all(batch, taken, results, assignments):
    """Write the CSVs and feedback; returns the files that could not be written (say, a full
    disk): the caller reports them. problems.csv and grades.csv are written first. The previous
    run's files go to history/ first (regrade.py); if they cannot, nothing is overwritten."""
    failures = []
    out = batch.out
    settings = getattr(batch, "export_settings", None) or lms.Settings()
    os.makedirs(out, exist_ok=True)
    try:
        history = regrade.History(out).begin()
    except OSError as exc:
        return [f"{os.path.join(out, 'history')}: {exc.strerror or exc} (the previous results "
                "could not be kept, so none of them was replaced)"]
    students = sorted((taken.students | batch.known_students()
                       | {s for s, _ in results}) - {SOLUTION_STUDENT})
    grades, by_cell = [], []
    problems = {(p.student_id, p.assignment, p.problem) for p in batch.problems}
    fb_root = os.path.join(out, "feedback")
    copies = []  # feedback is copied after the CSVs: they matter most when space runs out
    if os.path.isdir(fb_root):  # history moved it; what is left is not a previous result
        shutil.rmtree(fb_root)
    subs = {(sub.student_id, sub.assignment): sub for sub in taken.submissions}
    for a in assignments:
        template = _template_cells(batch.prepared[a]["template_db"])
        max_total = sum(m for _, _, m in template)
        parts, first_row = _parts_of(a), len(by_cell)
        for s in students:
            r = results.get((s, a))
            if r is None:
                status = "could_not_grade" if (s, a) in taken.attempted else "not_submitted"
                if status == "not_submitted" and s in taken.students:
                    problems.add((s, a, "no submission for this assignment"))
                score = None if status == "could_not_grade" else 0.0
                grades.append([s, a, _num(score), _num(max_total), status])
                for nb, gid, m in template:
                    by_cell.append([s, a, nb, gid, _num(score), _num(m), status])
                continue
            status = r["status"]
            for p in r.get("problems", []):
                problems.add((s, a, p))
            for note in _review(batch, s, a, r):
                problems.add((s, a, note))
            got = {(c["notebook"], c["grade_id"]): c["score"] for c in r.get("cells", [])}
            if status == "graded":
                total = sum(got.get((nb, gid), 0.0) for nb, gid, _ in template)
                grades.append([s, a, _num(total), _num(max_total), status])
            else:
                grades.append([s, a, "", _num(max_total), status])
            for nb, gid, m in template:
                sc = got.get((nb, gid), 0.0) if status == "graded" else None
                by_cell.append([s, a, nb, gid, _num(sc), _num(m), status])
            for name, html in sorted(r.get("feedback", {}).items()):
                if os.path.exists(html):
                    copies.append((_copy, html, os.path.join(fb_root, s, a, os.path.basename(html))))
            if r.get("feedback") and (s, a) in subs:
                # nbgrader's feedback folder layout: `nbgrader release_feedback` can serve it
                for name, text in sorted(subs[(s, a)].exchange_files.items()):
                    copies.append((_text, text, os.path.join(fb_root, s, a, name)))
        if parts:  # each cell with parts is followed by one row per part
            rows, by_cell[first_row:] = by_cell[first_row:], []
            for row in rows:
                by_cell.append(row)
                if row[3] in parts:
                    by_cell.extend(_part_rows(batch, parts[row[3]], row))
    header = ["student_id", "assignment", "score", "max_score", "status"]
    lms_rows = [{"student_id": g[0], "assignment": g[1], "score": float(g[2]) if g[2] else None,
                 "max_score": float(g[3]) if g[3] else 0.0, "status": g[4]} for g in grades]
    if settings.late is not None:
        late, lms_rows = _late(settings, taken, grades, problems, students)
        header += LATE_COLUMNS + (["extension"] if settings.late.extensions else [])
        grades = [g + late[(g[0], g[1])] for g in grades]
    lms_files = _lms_files(settings, lms_rows, problems)
    _write(os.path.join(out, "grades.csv"), header, grades, failures)
    _write(os.path.join(out, "problems.csv"), ["student_id", "assignment", "problem"],
           sorted(problems), failures)
    _write(os.path.join(out, "grades_by_cell.csv"),
           ["student_id", "assignment", "notebook", "grade_id", "score", "max_score", "status"],
           by_cell, failures)
    for name, rows in lms_files.items():
        _write(os.path.join(out, name), rows[0], rows[1:], failures)
    record = _record(batch, taken, results)
    if history.previous:
        _write(os.path.join(out, "regrade.csv"), regrade.HEADER,
               regrade.diff(history.previous, record), failures)
    for write, src, dest in copies:
        write(src, dest, failures)
    try:  # also written by the batch after this; here so that history compares the new one
        report.write(results.values(), out)
    except Exception:  # noqa: BLE001 - the batch writes it again and reports a failure
        pass
    try:
        regrade.write_record(out, record.values())
    except OSError as exc:
        failures.append(f"{os.path.join(out, regrade.RECORD)}: {exc.strerror or exc}")
    if not failures:
        batch.history_kept = history.finish()
    return failures
