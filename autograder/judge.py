"""Judge: decide each graded test cell from the results its hidden check sent out, here, in the
grader's process, with the reference the student's sandbox does not contain.

Why: everything inside the student's kernel is the student's to change. An answer cell can
import the reference (if it is there), wrap every statement of a test cell in `try/except`,
replace a test cell by `pass`, or make `sys.displayhook` report success before an error; the
kernel's own verdict is therefore worth nothing. The hidden block of every course test cell
calls `hidden.catalogue(topic).check(grade_id, answer)`, which in the sandbox only runs the
answer on the grader's cases (course_utils.grading.probe) and publishes the results on a
display message of MIME type `probe.MIME`. `SandboxedExecute` takes those messages off the cell
as they arrive and hands them to `verdict` when the cell has finished:

* the cell's source (nbgrader has already restored it from the gradebook) says which
  exercises it must check;
* each of them needs a "check" record from this very cell, which the catalogue judges as
  plain data (torch.load with weights_only=True: no student object is ever unpickled);
* as many check records as the source makes check calls, no more: an IPython hook or a thread
  of the student's can publish records too (after the real one, or before it), and a record
  that the cell did not ask for fails the cell instead of standing in for the real one;
* a wrong answer, a missing record (the check never ran, or ran but sent nothing) or one that
  cannot be read fails the cell, whatever the kernel printed; when the cell already failed
  in the kernel, the "diagnose" record names the catalogued mistake if there is one.

The failure is put first among the cell's outputs as a `GradingError`, so nbgrader scores the
cell zero and the feedback shows the mistake's sentence (`apply`).

Partial credit. An exercise whose catalogue declares separable parts (`Exercise.parts`:
name, share of the points, its evidence, a sentence) is not all or nothing: a wrong answer's
`PartialCredit` says which parts it passed (a catalogued mistake costs the one part it is
charged to; any other wrong answer gets only the parts whose evidence it passes). When some
part passed, `verdict` returns a `Partial` sentence and `apply` writes the score the way
nbgrader reads partial credit: the cell's first output becomes an `execute_result` whose text
is the number of points (nbgrader's `determine_grade` takes it as the cell's score), the
kernel's own errors in that cell become printed text (they would score it zero), and the cell's
metadata records each part's points (`PARTS_KEY`, read by export for grades_by_cell.csv). A
student cannot write that number: every `execute_result` of a test cell was already turned into
display data (execute._judged_outputs) and `apply` runs after it, in the grader, on the judge's
own fraction; a `TamperError` still scores zero, and `PARTS_KEY` is removed from every judged
cell before anything is written. Where the visible tests failed in the kernel (a partly right
answer usually fails one), the parts are read from the "diagnose" record the hidden block sent
before them; an answer right on every hidden case whose cell failed in the kernel keeps zero,
as before. A cell that checks several exercises gets partial credit only if it checks one.
"""
import base64
import binascii
import collections
import importlib
import re

from nbformat import NotebookNode

from course_utils.grading import GradingError, probe

CATALOGUE = re.compile(r"""hidden\.catalogue\(\s*["'](\w+)["']\s*\)""")
CHECKED = re.compile(r"""catalogue\.check\(\s*["'](\w+)["']""")


# Cell metadata key: the parts of a partially credited test cell, written by `apply` only.
PARTS_KEY = "autograder_parts"


class Partial(str):
    """A failing verdict that still earns `fraction` of the cell's points: the sentence, with
    `parts` (the catalogue's PartScore of each part)."""

    def __new__(cls, sentence, parts, fraction):
        self = super().__new__(cls, sentence)
        self.parts, self.fraction = tuple(parts), float(fraction)
        return self


def _failure(error):
    """The verdict of a GradingError: a Partial when it carries parts of which some passed."""
    parts = getattr(error, "parts", None)
    if parts and 0 < getattr(error, "fraction", 0) < 1:
        return Partial(str(error), parts, error.fraction)
    return str(error)


def expected(source):
    """(topic, [grade_id, ...]) that a test cell's source checks, or None for a cell with no
    hidden catalogue check (then the kernel's verdict is all there is)."""
    topic = CATALOGUE.search(source or "")
    ids = CHECKED.findall(source or "")
    if not topic or not ids:
        return None
    return topic.group(1), list(dict.fromkeys(ids))


