"""Export: the class's results as CSVs and feedback files, rebuilt from the per-student results.

Why from results and not from the gradebook: the results are what this run decided (including
students who could not be graded, who have no gradebook rows), and rebuilding every CSV from
them, sorted, makes two runs on the same input byte-identical. The course gradebook still gets
every grade (batch.merge), so nbgrader's own `export` and formgrader keep working.

Columns: see autograder/README.md. `status` is `graded`, `not_submitted` or `could_not_grade`.
"""
import csv
import os
import shutil

from .intake import SOLUTION_STUDENT


def _num(x):
    return f"{x:g}" if x is not None else ""


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
    reported in `failures`, never a traceback that loses every other file."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
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


def write_all(batch, taken, results, assignments):
    """Write the CSVs and feedback; returns the files that could not be written (say, a full
    disk): the caller reports them. problems.csv and grades.csv are written first."""
    failures = []
    out = batch.out
    os.makedirs(out, exist_ok=True)
    students = sorted((taken.students | batch.known_students()
                       | {s for s, _ in results}) - {SOLUTION_STUDENT})
    grades, by_cell = [], []
    problems = {(p.student_id, p.assignment, p.problem) for p in batch.problems}
    fb_root = os.path.join(out, "feedback")
    copies = []  # feedback is copied after the CSVs: they matter most when space runs out
    if os.path.isdir(fb_root):
        shutil.rmtree(fb_root)
    for a in assignments:
        template = _template_cells(batch.prepared[a]["template_db"])
        max_total = sum(m for _, _, m in template)
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
                    copies.append((html, os.path.join(fb_root, s, a, os.path.basename(html))))
    _write(os.path.join(out, "grades.csv"),
           ["student_id", "assignment", "score", "max_score", "status"], grades, failures)
    _write(os.path.join(out, "problems.csv"), ["student_id", "assignment", "problem"],
           sorted(problems), failures)
    _write(os.path.join(out, "grades_by_cell.csv"),
           ["student_id", "assignment", "notebook", "grade_id", "score", "max_score", "status"],
           by_cell, failures)
    for src, dest in copies:
        _copy(src, dest, failures)
    return failures
