"""Building courses and students for the grading tests.

A course is a temporary folder with `solutions/<assignment>/` copied from a source (the fixture,
or the real course's `solutions/`); a student notebook is the nbgrader *release* of that source
(made by nbgrader generate_assignment, as students get it) with the answer cells filled in from
the solution, then edited by the hostile case.
"""
import csv
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import nbformat

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "source"
PYTHON = sys.executable
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

_SOLUTION = re.compile(r"[ \t]*### BEGIN SOLUTION\n(.*?)[ \t]*### END SOLUTION\n?", re.S)


def sandbox_unavailable():
    sys.path.insert(0, str(REPO))
    from autograder import sandbox
    return sandbox.why_unavailable()


def make_course(root, source=FIXTURE, assignments=None):
    """A course folder with solutions/ and a private release/ of each assignment.

    For the course's own solutions/, the release is the course's notebooks/ (what students are
    given; tests/test_release.py keeps it equal to nbgrader's release of solutions/), copied
    rather than generated again: a real course of twelve assignments is then built in a second,
    not in a minute of nbgrader. Other sources (the fixture) are released by nbgrader here.
    """
    root = pathlib.Path(root)
    for a in sorted(os.listdir(source)):
        if assignments and a not in assignments:
            continue
        if (pathlib.Path(source) / a).is_dir():
            shutil.copytree(pathlib.Path(source) / a, root / "solutions" / a,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    work = root / "_gen"
    if pathlib.Path(source).resolve() == (REPO / "solutions").resolve():
        for a in sorted(os.listdir(root / "solutions")):
            shutil.copytree(REPO / "notebooks" / a, work / "release" / a,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        return root
    from autograder.batch import _generate
    for a in sorted(os.listdir(root / "solutions")):
        _generate(str(root / "solutions"), str(work / "release"), str(work / "template.db"), a, str(work))
        (work / "template.db").unlink()
    return root


def release(course, assignment, notebook):
    return nbformat.read(course / "_gen" / "release" / assignment / notebook, as_version=4)


def solution(course, assignment, notebook):
    return nbformat.read(course / "solutions" / assignment / notebook, as_version=4)


def honest(course, assignment, notebook):
    """The release with every answer cell holding the solution's code (markers removed)."""
    nb = release(course, assignment, notebook)
    src = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source
           for c in solution(course, assignment, notebook).cells}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            cell.source = _SOLUTION.sub(lambda m: m.group(1), src[meta["grade_id"]])
    return nb


def cell(nb, grade_id):
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return c
    raise KeyError(grade_id)


def write_student(subs, student, assignment, notebook, nb_or_text):
    folder = pathlib.Path(subs) / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / notebook
    if isinstance(nb_or_text, (str, bytes)):
        mode = "wb" if isinstance(nb_or_text, bytes) else "w"
        with open(path, mode) as fh:
            fh.write(nb_or_text)
    else:
        nbformat.write(nb_or_text, path)
    return path


def grade(subs, out, course, *extra, timeout=900, env_extra=None):
    """Run `python -m autograder grade` as the instructor would; returns CompletedProcess."""
    env = dict(os.environ, **(env_extra or {}))
    env["PYTHONPATH"] = str(REPO)
    cmd = [PYTHON, "-m", "autograder", "grade", str(subs), "--out", str(out),
           "--course-root", str(course), "--quiet", *extra]
    return subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True,
                          timeout=timeout)


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def grades(out):
    return {(r["student_id"], r["assignment"]): r for r in read_csv(pathlib.Path(out) / "grades.csv")}


def problems(out, student=None):
    rows = read_csv(pathlib.Path(out) / "problems.csv")
    return [r["problem"] for r in rows if student is None or r["student_id"] == student]


def graded_notebook(out, assignment, student, notebook):
    """The unredacted autograded notebook of a student (instructor-side working copy)."""
    return nbformat.read(pathlib.Path(out) / ".work" / "shards" / assignment / student / "autograded"
                         / student / assignment / notebook, as_version=4)


def outputs_text(nb):
    return json.dumps([c.get("outputs", []) for c in nb.cells])
