"""What nbgrader's Validate says to a student: one line per exercise, passed or its whole sentence.

Why: nbgrader's `Validator` prints each failing test cell's source and then its whole traceback,
every line cut at 90 characters, and the JupyterLab toolbar's dialog leads with the same source;
the kernel's "running over TCP without encryption" warning comes first. The one sentence that
names the mistake ends up cut or buried. The course's test cells already end in one sentence (a
`GradingError`), so Validate only has to show it under the exercise's title.

`install()` is called from the nbgrader configuration files a student's Validate reads (the
course root's `nbgrader_config.py` and the bundle's). It changes four methods of nbgrader's
`Validator` class (nbgrader offers no setting for what a failure shows):
- `_get_failed_cells` also notes every graded cell's title and outcome;
- `_extract_error` gives the one sentence, not the traceback;
- `validate` names failing cells by the exercise heading the student saw, not by their source
  (this is what the toolbar dialog shows);
- `validate_and_print` prints one line per exercise, wrapped, never cut;
and it starts the kernel that runs the notebook with its log at ERROR level (no TCP warning), its
client reading every message promptly (course_utils/kernel_messages.py).
"""
import re
import textwrap

from course_utils.grading.progress import exercises
from course_utils.kernel_messages import ReadsPromptly

GRADING_ERRORS = ("GradingError", "TamperError")
QUIET_KERNEL = ["--IPKernelApp.log_level=ERROR"]


def one_sentence(cell):
    """The first error of a code cell as one line a student reads; '' when it has none."""
    for output in cell.get("outputs", []):
        if output.get("output_type") != "error":
            continue
        name = output.get("ename", "Error")
        value = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", str(output.get("evalue", ""))).strip()
        if name in GRADING_ERRORS:
            return " ".join(value.split())
        if name == "NotImplementedError" and not value:
            return ("not answered yet: a function this test calls still raises NotImplementedError; "
                    "replace `raise NotImplementedError()` with your code.")
        if name == "NameError":
            return f"{value}: run the cells above it first (or answer the exercise that defines it)."
        first = value.splitlines()[0] if value else ""
        return f"{name}: {first}" if first else name
    return ""


def titles(nb):
    """{test cell source (stripped): the exercise heading before it} of a notebook (the same
    reading as the summary at the end of every notebook, progress.exercises)."""
    return {source.strip(): title for title, _, source in exercises(nb)}


def install():
    """Patch nbgrader's Validator as described above (idempotent)."""
    from nbgrader import utils
    from nbgrader.preprocessors import Execute
    from nbgrader.validator import Validator

    if getattr(Validator, "_course_patched", False):
        return
    original_failed, original_validate = Validator._get_failed_cells, Validator.validate
    original_preprocess = Validator._preprocess

    def _get_failed_cells(self, nb):
        failed = original_failed(self, nb)
        names = titles(nb)
        failed_ids = {id(cell) for cell in failed}
        self._course_names = names
        self._course_rows = [(names.get(cell.source.strip(), "an exercise"),
                              id(cell) not in failed_ids, one_sentence(cell))
                             for cell in nb.cells if utils.is_grade(cell) and cell.cell_type == "code"]
        return failed

    def _extract_error(self, cell):
        return one_sentence(cell) or "this test did not pass (it gave no message)."

    def validate(self, filename):
        results = original_validate(self, filename)
        names = getattr(self, "_course_names", {})
        for entry in results.get("failed", []):
            entry["source"] = names.get(entry["source"], entry["source"])
        return results

    def _preprocess(self, nb):
        class QuietExecute(ReadsPromptly, Execute):
            """nbgrader's Execute with the kernel's own log quiet (no TCP warning), reading every
            message promptly (course_utils/kernel_messages.py: otherwise Validate can wait a
            cell's whole timeout for a reply that has arrived)."""

            def start_new_kernel(self, **kwargs):
                self.extra_arguments = list(self.extra_arguments) + [
                    a for a in QUIET_KERNEL if a not in self.extra_arguments]
                return super().start_new_kernel(**kwargs)

        self.preprocessors = [QuietExecute if p is Execute else p for p in self.preprocessors]
        return original_preprocess(self, nb)

    def validate_and_print(self, filename):
        results = self.validate(filename)
        if results.get("type_changed") or (not self.ignore_checksums and results.get("changed")) or self.invert:
            return original_print(self, filename, results)
        rows = getattr(self, "_course_rows", [])
        failing = [r for r in rows if not r[1]]
        if failing:
            self.stream.write(f"{len(failing)} of {len(rows)} exercises do not pass yet. If you submit now, "
                              "you will not get full credit for them:\n")
        else:
            self.stream.write(f"All {len(rows)} exercises pass their visible tests. The grader's hidden "
                              "tests try more cases.\n")
        for title, passed, sentence in rows:
            line = f"  passes  {title}" if passed else f"  FAILS   {title}: {sentence}"
            self.stream.write(textwrap.fill(line, width=self.width, subsequent_indent=" " * 10,
                                            break_long_words=False, break_on_hyphens=False) + "\n")

    original_print_impl = Validator.validate_and_print

    def original_print(self, filename, results):
        # Type-changed or edited locked cells: nbgrader's own report, which re-validates.
        return original_print_impl(self, filename)

    Validator._get_failed_cells = _get_failed_cells
    Validator._extract_error = _extract_error
    Validator.validate = validate
    Validator._preprocess = _preprocess
    Validator.validate_and_print = validate_and_print
    Validator._course_patched = True
