"""Exercise headings: which markdown heading titles an exercise, and which graded cells it titles.

Why one reader: the progress table at the end of a notebook, Validate, the feedback page, the
class report and the Gradescope/PrairieLearn results all name an exercise by the heading the
student saw above it, `### Exercise 2 · Attention in NumPy (3 points)` or
`### Think first · How deep? (1 point)`. Read in several places with several rules, one cell could
come out under different names in different places; read here, it has one name everywhere.

The rule: a heading titles an exercise when it starts with "Exercise" or "Think first", or ends
with its points ("(2 points)"). It titles every graded cell after it until a heading of its own
level or above starts another part of the notebook (a "#### Hint" under it does not). A test cell
`X_tests` takes the title of its answer cell `X`.

Student-safe (it ships in course_utils.grading): it reads headings and grade ids, no answer.
"""
import dataclasses
import re

_POINTS = re.compile(r"\s*\(\s*(\d+(?:\.\d+)?)\s+points?\s*\)\s*$", re.I)
_NAMED = re.compile(r"(?:Exercise|Think first)\b", re.I)
_MARKDOWN_HEADING = re.compile(r"^(#{1,6})(?!#)\s*(.*?)(?:\s+#+)?\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
TESTS_SUFFIX = "_tests"


@dataclasses.dataclass(frozen=True)
class ExerciseHeading:
    """One exercise heading: its level (the number of `#`), the words as the student saw them
    (`shown`, points included), the title without the points, and the points (None if not given)."""

    level: int
    shown: str
    title: str
    points: float | None


def exercise_heading(text, level):
    """The ExerciseHeading of a heading's text (without its `#`s) at `level`, or None when the
    heading names no exercise (a section, a hint)."""
    shown = " ".join(str(text).split())
    points = _POINTS.search(shown)
    if not (points or _NAMED.match(shown)):
        return None
    title = _POINTS.sub("", shown).strip()
    return ExerciseHeading(level, shown, title, float(points.group(1)) if points else None)


def markdown_headings(source):
    """[(level, text)] of the headings of a markdown cell's source, in order; lines inside a
    fenced code block are code, not headings."""
    found, fenced = [], False
    for line in source.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _MARKDOWN_HEADING.match(line)
        if match:
            found.append((len(match.group(1)), match.group(2)))
    return found


class HeadingWalk:
    """The exercise heading in force while a notebook's headings are seen in order (`see`)."""

    def __init__(self):
        self.current = None

    def see(self, level, text):
        heading = exercise_heading(text, level)
        if heading is not None:
            self.current = heading
        elif self.current is not None and level <= self.current.level:
            self.current = None  # another part of the notebook starts


def exercise_of(grade_id):
    """'self_attention_softmax_tests' -> 'self_attention_softmax' (the answer cell's id)."""
    return grade_id[: -len(TESTS_SUFFIX)] if grade_id.endswith(TESTS_SUFFIX) else grade_id


def cell_source(cell):
    """A cell's source as one string (JSON may store it as a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def graded_cells(notebook):
    """[(cell, ExerciseHeading or None)] of every answer and test cell, in order, each with the
    exercise heading that titles it (see the module's docstring). `notebook` as nbformat reads it
    or as plain JSON."""
    walk, titled, found = HeadingWalk(), {}, []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for level, text in markdown_headings(cell_source(cell)):
                walk.see(level, text)
            continue
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        ident = meta.get("grade_id")
        if not ident or not (meta.get("solution") or meta.get("grade")):
            continue
        heading = titled.get(exercise_of(ident)) or walk.current
        titled[ident] = heading
        found.append((cell, heading))
    return found


def is_test_cell(cell):
    """A graded cell that is not an answer: the locked tests under an exercise."""
    meta = (cell.get("metadata") or {}).get("nbgrader") or {}
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def grade_id(cell):
    return ((cell.get("metadata") or {}).get("nbgrader") or {}).get("grade_id")


def exercise_titles(notebook):
    """{grade_id: title without points} of the answer and test cells an exercise heading titles;
    a cell with none over it is left out (the caller names it by its grade id)."""
    return {grade_id(cell): heading.title for cell, heading in graded_cells(notebook) if heading is not None}
