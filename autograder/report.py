"""Report: what the class got wrong, exercise by exercise, in the words the course uses.

Why here: graders that see one submission at a time cannot say "41 % of the class took the
softmax over the queries"; the batch has every student's verdict, and the hidden tests already
name each catalogued mistake in their message. This module only counts: it reads each graded
test cell's score and message (result.json of every student) and gives the cell one outcome:

- `passed`;
- `not attempted`: the stub as released (its `raise NotImplementedError()` is what failed the
  cell, or, for a "think first" value whose stub defines nothing, the name is still undefined);
- a catalogued mistake (`mistake`): the hidden test's message carries the sentence of one
  mistake of the exercise's catalogue (course_utils/reference/mistakes/<topic>.py);
- `wrong, not named`: a wrong answer no catalogued mistake explains (its messages are grouped);
- `forbidden route`: the grader's reading of the notebook (routes.py) found the answer reaching a
  forbidden function or the course's own pieces: an integrity finding, not a misconception, so it
  is never among the wrong answers;
- `did not run`: a timeout, a dead kernel, tampering, or a cell never reached.

Exercises are named by the headings students saw in the release notebook ("Exercise 1 · A
stable softmax"), read from `release_root/<assignment>/<notebook>.ipynb` (the batch's release)
or else from the course's `notebooks/` folder; without a notebook, by their grade id. It writes

- `mistakes.csv`: one row per exercise and outcome (assignment, notebook, exercise, title,
  outcome, mistake, description, students, share); every text cell is made inert for
  spreadsheets (a leading `=`, `+`, `-`, `@`, tab or CR gets an apostrophe);
- `report.html`: one self-contained page (no JavaScript, images inline): the five most common
  wrong answers (blank and unrun cells never count as mistakes), then per notebook a chart and,
  per exercise, how many passed, did not attempt it, did not run, and each wrong answer.
  No student appears in either file;
- `class_overview.html`: INSTRUCTOR ONLY, students x exercises, each cell's outcome and score,
  so that a TA sees who needs help, and under each assignment the lines "worth a look" that the
  grader could not tell from a habit and that cost no point (a result's `review`, export.py). It names students, so it is written beside grades.csv and
  never into `feedback/`. Messages that quote a hidden test line are withheld on every page.
"""
import base64
import collections
import csv
import dataclasses
import html
import importlib
import io
import os
import re

import nbformat

from autograder import redact
from autograder.routes import FORBIDDEN_ROUTE
from autograder.intake import SOLUTION_STUDENT
from course_utils.grading.headings import exercise_of, exercise_titles
from course_utils.grading.questions import ANOTHER_STUDENTS, EXAMPLE_ANSWER

COURSE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_RUN = ("NotRun", "Timeout", "KernelDied", "TamperError")
PASSED, NOT_ATTEMPTED, MISTAKE, UNNAMED, FORBIDDEN, DID_NOT_RUN = (
    "passed", "not attempted", "mistake", "wrong, not named", "forbidden route", "did not run")
ORDER = (PASSED, NOT_ATTEMPTED, MISTAKE, UNNAMED, FORBIDDEN, DID_NOT_RUN)
WITHHELD = "[a message that quoted the hidden tests; withheld]"
MESSAGE_CHARS = 240
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NAME_ERROR = re.compile(r"^NameError: name '(\w+)' is not defined")


def topic_of(assignment):
    """'05_self_attention' -> 'self_attention' (the catalogue module's name)."""
    return assignment.split("_", 1)[1] if "_" in assignment else assignment


def load_catalogue(assignment):
    """{exercise grade_id: Exercise} of an assignment, or {} when it has no catalogue.

    Whether it has one is read from the files first: importing the reference loads PyTorch
    (2 CPU-seconds), which a class on a notebook without a catalogue never needs."""
    import course_utils
    mistakes = os.path.join(os.path.dirname(course_utils.__file__), "reference", "mistakes")
    if not os.path.isfile(os.path.join(mistakes, topic_of(assignment) + ".py")):
        return {}
    try:
        module = importlib.import_module(f"course_utils.reference.mistakes.{topic_of(assignment)}")
    except ImportError:
        return {}
    return dict(getattr(module, "EXERCISES", {}))


