"""Regrades you can trust: what changed since the last run, and the last run's files kept.

Why: after a hidden test or a mistake catalogue changes, `--regrade` (or the automatic regrade
of a changed assignment) rewrites every CSV. An instructor who has already sent grades must see
whose score moved, by how much and why, and must be able to go back. So each run:

1. before writing anything, copies the result files of the previous run (`grades.csv`,
   `grades_by_cell.csv`, `problems.csv`, `mistakes.csv`, `report.html`, `canvas.csv`,
   `moodle.csv`, `regrade.csv`, the record below as `results.json`) and moves its `feedback/`
   into `DIR/history/<UTC time>/`;
2. writes the new files, and `regrade.csv` comparing the two runs cell by cell;
3. deletes that history folder again only when every file in it is byte-identical to the new
   one (nothing would be lost), so `history/` holds one folder per run that changed something.
   (regrade.csv alone does not count: it only compares the two runs before, whose records are
   both kept.)

The record of a run is `DIR/.work/graded.json`: per student and assignment the status, each test
cell's score, first error message (`message` in the shard's result.json) and outcome (the mistake
the catalogue of *that* run named, see report.classify), a fingerprint of the assignment's tests
and catalogues (`inputs`) and one of the submitted notebooks (`submission`). The `reason` column
of regrade.csv comes from comparing those two fingerprints:

- `submission changed`: the student uploaded something else;
- `tests changed`: the assignment's source, hidden tests, catalogues or limits changed;
- `same tests and submission`: nothing the grade depends on changed, yet it moved: a test that
  is not deterministic (look at it before sending grades);
- `earlier run not recorded`: the previous run predates the record (scores come from the old
  grades_by_cell.csv; messages and outcomes are unknown).
"""
import csv
import datetime as dt
import filecmp
import json
import os
import shutil

RESULT_FILES = ("grades.csv", "grades_by_cell.csv", "problems.csv", "mistakes.csv", "report.html", "class_overview.html",
                "canvas.csv", "moodle.csv", "regrade.csv")
RECORD = os.path.join(".work", "graded.json")
HEADER = ["student_id", "assignment", "old_score", "new_score", "change", "notebook", "grade_id",
          "old_cell_score", "new_cell_score", "old_outcome", "new_outcome", "old_message",
          "new_message", "reason"]
SUBMISSION_CHANGED, TESTS_CHANGED = "submission changed", "tests changed"
SAME_INPUTS, UNRECORDED = "same tests and submission", "earlier run not recorded"


def _stamp(now=None):
    return (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


class History:
    """The previous run's files, set aside before an export and dropped if nothing changed."""

    def __init__(self, out, now=None):
        self.out = out
        base = os.path.join(out, "history", _stamp(now))
        self.dir, n = base, 1
        while os.path.exists(self.dir):
            n += 1
            self.dir = f"{base}-{n}"
        self.saved = []  # names (relative to out) copied into self.dir
        self.previous = load_record(out)

    def begin(self):
        """Copy the previous result files (and move feedback/) into the history folder."""
        sources = [(name, os.path.join(self.out, name)) for name in RESULT_FILES]
        sources.append(("results.json", os.path.join(self.out, RECORD)))
        for name, path in sources:
            if os.path.isfile(path):
                os.makedirs(self.dir, exist_ok=True)
                shutil.copy2(path, os.path.join(self.dir, name))
                self.saved.append(name)
        feedback = os.path.join(self.out, "feedback")
        if os.path.isdir(feedback):
            os.makedirs(self.dir, exist_ok=True)
            os.rename(feedback, os.path.join(self.dir, "feedback"))
            self.saved.append("feedback")
        return self

    def finish(self):
        """Remove the history folder when the new files equal the old ones; returns its path
        when it is kept (something changed), else None."""
        if not self.saved:
            return None
        for name in self.saved:
            if name == "regrade.csv":  # the difference of the two runs before: derivable, not a result
                continue
            old = os.path.join(self.dir, name)
            new = os.path.join(self.out, RECORD if name == "results.json" else name)
            if name == "feedback":
                if not _same_tree(old, new):
                    return self.dir
            elif not (os.path.isfile(new) and filecmp.cmp(old, new, shallow=False)):
                return self.dir
        shutil.rmtree(self.dir)
        parent = os.path.dirname(self.dir)
        if not os.listdir(parent):
            os.rmdir(parent)
        return None


def _same_tree(a, b):
    if not os.path.isdir(b):
        return False
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(
        _same_tree(os.path.join(a, d), os.path.join(b, d)) for d in cmp.common_dirs)


def load_record(out):
    """{(student, assignment): entry} of the previous run, from graded.json or, for a run that
    predates it, from grades_by_cell.csv (scores only); {} on the first run."""
    try:
        with open(os.path.join(out, RECORD), encoding="utf-8") as fh:
            data = json.load(fh)
        return {(e["student_id"], e["assignment"]): e for e in data["results"]}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    path = os.path.join(out, "grades_by_cell.csv")
    if not os.path.isfile(path):
        return {}
    record = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            entry = record.setdefault((row["student_id"], row["assignment"]), {
                "student_id": row["student_id"], "assignment": row["assignment"],
                "status": row.get("status", ""), "cells": [], "inputs": None, "submission": None})
            entry["cells"].append({"notebook": row["notebook"], "grade_id": row["grade_id"],
                                   "score": float(row["score"]) if row["score"] else None,
                                   "message": "", "outcome": ""})
    return record


def write_record(out, entries):
    path = os.path.join(out, RECORD)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"results": sorted(entries, key=lambda e: (e["student_id"], e["assignment"]))},
                  fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _total(entry):
    if entry.get("status") not in ("graded", "not_submitted"):
        return None
    return sum(c["score"] or 0.0 for c in entry["cells"])


def _num(x):
    return "" if x is None else f"{x:g}"


def _reason(old, new):
    if old.get("inputs") is None or old.get("submission") is None:
        return UNRECORDED
    if old["submission"] != new.get("submission"):
        return SUBMISSION_CHANGED
    if old["inputs"] != new.get("inputs"):
        return TESTS_CHANGED
    return SAME_INPUTS


def diff(previous, current):
    """regrade.csv's rows: one per test cell whose score changed (and one, with an empty
    grade_id, per submission whose status changed), for students graded in both runs."""
    rows = []
    for key in sorted(set(previous) & set(current)):
        old, new = previous[key], current[key]
        old_total, new_total = _total(old), _total(new)
        change = "" if old_total is None or new_total is None else _num(round(new_total - old_total, 6))
        head = [key[0], key[1], _num(old_total), _num(new_total), change]
        reason = _reason(old, new)
        if old.get("status") != new.get("status"):
            rows.append(head + ["", "", "", "", old.get("status", ""), new.get("status", ""), "", "", reason])
            continue
        old_cells = {(c["notebook"], c["grade_id"]): c for c in old["cells"]}
        for cell in new["cells"]:
            before = old_cells.get((cell["notebook"], cell["grade_id"]))
            if before is None or before["score"] == cell["score"]:
                continue
            rows.append(head + [cell["notebook"], cell["grade_id"], _num(before["score"]),
                                _num(cell["score"]), before.get("outcome", ""), cell.get("outcome", ""),
                                before.get("message", ""), cell.get("message", ""), reason])
    return rows
