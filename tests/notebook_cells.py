"""Reading the nbgrader structure of the course's notebooks (shared by several test modules)."""
import dataclasses
import importlib
import pathlib
import re

import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Notebooks train briefly when NBGRADER_EXECUTION is set, as `nbgrader validate` and autograde set it.
# nbval runs every notebook at full length (twice, on two CPUs' kernels) and checks its outputs; the
# tests that only need a notebook to *run* somewhere else (from the student bundle, in a browser) run
# the same code with this set, so that they do not train every model twice more.
SHORT_RUN_ENV = {"NBGRADER_EXECUTION": "validate"}
SOLUTIONS = ROOT / "solutions"
RELEASE = ROOT / "notebooks"
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.S)
CATALOGUE_IMPORT = re.compile(r'catalogue = hidden\.catalogue\("(\w+)"\)')


def solution_notebooks():
    return sorted(SOLUTIONS.glob("[0-9][0-9]_*/*.ipynb"))


def nbgrader_meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


@dataclasses.dataclass
class ExerciseCells:
    notebook: pathlib.Path
    grade_id: str
    answer_source: str
    test_source: str
    points: float

    @property
    def catalogue(self):
        match = CATALOGUE_IMPORT.search(self.test_source)
        assert match, f"{self.grade_id}_tests has no hidden catalogue check"
        return importlib.import_module(f"course_utils.reference.mistakes.{match.group(1)}")

    @property
    def visible_test_source(self):
        return HIDDEN.sub("", self.test_source)


@dataclasses.dataclass
class NotebookCells:
    path: pathlib.Path
    setup_sources: list
    exercises: list

    @property
    def answer_sources(self):
        return [exercise.answer_source for exercise in self.exercises]


def read_cells(path):
    nb = nbformat.read(path, as_version=4)
    by_id = {nbgrader_meta(c).get("grade_id"): c for c in nb.cells if nbgrader_meta(c).get("grade_id")}
    setup = [c.source for c in nb.cells
             if c.cell_type == "code" and nbgrader_meta(c).get("grade_id", "").endswith("_setup")]
    assert setup, f"{path.name}: no setup cell (grade_id '<topic>_setup')"
    exercises = []
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type == "code" and meta.get("grade") and meta["grade_id"].endswith("_tests"):
            answer_id = meta["grade_id"][: -len("_tests")]
            assert answer_id in by_id, f"{path.name}: {meta['grade_id']} has no answer cell {answer_id}"
            exercises.append(
                ExerciseCells(path, answer_id, by_id[answer_id].source, cell.source, meta["points"])
            )
    return NotebookCells(path, setup, exercises)


def cell_kind(cell):
    """'test' (a locked test cell), 'answer' (a student's cell) or 'demo' (anything else)."""
    meta = cell.metadata.get("nbgrader", {})
    if meta.get("grade") and not meta.get("solution"):
        return "test"
    return "answer" if meta.get("solution") else "demo"


def check_untouched_run(nb):
    """What Run All must give on an untouched release, read from the saved run: every code cell
    ran; no demo raised; an answer raised only its own NotImplementedError; every test cell failed
    once, with a GradingError or NotImplementedError saying the exercise is not answered yet; the
    last cell's summary says none passes. Returns (code cells, test cells, the summary's text)."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "Run All stopped before the last cell"
    tests = [c for c in code if cell_kind(c) == "test"]
    for cell in code:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if cell_kind(cell) == "demo":
            assert not errors, f"a demo cell failed on the untouched release: {errors[0].ename}: {errors[0].evalue}"
        elif cell_kind(cell) == "answer":
            assert not errors or (errors[0].ename == "NotImplementedError" and "raise NotImplementedError" in cell.source)
        else:
            assert len(errors) == 1, f"an unanswered exercise's test must fail: {cell.metadata['nbgrader']['grade_id']}"
            shown = "\n".join(errors[0].traceback)
            assert errors[0].ename in ("GradingError", "NotImplementedError"), (errors[0].ename, shown)
            assert "not answered yet" in shown, shown
    summary = "".join(o.get("data", {}).get("text/plain", "") for o in code[-1].outputs)
    assert f"0 of {len(tests)} exercises pass" in summary, summary
    return code, tests, summary
