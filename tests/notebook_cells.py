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