class Cases:
    """The specs the sandbox was given (one file per assignment, written by the batch), read
    once per worker and kept with their exercises."""

    def __init__(self, path):
        self.path = path
        self._specs = None

    def spec(self, grade_id):
        if self._specs is None:
            with open(self.path, "rb") as fh:  # written by the grader itself, never by a student
                self._specs = probe.loads(fh.read(), portable=True)
        return self._specs.get(grade_id)


def _exercise(topic, grade_id, student=None):
    """The catalogue's exercise; a think-first question with numbers per student is made
    `student`'s own (the grader's id for the submission, never what the notebook says)."""
    module = importlib.import_module(f"course_utils.reference.mistakes.{topic}")
    exercise = module.EXERCISES[grade_id]
    if getattr(exercise, "varies", False):
        exercise = exercise.personal(student or _NO_STUDENT)
    return exercise


# The example's numbers stand for a submission graded without a student id (tests, a notebook
# checked alone): an id that no variant function accepts gives variant 0.
_NO_STUDENT = "\0"


def _records(message):
    """The records inside one probe message, None when they cannot be read, or a
    probe.LimitError when they go over the grader's limits (size, nesting, number of values)."""
    text = message.get("records", "")
    if isinstance(text, str) and len(text) > (probe.MAX_RECORD_BYTES + 2) // 3 * 4:
        return probe.LimitError(f"are larger than {probe.MAX_RECORD_BYTES // 2**20} MB")
    try:
        return probe.loads(base64.b64decode(str(text), validate=True))
    except probe.LimitError as error:
        return error
    except (binascii.Error, ValueError, TypeError, RuntimeError, EOFError, OSError, KeyError,
            AttributeError, __import__("pickle").UnpicklingError):
        return None


def verdict(source, messages, failed_in_kernel, cases, student=None):
    """The sentence that fails this test cell, or None when the cell stands as the kernel left it.

    messages: the probe messages (dicts) that arrived while the cell ran, in order;
    failed_in_kernel: whether the cell already has an error output;
    cases: a `Cases` for the assignment; student: the submission's student id (think-first
    questions have numbers of their own per student)."""
    wanted = expected(source)
    if wanted is None:
        return None
    topic, grade_ids = wanted
    calls = collections.Counter(CHECKED.findall(source))
    checks, diagnoses = collections.defaultdict(list), {}
    for message in messages:
        if not isinstance(message, dict) or message.get("topic") != topic or message.get("grade_id") not in grade_ids:
            continue
        if message.get("mode") == probe.CHECK:
            checks[message["grade_id"]].append(message)
        elif message.get("mode") == probe.DIAGNOSE:
            diagnoses[message["grade_id"]] = message  # names a mistake only, so the last one will do
    sentence = _verdict(topic, grade_ids, checks, diagnoses, calls, failed_in_kernel, cases, student)
    if isinstance(sentence, Partial) and len(grade_ids) > 1:
        return str(sentence)  # several exercises in one cell: all or nothing, as before
    return sentence


def _verdict(topic, grade_ids, checks, diagnoses, calls, failed_in_kernel, cases, student=None):
    partial = None  # the least partial credit of the records judged so far; any other failure wins
    for grade_id in grade_ids:
        spec = cases.spec(grade_id)
        if spec is None:
            return f"the grader has no cases for {grade_id}; tell your instructor"
        exercise = _exercise(topic, grade_id, student)
        if not checks[grade_id]:
            if failed_in_kernel:
                return _named_mistake(exercise, diagnoses.get(grade_id), spec)
            return (f"the hidden test of `{exercise.function_name}` did not run to the end, so "
                    "this cell cannot count as passed (did something stop or change the test cell?)")
        if len(checks[grade_id]) > calls[grade_id]:
            return (f"the hidden test of `{exercise.function_name}` received {len(checks[grade_id])} sets of "
                    f"results where the test cell sends {calls[grade_id]}: something in your notebook (an "
                    "IPython hook, a thread) sent results of its own, so this cell cannot count as passed")
        for message in checks[grade_id]:
            records = _records(message)
            if isinstance(records, probe.LimitError):
                return (f"the results of `{exercise.function_name}` on the hidden test cases are too "
                        f"large for the grader to read (they {records}), so this cell cannot count as passed")
            if records is None:
                return f"the results of `{exercise.function_name}` on the hidden test cases could not be read"
            try:
                exercise.judge(records, generic=True, spec=spec)
            except GradingError as error:
                sentence = _failure(error)
                if not isinstance(sentence, Partial):
                    return sentence
                if partial is None or sentence.fraction < partial.fraction:
                    partial = sentence
    return partial


