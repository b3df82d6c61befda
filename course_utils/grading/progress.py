"""Which exercises pass, at a glance: the last cell of every notebook lists them.

Why: test cells carry the `raises-exception` tag, so *Run All* goes on past a failing exercise
and reaches every section; the failures are then spread over the notebook. This module
remembers, for every cell the kernel runs, whether it raised and with which sentence (an IPython
`post_run_cell` hook installed when `course_utils.grading` is imported), and `summary()` reads
the notebook's own file to name each graded test cell by the exercise heading the student saw.

Nothing here decides a grade: it only reports what the visible tests said in this kernel. The
grader runs the hidden tests outside the student's kernel.
"""
import glob
import html
import json
import os
import re

from . import headings, ipython_hooks

HOOK = "progress: record each cell's outcome"
_results = {}  # a cell's source, normalised -> (passed, one-line message)


def _key(source):
    return "\n".join(line.rstrip() for line in str(source).strip().splitlines())


def _sentence(error):
    """What the table says about a failing cell: a course check's own sentence as it is (its
    class name adds nothing a student needs), any other error with its name first."""
    from .errors import NOT_ANSWERED, GradingError
    text = str(error).strip()
    if isinstance(error, NotImplementedError) and not text:
        return NOT_ANSWERED
    if isinstance(error, GradingError):
        return " ".join(text.split()) or "this test did not pass (it gave no message)."
    first = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def _record(result):
    error = result.error_before_exec or result.error_in_exec
    _results[_key(result.info.raw_cell)] = (error is None, "" if error is None else _sentence(error))


def install():
    """Start recording cell outcomes in this IPython kernel (once); elsewhere, do nothing."""
    return ipython_hooks.on_cell_end(HOOK, _record)


def _notebook_path(path=None):
    """The notebook this kernel runs: JupyterLab names it in JPY_SESSION_NAME; otherwise the one
    notebook of the kernel's folder (every assignment folder holds one)."""
    candidates = [path] if path else []
    session = os.environ.get("JPY_SESSION_NAME", "")
    if session:
        candidates += [session, os.path.basename(session)]
    candidates += sorted(glob.glob("*.ipynb"))
    for candidate in candidates:
        if candidate and candidate.endswith(".ipynb") and os.path.isfile(candidate):
            return candidate
    return None


def exercises(notebook):
    """[(title, points, test cell source)] of a notebook (a dict as read from JSON), in order:
    the title is the exercise heading over the test cell as the student saw it, points and all
    (headings.graded_cells), or the cell's grade id where no exercise heading is over it."""
    return [(heading.shown if heading else headings.grade_id(cell),
             cell["metadata"]["nbgrader"].get("points", 0), headings.cell_source(cell))
            for cell, heading in headings.graded_cells(notebook) if headings.is_test_cell(cell)]


class Summary:
    """Rows of (title, points, status, message); shows as a table in JupyterLab, text elsewhere."""

    def __init__(self, rows, note=""):
        self.rows, self.note = rows, note

    def counts(self):
        passed = [r for r in self.rows if r[2] == "passes"]
        return len(passed), len(self.rows), sum(r[1] for r in passed), sum(r[1] for r in self.rows)

    def headline(self):
        n_pass, n, points, total = self.counts()
        return (f"{n_pass} of {n} exercises pass their visible tests ({points:g} of {total:g} points). "
                "The hidden tests try more cases after you submit.")

    def __repr__(self):
        lines = [self.headline()] if self.rows else []
        for title, points, status, message in self.rows:
            lines.append(f"  {status:>11}  {title}" + (f"\n               {message}" if message else ""))
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    def _repr_html_(self):
        # JupyterLab right-aligns table cells by default; prose reads from the left, top-aligned.
        e = html.escape
        colour = {"passes": "#1a7f37", "fails": "#cf222e", "not run yet": "#6e7781"}
        cell = "text-align:left;vertical-align:top"
        rows = "".join(
            f"<tr><td style='{cell};color:{colour.get(status, '#000')};font-weight:bold;white-space:nowrap'>"
            f"{e(status)}</td><td style='{cell}'>{_with_code(title)}</td>"
            f"<td style='{cell};white-space:pre-wrap'>{e(message)}</td></tr>"
            for title, _, status, message in self.rows)
        note = f"<p>{e(self.note)}</p>" if self.note else ""
        head = "".join(f"<th style='{cell}'>{e(name)}</th>" for name in ("status", "exercise", "what the test said"))
        return (f"<p><b>{e(self.headline())}</b></p><table><tr>{head}</tr>{rows}</table>{note}"
                if self.rows else note)


def _with_code(text):
    """A heading's words as HTML, escaped, with its `code` spans as code (as the heading above
    the exercise shows them, not as raw backticks)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def show(path=None):
    """Display the summary (the last cell of every notebook calls this). Through `display`, not
    as the cell's value: a notebook that rebinds IPython's output history (`_oh`, `Out`) would
    otherwise break the display of any value."""
    from IPython.display import display
    display(summary(path))


def summary(path=None):
    """Each exercise of this notebook: passes, fails (with the test's sentence) or not run yet."""
    found = _notebook_path(path)
    if found is None:
        return Summary([], "Could not find this notebook's file, so no summary (run the test cells above).")
    with open(found, encoding="utf-8") as fh:
        notebook = json.load(fh)
    rows = []
    for title, points, source in exercises(notebook):
        outcome = _results.get(_key(source))
        if outcome is None:
            rows.append((title, points, "not run yet", ""))
        else:
            rows.append((title, points, "passes" if outcome[0] else "fails", outcome[1]))
    return Summary(rows, "" if rows else "This notebook has no graded exercises.")