# --- the release notebook: titles and stubs -------------------------------------------------
# Exercise titles are read by course_utils.grading.headings (exercise_titles, exercise_of), the
# one reader the feedback page, the platforms, Validate and the progress table use too.


@dataclasses.dataclass
class Release:
    """What the report needs of one release notebook."""
    title: str = ""
    titles: dict = dataclasses.field(default_factory=dict)  # grade_id -> exercise title
    order: dict = dataclasses.field(default_factory=dict)  # grade_id -> position in the notebook
    blank_stubs: frozenset = frozenset()  # answer grade_ids whose stub defines nothing
    secret: tuple = ()  # hidden-test lines the student has not seen

    def title_of(self, grade_id):
        """The exercise title over a graded cell (a test cell's, else its answer's), or None."""
        return self.titles.get(grade_id) or self.titles.get(exercise_of(grade_id))


def read_release(path, source_path=None):
    """A `Release` from a release notebook (and, to know the hidden lines, its source), or an
    empty one when it cannot be read."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - titles fall back to grade ids
        return Release()
    title = next((line.lstrip("#").strip() for c in nb.cells if c.get("cell_type") == "markdown"
                  for line in c.source.splitlines() if line.startswith("# ")), "")
    order, blank = {}, set()
    for i, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade_id"):
            order[meta["grade_id"]] = i
            code = [ln for ln in cell.source.splitlines() if ln.strip() and not ln.strip().startswith("#")]
            if meta.get("solution") and code and all("NotImplementedError" in ln for ln in code):
                blank.add(meta["grade_id"])
    secret = ()
    if source_path and os.path.exists(source_path):
        try:
            secret = tuple(redact.secret_lines(nbformat.read(source_path, as_version=4), nb))
        except Exception:  # noqa: BLE001
            secret = ()
    return Release(title, exercise_titles(nb), order, frozenset(blank), secret)


# --- one cell, one outcome -------------------------------------------------------------------

def clean(message, limit=MESSAGE_CHARS):
    """A message on one line, without terminal colours, cut at `limit` characters."""
    text = " ".join(_ANSI.sub("", str(message or "")).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclasses.dataclass(frozen=True)
class Outcome:
    kind: str  # one of ORDER
    mistake: str = ""  # the catalogue's name, for MISTAKE
    description: str = ""  # the catalogue's sentence (MISTAKE) or the cleaned message (UNNAMED)


def classify(cell, exercise=None, blank_stub=False):
    """The `Outcome` of one graded test cell.

    exercise: the catalogue's Exercise (its mistakes name wrong answers), or None;
    blank_stub: the release's answer stub defines nothing (a "think first" value), so a
    NameError in the test cell means the answer was never written."""
    max_score, score = cell.get("max_score") or 0, cell.get("score") or 0
    message = _ANSI.sub("", str(cell.get("message") or "")).strip()
    if score >= max_score and (max_score or not message):
        return Outcome(PASSED)
    if message.split(":", 1)[0].strip() in NOT_RUN:
        return Outcome(DID_NOT_RUN, description=clean(message))
    if message.startswith("GradingError: " + FORBIDDEN_ROUTE):
        return Outcome(FORBIDDEN, description=clean(message[len("GradingError: " + FORBIDDEN_ROUTE):]))
    mistakes = getattr(exercise, "mistakes", ())
    if mistakes:
        from course_utils.reference.mistakes import message_matches  # loaded with the catalogue
    for mistake in mistakes:
        if mistake.message and message_matches(mistake.message, message):
            return Outcome(MISTAKE, mistake.name, mistake.message)
    # A think-first answer right for other numbers than the student's own (questions.py).
    if ANOTHER_STUDENTS in message:
        return Outcome(MISTAKE, "another_students_numbers", "the right answer to another student's numbers, "
                       "not to the student's own (copied, or worked out for someone else)")
    if EXAMPLE_ANSWER in message:
        return Outcome(MISTAKE, "example_numbers", "the right answer to the notebook's example numbers, not "
                       "to the student's own (worked without a student id, or copied from the example)")
    # The stub as released: its NotImplementedError, raised by the visible test ("NotImplementedError:")
    # or reported by the hidden check ("`softmax` raised NotImplementedError when called with ...").
    if re.search(r"\bNotImplementedError\b|\bis not answered yet\b", message):
        return Outcome(NOT_ATTEMPTED)
    if blank_stub and _NAME_ERROR.match(message):
        return Outcome(NOT_ATTEMPTED)
    return Outcome(UNNAMED, description=clean(message) or "(the cell failed without a message)")


# --- the class -------------------------------------------------------------------------------

@dataclasses.dataclass
class ExerciseTally:
    assignment: str
    notebook: str
    exercise: str  # the answer cell's grade id
    title: str
    position: int
    kinds: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    mistakes: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # name -> n
    sentences: dict = dataclasses.field(default_factory=dict)  # name -> the catalogue's sentence
    unnamed: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # message -> n
    routes: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # finding -> n
    students: dict = dataclasses.field(default_factory=dict)  # student -> (Outcome, score, max_score)

    @property
    def total(self):
        return sum(self.kinds.values())

    @property
    def answered(self):
        return self.total - self.kinds[NOT_ATTEMPTED] - self.kinds[DID_NOT_RUN]


@dataclasses.dataclass
class ClassTally:
    exercises: dict  # (assignment, exercise) -> ExerciseTally, in notebook order
    not_graded: list  # (assignment, student, status)
    releases: dict  # (assignment, notebook) -> Release
    review: dict = dataclasses.field(default_factory=dict)  # (assignment, student) -> ["worth a look: ..."]

    def assignments(self):
        return sorted({a for a, _ in self.exercises} | {a for a, _, _ in self.not_graded})

    def of(self, assignment):
        return [t for (a, _), t in self.exercises.items() if a == assignment]


def _release_finder(release_root):
    roots = [r for r in (release_root, os.path.join(COURSE_ROOT, "notebooks")) if r]
    cache = {}

    def find(assignment, notebook, secret=None):
        key = (assignment, notebook)
        if key not in cache:
            release = Release()
            for root in roots:
                path = os.path.join(root, assignment, notebook + ".ipynb")
                if os.path.exists(path):
                    source = os.path.join(COURSE_ROOT, "solutions", assignment, notebook + ".ipynb")
                    release = read_release(path, None if secret is not None else source)
                    break
            if secret is not None:
                release.secret = tuple(secret)
            cache[key] = release
        return cache[key]
    return find


def tally(results, load=load_catalogue, release_root=None, secret_lines=None):
    """A `ClassTally` of the results: every graded test cell's outcome, by exercise.

    release_root: the release folder (<root>/<assignment>/<notebook>.ipynb) for titles; the
    course's notebooks/ are tried after it. secret_lines: {assignment: {notebook: [lines]}}, the
    hidden lines (the batch's); without them they are read from the course's solutions/."""
    find, catalogues = _release_finder(release_root), {}
    exercises, not_graded, releases, review = {}, [], {}, {}
    for result in results:
        assignment, student = result.get("assignment", ""), str(result.get("student", ""))
        if student == SOLUTION_STUDENT:  # the batch's check of the solution, not a student
            continue
        if result.get("status") != "graded":
            not_graded.append((assignment, student, str(result.get("status") or "not graded")))
            continue
        if assignment not in catalogues:
            catalogues[assignment] = load(assignment)
        if result.get("review"):
            review[(assignment, student)] = [str(n) for n in result["review"]]
        for cell in result.get("cells", []):
            notebook, exercise_id = cell.get("notebook", ""), exercise_of(cell["grade_id"])
            secret = (secret_lines or {}).get(assignment, {}).get(notebook) if secret_lines is not None else None
            release = releases.setdefault((assignment, notebook), find(assignment, notebook, secret))
            key = (assignment, exercise_id)
            if key not in exercises:
                exercises[key] = ExerciseTally(
                    assignment, notebook, exercise_id,
                    release.title_of(cell["grade_id"]) or exercise_id,
                    release.order.get(cell["grade_id"], release.order.get(exercise_id, 10**6)))
            t = exercises[key]
            if any(line in str(cell.get("message") or "") for line in release.secret):
                cell = dict(cell, message=WITHHELD)
            outcome = classify(cell, catalogues[assignment].get(exercise_id), exercise_id in release.blank_stubs)
            t.kinds[outcome.kind] += 1
            if outcome.kind == MISTAKE:
                t.mistakes[outcome.mistake] += 1
                t.sentences[outcome.mistake] = outcome.description
            elif outcome.kind == UNNAMED:
                t.unnamed[outcome.description] += 1
            elif outcome.kind == FORBIDDEN:
                t.routes[outcome.description] += 1
            t.students[student] = (outcome, float(cell.get("score") or 0), float(cell.get("max_score") or 0))
    ordered = dict(sorted(exercises.items(), key=lambda kv: (kv[0][0], kv[1].notebook, kv[1].position, kv[0][1])))
    return ClassTally(ordered, sorted(not_graded), releases, review)


def top_mistakes(ct, n=5):
    """The n most common wrong answers, as (share of graded, k, total, ExerciseTally, Outcome);
    blank and unrun cells are not wrong answers and never count."""
    found = []
    for t in ct.exercises.values():
        for name, k in t.mistakes.items():
            found.append((k / t.total, k, t.total, t, Outcome(MISTAKE, name, t.sentences[name])))
        if t.unnamed:
            k = sum(t.unnamed.values())
            found.append((k / t.total, k, t.total, t, Outcome(UNNAMED, description=t.unnamed.most_common(1)[0][0])))
    return sorted(found, key=lambda f: (-f[0], -f[1], f[4].kind != MISTAKE, f[3].assignment, f[3].position,
                                        f[4].mistake))[:n]


# --- mistakes.csv ----------------------------------------------------------------------------

DANGEROUS = ("=", "+", "-", "@", "\t", "\r")


def inert(value):
    """A CSV cell a spreadsheet shows as text and never runs as a formula (OWASP's rule)."""
    if isinstance(value, (int, float)):
        return value
    text = str(value)
    return "'" + text if text.startswith(DANGEROUS) else text


def rows(ct):
    out = []
    for t in ct.exercises.values():
        def row(kind, k, mistake="", description=""):
            out.append([t.assignment, t.notebook, t.exercise, t.title, kind, mistake, description, k,
                        f"{k / t.total:.3f}"])
        for kind in ORDER:
            if kind == MISTAKE:
                for name, k in sorted(t.mistakes.items(), key=lambda m: (-m[1], m[0])):
                    row(MISTAKE, k, name, t.sentences[name])
            elif kind == UNNAMED and t.unnamed:
                row(UNNAMED, sum(t.unnamed.values()), "",
                    " | ".join(f"{k}x {m}" for m, k in t.unnamed.most_common(3)))
            elif kind == FORBIDDEN and t.routes:
                row(FORBIDDEN, sum(t.routes.values()), "",
                    " | ".join(f"{k}x {m}" for m, k in t.routes.most_common(3)))
            elif kind not in (MISTAKE, UNNAMED, FORBIDDEN) and t.kinds[kind]:
                row(kind, t.kinds[kind])
    return out


CSV_HEADER = ["assignment", "notebook", "exercise", "title", "outcome", "mistake", "description", "students", "share"]


# --- report.html -----------------------------------------------------------------------------

e = html.escape
COLOURS = {PASSED: "#2ca02c", NOT_ATTEMPTED: "#dddddd", UNNAMED: "#555555", FORBIDDEN: "#7b3294",
           DID_NOT_RUN: "#9ecae1"}
PALETTE = ["#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#7f2704"]


def title_html(title):
    """An exercise title as the notebook shows it: `code` as code, $math$ as its text."""
    parts = e(title.replace("$", "")).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _plain(title, limit=48):
    text = title.replace("`", "").replace("$", "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _chart(label, items):
    """A horizontal stacked bar per exercise (passed, each mistake, wrong not named, not
    attempted, did not run) as a base64 PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({m for t in items for m in t.mistakes}, key=lambda m: (-sum(t.mistakes[m] for t in items), m))
    series = ([(PASSED, COLOURS[PASSED], lambda t: t.kinds[PASSED])]
              + [(m.replace("_", " "), PALETTE[i % len(PALETTE)], lambda t, m=m: t.mistakes[m]) for i, m in enumerate(names)]
              + [(UNNAMED, COLOURS[UNNAMED], lambda t: t.kinds[UNNAMED]),
                 (FORBIDDEN, COLOURS[FORBIDDEN], lambda t: t.kinds[FORBIDDEN]),
                 (NOT_ATTEMPTED, COLOURS[NOT_ATTEMPTED], lambda t: t.kinds[NOT_ATTEMPTED]),
                 (DID_NOT_RUN, COLOURS[DID_NOT_RUN], lambda t: t.kinds[DID_NOT_RUN])])
    series = [s for s in series if any(s[2](t) for t in items)]
    height = max(0.9 + 0.45 * len(items), 0.6 + 0.22 * len(series))
    fig, ax = plt.subplots(figsize=(9, height), layout="constrained")
    labels = [_plain(t.title) for t in items]
    left = [0.0] * len(items)
    for name, colour, count in series:
        shares = [count(t) / max(t.total, 1) for t in items]
        ax.barh(range(len(items)), shares, left=left, label=_plain(name, 40), color=colour,
                edgecolor="white", linewidth=0.5)
        left = [a + b for a, b in zip(left, shares)]
    ax.set_yticks(range(len(items)), labels, fontsize=8)
    ax.set_xlim(0, 1.0001)
    ax.set_xlabel("share of graded students")
    ax.set_title(_plain(label, 80), fontsize=10)
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


STYLE = ("body{font-family:system-ui,sans-serif;max-width:66em;margin:2em auto;padding:0 1em;color:#222}"
         "table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:.25em .5em;"
         "text-align:left;vertical-align:top}td.n{text-align:right;white-space:nowrap}"
         "small,.id{color:#666}code{background:#f3f3f3;padding:0 .2em}.msg{font-family:monospace;font-size:.85em}"
         "h3{margin-bottom:.2em}p.sum{margin:.2em 0 .4em}img{max-width:100%}")


def _what(outcome):
    if outcome.kind == MISTAKE:
        return f"{e(outcome.description)} <br><small>catalogued as <code>{e(outcome.mistake)}</code></small>"
    return ("<em>a wrong answer no catalogued mistake explains</em>, most often:<br>"
            f"<span class='msg'>{e(outcome.description)}</span>")


def _exercise_label(t):
    return f"{title_html(t.title)} <span class='id'>({e(t.assignment)})</span>"


def _summary(t):
    bits = [f"{t.kinds[PASSED]} passed", f"{t.kinds[MISTAKE] + t.kinds[UNNAMED]} answered wrong",
            f"<b>{t.kinds[NOT_ATTEMPTED]} did not attempt it</b>"]
    if t.kinds[FORBIDDEN]:
        bits.append(f"{t.kinds[FORBIDDEN]} took a forbidden route (an integrity finding, not counted as wrong)")
    if t.kinds[DID_NOT_RUN]:
        bits.append(f"{t.kinds[DID_NOT_RUN]} did not run")
    return f"<p class='sum'>{t.total} graded: " + ", ".join(bits) + ".</p>"


def report_html(ct):
    graded = {a: max((t.total for t in ct.of(a)), default=0) for a in ct.assignments()}
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>What the class got wrong</title>",
             f"<style>{STYLE}</style></head><body>",
             "<h1>What the class got wrong</h1>",
             "<p>Counts are students whose submission was graded. Each graded test cell has one outcome: "
             "<b>passed</b>; <b>not attempted</b> (the stub as released); a <b>catalogued mistake</b>, given "
             "in the sentence its exercise's catalogue shows students; <b>wrong, not named</b> (no catalogued "
             "mistake explains it; its most frequent messages are shown); <b>forbidden route</b> (the grader's "
             "reading of the notebook found the answer using what the exercise forbids: an integrity finding, "
             "never a misconception; the class overview names who); <b>did not run</b> (a timeout, a dead "
             "kernel, tampering). Blank and unrun cells are never counted as mistakes. No student is named here.</p>",
             "<h2>The five most common mistakes</h2>"]
    top = top_mistakes(ct)
    if top:
        parts.append("<table><tr><th>students</th><th>of the class</th><th>of those who answered</th>"
                     "<th>exercise</th><th>mistake</th></tr>")
        for share, k, total, t, outcome in top:
            parts.append(f"<tr><td class='n'>{k} of {total}</td><td class='n'>{share:.0%}</td>"
                         f"<td class='n'>{k / max(t.answered, 1):.0%}</td><td>{_exercise_label(t)}</td>"
                         f"<td>{_what(outcome)}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>No wrong answers.</p>")
    blanks = [t for t in ct.exercises.values() if t.kinds[NOT_ATTEMPTED]]
    if blanks:
        parts.append("<h2>Not attempted</h2><p>Students who handed the exercise in as released "
                     "(not counted above):</p><table><tr><th>exercise</th><th>did not attempt it</th></tr>")
        for t in sorted(blanks, key=lambda t: (-t.kinds[NOT_ATTEMPTED], t.assignment, t.position)):
            parts.append(f"<tr><td>{_exercise_label(t)}</td><td class='n'>{t.kinds[NOT_ATTEMPTED]} of {t.total} "
                         f"({t.kinds[NOT_ATTEMPTED] / t.total:.0%})</td></tr>")
        parts.append("</table>")
    for assignment in ct.assignments():
        items = ct.of(assignment)
        notebooks = sorted({t.notebook for t in items})
        heading = " · ".join(ct.releases.get((assignment, nb), Release()).title or nb for nb in notebooks)
        parts.append(f"<h2>{e(assignment)}{': ' + e(heading) if heading else ''}</h2>")
        not_graded = [s for a, _, s in ct.not_graded if a == assignment]
        parts.append(f"<p>{graded[assignment]} submission(s) graded"
                     + (f"; {len(not_graded)} not graded ({e(', '.join(sorted({s.replace('_', ' ') for s in not_graded})))}), not counted"
                        if not_graded else "") + ".</p>")
        if not items:
            continue
        parts.append(f"<img alt='outcomes of {e(assignment)}' src='data:image/png;base64,"
                     f"{_chart(assignment + (': ' + heading if heading else ''), items)}'>")
        for t in items:
            parts.append(f"<h3>{title_html(t.title)} <small class='id'>{e(t.exercise)}</small></h3>")
            parts.append(_summary(t))
            wrong = ([(k, Outcome(MISTAKE, m, t.sentences[m])) for m, k in t.mistakes.items()]
                     + ([(sum(t.unnamed.values()), None)] if t.unnamed else []))
            if t.routes:
                parts.append("<p><b>Forbidden route</b> (not a misconception): " + "".join(
                    f"<br><span class='msg'>{e(m)}</span> <small>({n}&times;)</small>" for m, n in t.routes.most_common(3))
                    + "</p>")
            if not wrong:
                continue
            parts.append("<table><tr><th>students</th><th>of those who answered</th><th>wrong answer</th></tr>")
            for k, outcome in sorted(wrong, key=lambda w: (-w[0], w[1] is None)):
                if outcome is None:
                    messages = "".join(f"<li><span class='msg'>{e(m)}</span> <small>({n}&times;)</small></li>"
                                       for m, n in t.unnamed.most_common(3))
                    more = len(t.unnamed) - 3
                    what = ("<em>wrong, not named</em> (no catalogued mistake explains it); most frequent "
                            f"messages:<ul>{messages}</ul>" + (f"<small>and {more} other message(s)</small>" if more > 0 else ""))
                else:
                    what = _what(outcome)
                parts.append(f"<tr><td class='n'>{k}</td><td class='n'>{k / max(t.answered, 1):.0%}</td>"
                             f"<td>{what}</td></tr>")
            parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


# --- class_overview.html (instructor only) ---------------------------------------------------

CELL = {PASSED: ("ok", "passed"), NOT_ATTEMPTED: ("blank", "not attempted"), MISTAKE: ("mistake", None),
        UNNAMED: ("wrong", "wrong"), FORBIDDEN: ("route", "forbidden route"), DID_NOT_RUN: ("norun", "did not run")}
OVERVIEW_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}"
    ".banner{background:#7a0000;color:#fff;padding:.6em 1em;font-weight:bold;font-size:1.1em;border-radius:4px}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #bbb;padding:.25em .4em;"
    "vertical-align:top;font-size:.85em}th{background:#f4f4f4;text-align:left;max-width:11em}"
    # a student id is one long word (an e-mail address, an LMS number): it wraps inside its column
    # instead of running over the next ones
    "tr>th:first-child{overflow-wrap:anywhere;min-width:6em}"
    "td.n{text-align:right;white-space:nowrap}td.c{min-width:7em;max-width:12em}"
    ".score{display:block;color:#333;font-size:.85em}"
    ".ok{background:#d9f2d9}.blank{background:#fff3c4}.mistake{background:#fdd0a2}"
    ".wrong{background:#f4a3a3}.route{background:#d9c2e8}.look{font-size:.9em}.norun{background:#cfe3f5}.ng{background:#eee;color:#555;font-style:italic}"
    "code{font-size:.95em}small,.id{color:#666}.legend span{display:inline-block;padding:.1em .5em;margin-right:.4em;"
    "border:1px solid #bbb}dl{font-size:.9em}dt{font-weight:bold;margin-top:.3em}dd{margin-left:1.5em}"
    ".msg{font-family:monospace;font-size:1em}")


def overview_html(ct, extensions=None):
    """The instructor-only grid; `extensions` ({(student, assignment): sentence}, from the late
    policy) is shown under the student's name."""
    extensions = extensions or {}
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><meta name='robots' content='noindex'>"
             "<title>INSTRUCTOR ONLY: class overview</title>", f"<style>{OVERVIEW_STYLE}</style></head><body>",
             "<div class='banner'>INSTRUCTOR ONLY: this page names students and their results. "
             "Do not send it to students or publish it.</div>",
             "<h1>Class overview</h1>",
             "<p>One row per student, one column per exercise: the outcome of its graded test cell and the "
             "points. Submissions that could not be graded come first, then the students with the fewest "
             "points (a submission refused at intake, e.g. not a notebook, is in problems.csv only). The "
             "messages are listed under each table (and shown when the pointer rests on a cell).</p>",
             "<p class='legend'>" + "".join(f"<span class='{c}'>{label}</span>" for c, label in
                                            (("ok", "passed"), ("blank", "not attempted"),
                                             ("mistake", "catalogued mistake (its short name)"),
                                             ("wrong", "wrong, not named"),
                                             ("route", "forbidden route (integrity finding)"), ("norun", "did not run"),
                                             ("ng", "not graded"))) + "</p>"]
    for assignment in ct.assignments():
        items = ct.of(assignment)
        students = sorted({s for t in items for s in t.students})
        totals = {s: (sum(t.students[s][1] for t in items if s in t.students),
                      sum(t.students[s][2] for t in items if s in t.students)) for s in students}
        parts.append(f"<h2>{e(assignment)}</h2><table><tr><th>student</th>")
        for t in items:
            points = max((m for _, _, m in t.students.values()), default=0)
            parts.append(f"<th>{title_html(t.title)} <small>({points:g} pt)</small></th>")
        parts.append("<th>total</th></tr>")
        for a, s, status in ct.not_graded:  # first: they need the instructor before anything else
            if a == assignment:
                parts.append(f"<tr><th>{e(s)}</th><td class='ng' colspan='{len(items) + 1}'>"
                             f"not graded: {e(status.replace('_', ' '))}</td></tr>")
        for s in sorted(students, key=lambda s: (totals[s][0], s)):
            extension = extensions.get((s, assignment))
            parts.append(f"<tr><th>{e(s)}" + (f"<br><small>{e(extension)}</small>" if extension else "") + "</th>")
            for t in items:
                if s not in t.students:
                    parts.append("<td class='c ng'>&mdash;</td>")
                    continue
                outcome, score, max_score = t.students[s]
                css, label = CELL[outcome.kind]
                tip = outcome.description if outcome.kind in (MISTAKE, UNNAMED, FORBIDDEN, DID_NOT_RUN) else ""
                label = label or outcome.mistake.replace("_", " ")
                parts.append(f"<td class='c {css}'" + (f" title='{e(tip)}'" if tip else "") +
                             f">{e(label)}<span class='score'>{score:g} / {max_score:g}</span></td>")
            got, full = totals[s]
            parts.append(f"<td class='n'>{got:g} / {full:g}</td></tr>")
        parts.append("</table>")
        named = sorted({(o.mistake, o.description) for t in items for o, _, _ in t.students.values() if o.kind == MISTAKE})
        if named:
            parts.append("<h3>The mistakes named above</h3><dl>" + "".join(
                f"<dt>{e(name.replace('_', ' '))}</dt><dd>{e(sentence)}</dd>" for name, sentence in named) + "</dl>")
        failures = [(s, t, o) for t in items for s, (o, _, _) in sorted(t.students.items())
                    if o.kind in (UNNAMED, DID_NOT_RUN)]
        if failures:
            parts.append("<h3>Wrong (not named) and did not run: the messages</h3><dl>" + "".join(
                f"<dt>{e(s)} &middot; {title_html(t.title)}</dt><dd class='msg'>{e(o.description)}</dd>"
                for s, t, o in sorted(failures, key=lambda f: (f[0], f[1].position))) + "</dl>")
        routes_taken = [(s, t, o) for t in items for s, (o, _, _) in sorted(t.students.items()) if o.kind == FORBIDDEN]
        if routes_taken:
            parts.append("<h3>Forbidden routes (integrity findings, scored zero)</h3><dl>" + "".join(
                f"<dt>{e(s)} &middot; {title_html(t.title)}</dt><dd class='msg'>{e(o.description)}</dd>"
                for s, t, o in sorted(routes_taken, key=lambda f: (f[0], f[1].position))) + "</dl>")
        looks = sorted((s, notes) for (a, s), notes in ct.review.items() if a == assignment)
        if looks:
            parts.append("<h3>Worth a look (cost no point)</h3><p>Lines the grader cannot tell from an honest "
                         "habit and that no answer's reach shows; nothing was deducted.</p><dl class='look'>" + "".join(
                             f"<dt>{e(s)}</dt>" + "".join(f"<dd class='msg'>{e(n)}</dd>" for n in notes)
                             for s, notes in looks) + "</dl>")
    parts.append("</body></html>")
    return "\n".join(parts)


# --- writing ---------------------------------------------------------------------------------

def _replace(path, write):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        write(fh)
    os.replace(tmp, path)


def write(results, out_dir, load=load_catalogue, release_root=None, secret_lines=None, late=None):
    """Write mistakes.csv, report.html and class_overview.html into out_dir (never into its
    feedback/ folder); returns the paths written. `late` (an lms.LatePolicy) puts each student's
    extension, if any, beside their name in the overview."""
    results = list(results)
    ct = tally(results, load, release_root, secret_lines)
    paths = {name: os.path.join(out_dir, name) for name in ("mistakes.csv", "report.html", "class_overview.html")}

    def csv_out(fh):
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(CSV_HEADER)
        writer.writerows([inert(v) for v in row] for row in rows(ct))
    _replace(paths["mistakes.csv"], csv_out)
    _replace(paths["report.html"], lambda fh: fh.write(report_html(ct)))
    extensions = {}
    if late is not None and getattr(late, "extensions", None):
        for result in results:
            key = (result.get("student"), result.get("assignment"))
            if None not in key and (said := late.describe_extension(*key)):
                extensions[key] = said
    _replace(paths["class_overview.html"], lambda fh: fh.write(overview_html(ct, extensions)))
    return list(paths.values())