REVIEW_KEY = "autograder_review"  # a test cell's "worth a look" lines (routes.Note), for the instructor


def forbidden_route(cells, index, source, reader=None):
    """The sentence failing the test cell at `index` because an answer it checks reaches a
    forbidden function (or the course's own pieces) by a route the notebook's text shows
    (autograder/routes.py), or None. Read here, from the cells the grader ran, not from anything
    the kernel reported. It starts with routes.FORBIDDEN_ROUTE, so the class report can tell an
    integrity finding from a wrong answer. The lines the reader cannot tell from a habit cost
    nothing: they go into the test cell's metadata (REVIEW_KEY), which export.py lists in
    problems.csv and the class overview as "worth a look". `reader`: the notebook's
    routes.NotebookReader, made once for all its test cells (one is made here without it)."""
    from autograder import routes

    wanted = expected(source)
    if wanted is None:
        return None
    topic, grade_ids = wanted
    reader = reader if reader is not None else routes.NotebookReader(cells)
    notes, sentence = [], None
    for grade_id in grade_ids:
        exercise = _exercise(topic, grade_id)
        found, said = reader.read(index, exercise.function_name, exercise.forbidden,
                                  tuple(getattr(exercise, "earlier", ())))
        notes += [n for n in said if n not in notes]
        if found and sentence is None:
            sentence = routes.FORBIDDEN_ROUTE + str(found)
    if 0 <= index < len(cells):
        metadata = cells[index].setdefault("metadata", NotebookNode())
        if notes:
            metadata[REVIEW_KEY] = [str(n) for n in notes]
        else:
            metadata.pop(REVIEW_KEY, None)
    return sentence


def _named_mistake(exercise, message, spec):
    """The catalogued mistake's sentence from a diagnose record, if it names one; for an
    exercise with parts, also the parts an uncatalogued wrong answer passed, if any."""
    records = _records(message) if message is not None else None
    if records is None or isinstance(records, probe.LimitError):
        return None
    try:
        exercise.judge(records, generic=False, spec=spec)
    except GradingError as error:
        return _failure(error)
    if getattr(exercise, "parts", ()):
        try:
            exercise.judge(records, generic=True, spec=spec)
        except GradingError as error:
            sentence = _failure(error)
            return sentence if isinstance(sentence, Partial) else None
    return None


def apply(cell, sentence):
    """Write the verdict into a judged test cell, after execute._judged_outputs: nothing for
    None; a `GradingError` first for a failing sentence (the cell scores zero); for a `Partial`,
    the points it earns (see the module's docstring)."""
    metadata = cell.setdefault("metadata", NotebookNode())
    metadata.pop(PARTS_KEY, None)
    if not sentence:
        return
    points = _points(cell)
    tampered = any(o.get("output_type") == "error" and o.get("ename") == "TamperError" for o in cell.outputs)
    if not isinstance(sentence, Partial) or tampered or points is None:
        cell.outputs.insert(0, _error("GradingError", str(sentence)))
        return
    parts = [{"name": p.name, "title": p.title, "passed": bool(p.passed),
              "points": round(points * p.share, 4) if p.passed else 0.0, "max_points": round(points * p.share, 4)}
             for p in sentence.parts]
    score = round(sum(p["points"] for p in parts), 4)
    note = (f"Partial credit: {score:g} of {points:g} points. {sentence}\n")
    kept = []
    for output in cell.outputs:
        if output.get("output_type") == "error":  # a visible check that failed: shown, not scored
            output = NotebookNode(output_type="stream", name="stdout",
                                  text=f"{output.get('ename', 'Error')}: {output.get('evalue', '')}\n")
        kept.append(output)
    cell.outputs = [NotebookNode(output_type="execute_result", execution_count=cell.get("execution_count"),
                                 data={"text/plain": f"{score:g}"}, metadata={}),
                    NotebookNode(output_type="stream", name="stdout", text=note)] + kept
    metadata[PARTS_KEY] = {"score": score, "max_score": points, "message": str(sentence)[:2000], "parts": parts}


def _points(cell):
    try:
        points = float(cell["metadata"]["nbgrader"]["points"])
    except (KeyError, TypeError, ValueError):
        return None
    return points if points > 0 else None


def _error(ename, evalue):
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])
