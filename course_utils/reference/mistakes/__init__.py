"""The mistake catalogue: how a wrong answer is recognised and named.

Instructor side, as secret as the reference: recognising a mistake means computing it.

An `Exercise` bundles what the hidden tests of one exercise need: the reference, the inputs
to try (random but fixed per exercise, so grading is repeatable), how to compare outputs, the
functions the student may not call, and the catalogue of `Mistake`s. Grading an answer has two
halves, which may run in different processes:

1. `course_utils.grading.probe.collect(exercise.spec(), answer)` runs the answer on every case
   under the forbidden-API guard (in the student's sandbox, under the autograder) and returns
   what came out as plain data; `spec()` holds the inputs and nothing that gives an answer away;
2. `exercise.judge(records)` (here, with the reference) passes if every output matches the
   reference; otherwise it looks for the catalogued mistake whose outputs the student's equal
   and raises `GradingError` with that mistake's message ("did you divide by d_k instead of
   ...?"); otherwise it raises `GradingError` describing the first mismatch.

`exercise.check(answer)` does both in this process, with the records written and read back
exactly as the grader reads them.

The same catalogue drives the mutation tests (tests/exercises): every mistake, fed to the
notebook's test cell, must fail it with its own message.
"""
import dataclasses
import zlib
from typing import Callable, Sequence

import numpy as np
import torch

from course_utils.grading import GradingError, mismatch, probe
from course_utils.grading.guards import describe_arguments
from course_utils.grading.probe import changed_argument  # noqa: F401  (catalogues' tests use it)
# The words of a think-first answer right for other numbers than the student's (the class report
# counts them as two named outcomes of their own).
from course_utils.grading.questions import ANOTHER_STUDENTS, EXAMPLE_ANSWER

# A float32 (or half) result carries about 7 significant digits, and how they round depends on
# the order of the additions, which depends on the CPU's kernels. Such results are compared with
# at least these tolerances, relative to the size of the expected values.
FLOAT32_RTOL = 1e-4
FLOAT32_ATOL = 1e-5
# Half precision keeps 11 significant bits (float16: about 3 decimal digits) or 8 (bfloat16: 2): a
# result in either, or compared with one, gets these (issue 39, item 2: prompts that allow any
# floating dtype get a float16 case).
FLOAT16_RTOL, FLOAT16_ATOL = 1e-2, 4e-3
BFLOAT16_RTOL, BFLOAT16_ATOL = 6e-2, 3e-2

# (atol, rtol) relative to the size of the expected values, by the coarsest dtype on either side.
_WIDENED = {torch.float32: (FLOAT32_ATOL, FLOAT32_RTOL), np.dtype(np.float32): (FLOAT32_ATOL, FLOAT32_RTOL),
            torch.float16: (FLOAT16_ATOL, FLOAT16_RTOL), np.dtype(np.float16): (FLOAT16_ATOL, FLOAT16_RTOL),
            torch.bfloat16: (BFLOAT16_ATOL, BFLOAT16_RTOL)}


def _widened(value):
    """(atol, rtol) that a result of `value`'s dtype can hold, or None for float64 and the rest."""
    dtype = getattr(value, "dtype", None)
    if dtype is None and isinstance(value, np.floating):
        dtype = np.dtype(type(value))
    try:
        return _WIDENED.get(dtype)
    except TypeError:  # an unhashable dtype-like attribute
        return None


def _low_precision(value):
    return _widened(value) is not None


def kind(value):
    """What a result is, in the words of a prompt: "a torch.Tensor", "a NumPy array", "an int"..."""
    if isinstance(value, torch.Tensor):
        return "a torch.Tensor"
    if isinstance(value, np.ndarray):
        return "a NumPy array"
    if isinstance(value, (bool, np.bool_)):
        return "a bool"
    if isinstance(value, (int, np.integer)):
        return "an int"
    if isinstance(value, (float, np.floating)):
        return "a float"
    return None  # lists, tuples, objects: compared by value only


def wrong_kind(got, expected, name):
    """A sentence when a result is not the kind of value the reference returns (a float where the
    prompt asks for an int count, NumPy where it asks for a tensor), else None. An int stands for
    a float; a float is not an int, even 15.0."""
    want, have = kind(expected), kind(got)
    if want is None or have == want or (want == "a float" and have == "an int"):
        return None
    # A value the grader received as an object of the student's own class is named by that class.
    shown = f"{have or getattr(got, 'type_name', None) or type(got).__name__}"
    if want in ("an int", "a float") and have in ("a torch.Tensor", "a NumPy array") and tuple(got.shape) == ():
        # a count computed with tensor operations (torch.tensor(n) ** 2, x.sum()): a 0-d tensor
        return (f"{name} should be {want}, a Python number, but it is a 0-d "
                f"{'tensor' if have == 'a torch.Tensor' else 'NumPy array'} ({got!r}): convert it with "
                f"{'int' if want == 'an int' else 'float'}(...) or .item().")
    if hasattr(got, "shape"):
        shown += f" of shape {tuple(got.shape)}"
    elif have in ("a float", "an int"):
        shown += f" ({got!r})"
    return f"{name} should be {want}, but it is {shown}."


def _transposed_layout(value):
    """`value` with every tensor of 2 or more dimensions (the last two larger than 1) replaced by
    the same values laid out with every axis reversed (column-major, as x.permute(reversed axes)
    gives): equal, not contiguous, so that neither x.view(-1, d) nor a merge of leading axes works.
    torch.save keeps strides, so the layout reaches the student's sandbox. Returns (value, changed)."""
    if isinstance(value, torch.Tensor):
        if value.dim() >= 2 and value.shape[-1] > 1 and value.shape[-2] > 1 and value.is_contiguous():
            order = tuple(reversed(range(value.dim())))  # every axis's stride grows left to right
            out = value.detach().permute(order).contiguous().permute(order)
            return out.requires_grad_(True) if value.requires_grad else out, True
        return value, False
    if type(value) in (list, tuple):
        pairs = [_transposed_layout(v) for v in value]
        return type(value)(v for v, _ in pairs), any(c for _, c in pairs)
    if type(value) is dict:
        pairs = {k: _transposed_layout(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
    return value, False


def _most_axes(value):
    if isinstance(value, torch.Tensor):
        return value.dim()
    if isinstance(value, (list, tuple)):
        return max((_most_axes(v) for v in value), default=0)
    if isinstance(value, dict):
        return max((_most_axes(v) for v in value.values()), default=0)
    return 0


_LAYOUT_KEYS = ("forward_args", "forward_kwargs", "query", "key", "value")  # module runners' inputs


def noncontiguous_case(case):
    """The case with its input tensors laid out non-contiguously (same values), or None when it
    has none to lay out so. A function's case is (args, kwargs); a module's, a dict whose inputs
    are under `_LAYOUT_KEYS` (weights are copied in, their layout does not reach the answer)."""
    if isinstance(case, dict):
        changed, out = False, dict(case)
        for key in _LAYOUT_KEYS:
            if key in case:
                out[key], c = _transposed_layout(case[key])
                changed = changed or c
        return out if changed else None
    if isinstance(case, (tuple, list)) and len(case) == 2 and isinstance(case[1], dict):
        args, c1 = _transposed_layout(tuple(case[0]))
        kwargs, c2 = _transposed_layout(dict(case[1]))
        return (args, kwargs) if (c1 or c2) else None
    return None


REQUIRED = "\x00required"  # probe.signature_defaults' mark of a parameter without a default


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A common wrong answer: `compute` has the exercise's signature and returns the wrong result.

    `message` may be shown before the deadline (Gradescope's visibility "visible"): it names the
    mistake and where to look again, never the answer, its formula or the line to type; a given
    of the question may be named unless it equals some student's answer
    (tests/checks/test_diagnoses_hide_answers.py)."""

    name: str
    message: str
    compute: Callable


@dataclasses.dataclass(frozen=True)
class Part:
    """A separable part of an exercise, worth `share` of its points (an exercise's shares sum to 1).

    How a part is judged (`Exercise.part_scores`):

    * a right answer passes every part;
    * a catalogued mistake fails the one part that lists it in `mistakes` (each mistake is
      charged to exactly one part, where it was made: a mistake never costs two parts' points,
      even when another part's cases run through the same code), and passes the others;
    * any other wrong answer passes only the parts whose own evidence it passes: the outputs on
      `cases` (indices into the exercise's cases; None: every case) equal the reference's, and
      `check(exercise, results)`, when given, finds nothing wrong (results: [(case, output)] of
      every case; it returns None or a sentence). Should it pass every part's evidence and still
      be wrong, the last part (the whole put together) fails: a wrong answer never gets full
      points;
    * a crash, a forbidden call or an input changed in place fails every part (0 points).
    """

    name: str  # a short identifier: `<grade_id>_tests:<name>` in grades_by_cell.csv
    share: float
    title: str  # what the part is, in the feedback's words: "finished hypotheses leave the beam"
    mistakes: Sequence[str] = ()
    cases: Sequence[int] = None
    check: Callable = None


@dataclasses.dataclass(frozen=True)
class PartScore:
    """How an answer did on one part: passed or not, and why not (a sentence, or "")."""

    name: str
    share: float
    title: str
    passed: bool
    why: str = ""


def share_words(share):
    """1/3 -> "1/3"; 0.5 -> "1/2"; 1 -> "all"."""
    import fractions
    share = fractions.Fraction(share).limit_denominator(24)
    return "all" if share == 1 else f"{share.numerator}/{share.denominator}"


class PartialCredit(GradingError):
    """A wrong answer to an exercise with parts: the message (the catalogued mistake's sentence,
    or the first difference), then which parts passed; `parts` holds the `PartScore`s, and
    `fraction` the share of the points they earn."""

    def __init__(self, message, parts):
        self.parts = tuple(parts)
        self.fraction = sum(p.share for p in self.parts if p.passed)
        super().__init__(f"{message} {describe_parts(self.parts)}")


def describe_parts(parts):
    """One sentence for the feedback: which parts passed, which did not."""
    words = []
    for p in parts:
        words.append(f"{p.title} ({share_words(p.share)} of the points): "
                     + ("passed" if p.passed else "not passed" + (f", {p.why.rstrip('.')}" if p.why else "")))
    return "Points by part: " + "; ".join(words) + "."


def parts_problems(exercise):
    """What is inconsistent in an exercise's parts (the catalogue's tests assert there is nothing)."""
    parts = exercise.parts
    if not parts:
        return []
    problems = []
    if abs(sum(p.share for p in parts) - 1.0) > 1e-9:
        problems.append(f"the shares of {exercise.grade_id}'s parts sum to {sum(p.share for p in parts)}, not 1")
    names = [p.name for p in parts]
    if len(set(names)) != len(names) or not all(n.isidentifier() for n in names):
        problems.append(f"part names must be distinct identifiers: {names}")
    for mistake in exercise.mistakes:
        owners = [p.name for p in parts if mistake.name in p.mistakes]
        if len(owners) != 1:
            problems.append(f"mistake {mistake.name} is charged to {owners or 'no part'}, not to exactly one part")
    known = {m.name for m in exercise.mistakes}
    for p in parts:
        problems.extend(f"part {p.name} lists {m}, which is not a mistake of {exercise.grade_id}"
                        for m in p.mistakes if m not in known)
    return problems


@dataclasses.dataclass(frozen=True)
class Exercise:
    grade_id: str
    function_name: str
    reference: Callable
    make_cases: Callable  # (torch.Generator or numpy Generator seed: int) -> list of (args, kwargs)
    mistakes: Sequence[Mistake] = ()
    forbidden: Sequence[str] = ()
    output_names: Sequence[str] = ("your result",)
    atol: float = 1e-5
    rtol: float = 1e-4
    crash_hint: str = ""  # what to look at when the student's function raises on a hidden case
    runner: str = "function"  # how an answer is run on a case: a key of probe.RUNNERS
    module_hint: str = ""  # for module answers: the attributes the exercise asks for
    # Pieces of earlier exercises the prompt tells the student to use, judged with correct ones
    # in their place (course_utils.grading.parts): one mistake costs points once.
    earlier: Sequence[str] = ()
    # Separable parts, each worth a share of the points (see `Part`); () = all or nothing.
    parts: Sequence[Part] = ()
    # Whether the cases end with a copy of the first one whose tensors (of 2 or more dimensions)
    # are laid out non-contiguously, the same values in transposed memory (`noncontiguous_case`):
    # a prompt's tensors may be views (x.transpose(...), q.mT), so `.view` must not crash on them.
    layouts: bool = True

    @property
    def seed(self):
        """Fixed per exercise: two gradings of the same notebook give the same result."""
        return zlib.crc32(self.grade_id.encode())

    def cases(self):
        cases = list(self.make_cases(self.seed))
        if self.layouts:  # the case with the most axes (the most layouts to get wrong), the first of those
            laid_out = [(_most_axes(c), i, noncontiguous_case(c)) for i, c in enumerate(cases)]
            laid_out = [(-axes, i, c) for axes, i, c in laid_out if c is not None]
            if laid_out:
                cases.append(min(laid_out, key=lambda t: t[:2])[2])
        return cases

    def _outputs(self, result):
        if len(self.output_names) == 1:
            return (result,)
        if not isinstance(result, (tuple, list)) or len(result) != len(self.output_names):
            raise GradingError(
                f"`{self.function_name}` should return {len(self.output_names)} values "
                f"({', '.join(self.output_names)}), but it returned {type(result).__name__}"
                + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "") + "."
            )
        return tuple(result)

    def tolerances(self, got, expected):
        """(atol, rtol) for comparing one output: the exercise's own, widened to what float32 can
        hold when the student's result or the expected one is float32 or coarser, and to what
        float16 (bfloat16) holds when the expected one is (the exercise's dtype is stated in its
        prompt; a correct float32 answer must not fail on the CPU's rounding, nor a correct
        answer to a float16 case on float16's)."""
        widened = [w for w in (_widened(got), _widened(expected)) if w is not None]
        if not widened:  # float64 for float32 inputs too
            return self.atol, self.rtol
        # float32's, or half precision's where the expected result is in it (the case's inputs
        # are): a float16 result for float32 or float64 inputs is held to float32's, as the
        # prompts' "float32 or float64" results are
        atol, rtol = max(widened) if _widened(expected) == max(widened) else (FLOAT32_ATOL, FLOAT32_RTOL)
        try:
            values = np.abs(np.asarray(expected.detach() if hasattr(expected, "detach") else expected,
                                       dtype=np.float64))
            # the finite entries only: a -inf (a masked log-probability) must not widen the rest to inf
            scale = float(np.max(values, where=np.isfinite(values), initial=1.0))
        except (TypeError, ValueError):
            scale = 1.0
        return max(self.atol, atol * scale), max(self.rtol, rtol)

    def difference(self, got, expected):
        """None if the outputs agree, else a sentence about the first output that differs."""
        for name, g, e in zip(self.output_names, self._outputs(got), self._outputs(expected)):
            atol, rtol = self.tolerances(g, e)
            problem = mismatch(g, e, atol=atol, rtol=rtol, name=name)
            if problem:
                return problem
        return None

    def runner_spec(self):
        """What running an answer needs besides the cases (all of it public)."""
        return {"grade_id": self.grade_id, "function_name": self.function_name, "runner": self.runner,
                "forbidden": list(self.forbidden), "crash_hint": self.crash_hint,
                "outputs": len(self.output_names), "seed": self.seed, "module_hint": self.module_hint,
                "earlier": list(self.earlier)}

    def spec(self):
        """Everything the student's side needs to run an answer: the runner, the cases (inputs
        only) and what the answer may not call. Plain data: the grader serialises it."""
        return {**self.runner_spec(), "cases": self.cases()}

    def run(self, fn, case, guarded=False):
        """fn's result on one case, by the exercise's runner (course_utils.grading.probe), on
        fresh copies of the inputs. Guarded (the student's function): under the forbidden-API
        guard, with a crash, or an input changed in place, turned into one sentence."""
        return probe.RUNNERS[self.runner](fn, case, self.runner_spec(), guarded)

    def describe_case(self, case):
        """A few words on a case for messages: by default the call itself when its arguments are
        short to write (numbers, short lists), so that a student can reproduce it, e.g.
        " (receptive_field([3, 3], [1, 2]))"; else the arguments' shapes. Exercises whose cases
        are not (args, kwargs) override this."""
        try:
            args, kwargs = case
            parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        except (TypeError, ValueError):
            return ""
        if all(len(p) <= 40 and "\n" not in p and "tensor(" not in p and "array(" not in p for p in parts):
            return f" ({self.function_name}({', '.join(parts)}))"
        return f" (called with {describe_arguments(args, kwargs)})"

    def matching_mistake(self, results, mistakes=None):
        """The first catalogued mistake (of `mistakes`, default all) whose outputs equal the
        student's on every case.

        Only a mistake that is wrong somewhere can explain a wrong answer: one that computes the
        right values by a forbidden route ("Your code uses torch.softmax") is the guard's to
        report, and naming it for a right value of the wrong kind (a list, NumPy for a tensor)
        would blame the student for a call they never made."""
        for mistake in self.mistakes if mistakes is None else mistakes:
            try:
                if (all(self.difference(got, self.run(mistake.compute, case)) is None for case, got in results)
                        and self._wrong_somewhere(mistake, [case for case, _ in results])):
                    return mistake
            except Exception:  # the mistake cannot even run on some case, so it is not this one
                continue
        return None

    def _wrong_somewhere(self, mistake, cases):
        """Whether the mistake's outputs differ from the reference's, in value or in kind."""
        for case in cases:
            wrong, right = self.run(mistake.compute, case), self.run(self.reference, case)
            if self.difference(wrong, right) is not None:
                return True
            if any(wrong_kind(w, r, name) for name, w, r
                   in zip(self.output_names, self._outputs(wrong), self._outputs(right))):
                return True
        return False

    @staticmethod
    def _received(records, key, cases, name):
        """[(case, result)] from the records of one exercise, or the GradingError they carry:
        the first case whose answer raised (or broke a rule) is reported, as it was raised."""
        if not isinstance(records, dict) or records.get("too_large"):
            raise GradingError(f"{name}: its results on the hidden test cases were too large to "
                               "send to the grader (more than 8 MB); return what the exercise asks for.")
        got = records.get(key)
        if not isinstance(got, list) or len(got) != len(cases) or not all(isinstance(r, dict) for r in got):
            raise GradingError(f"{name}: the results of the hidden test cases did not reach the grader "
                               "complete, so this exercise cannot be marked as passed.")
        for record in got:
            if "error" in record:
                raise GradingError(str(record["error"])[:2000])
            if "result" not in record:
                raise GradingError(f"{name}: a hidden test case has no result.")
        return [(case, record["result"]) for case, record in zip(cases, got)]

    def judge(self, records, generic=True, spec=None):
        """Raise GradingError naming the mistake if the recorded results are wrong; None if right.

        `records` is what `probe.collect` returned for this exercise's `spec` (read back as plain
        data). generic=False (`diagnose`) raises only what can be named: a crash, a forbidden
        call, an input changed in place, a catalogued mistake. An uncatalogued wrong answer then
        passes silently, so that the visible checks after it can give their more specific hint;
        the test cell's last hidden line calls `check` to fail it anyway."""
        spec = spec if spec is not None else self.spec()
        try:
            return self._judge(records, generic, spec)
        except GradingError as error:
            if self.parts and not isinstance(error, PartialCredit):
                raise self.partial_credit(error, records, spec) from None
            raise
        except Exception as error:  # noqa: BLE001 - odd values must fail the answer, not the grader
            raise GradingError(f"`{self.function_name}` returned something the grader cannot compare "
                               f"with the expected result ({type(error).__name__}).") from None

    def _crash_explained(self, records, cases):
        """The catalogued mistake that explains an answer that raised on some hidden cases, or
        None: the mistake raises the same error on exactly those cases (a -1e9 fill on float16
        scores: "value cannot be converted to type c10::Half without overflow") and gives the
        answer's outputs on all the others, where it is wrong somewhere."""
        got = records.get("outputs") if isinstance(records, dict) else None
        if (not self.mistakes or not isinstance(got, list) or len(got) != len(cases)
                or not all(isinstance(r, dict) and ("error" in r or "result" in r) for r in got)
                or not any("error" in r for r in got)):
            return None
        ran = [(case, r["result"]) for case, r in zip(cases, got) if "error" not in r]
        for mistake in self.mistakes:
            try:
                for case, record in zip(cases, got):
                    if "error" not in record:
                        continue
                    try:
                        self.run(mistake.compute, case)
                    except Exception as error:  # noqa: BLE001 - the mistake's own crash, compared
                        detail = str(error).strip().splitlines()[0][:60] if str(error).strip() else ""
                        said = str(record["error"])
                        if f" raised {type(error).__name__}" in said and detail in said:
                            continue
                    raise LookupError  # the mistake does not crash here, or not the same way
                if all(self.difference(out, self.run(mistake.compute, case)) is None for case, out in ran) \
                        and self._wrong_somewhere(mistake, [case for case, _ in ran]):
                    return mistake
            except Exception:  # noqa: BLE001 - not this mistake
                continue
        return None

    def _judge(self, records, generic, spec):
        try:
            results = self._received(records, "outputs", spec["cases"], f"`{self.function_name}`")
        except GradingError as error:
            mistake = self._crash_explained(records, spec["cases"])
            if mistake is None:
                raise
            raise GradingError(f"`{self.function_name}`: {mistake.message} (It also raised an error on a "
                               f"hidden test case: {str(error)[:600]})") from None
        changed = self.changed_default(records)  # named when no catalogued mistake explains more
        for case, got in results:
            expected = self.run(self.reference, case)
            for name, g, e in zip(self.output_names, self._outputs(got), self._outputs(expected)):
                problem = wrong_kind(g, e, name)
                if problem:  # a catalogued mistake of the same kind (e.g. `/` for `//`) says more
                    mistake = self.matching_mistake(results)
                    raise GradingError(f"`{self.function_name}`: {mistake.message if mistake else problem}")
            problem = self.difference(got, expected)
            if problem:
                mistake = self.matching_mistake(results)
                if mistake is not None:
                    raise GradingError(f"`{self.function_name}`: {mistake.message}")
                if changed:
                    raise GradingError(changed)
                if not generic:
                    return None
                raise GradingError(f"`{self.function_name}` gives a wrong answer on a hidden test "
                                   f"case{self.describe_case(case)}: {problem}")
        if changed:
            raise GradingError(changed)
        return None

    def changed_default(self, records):
        """A sentence when the answer's signature gives a parameter another default than the
        prompt's (the reference's), else None: `causal=False` for `causal=True`, `eps=1e-5` for
        1e-6. Calls that leave the argument out (a later cell's, a student's) get the wrong one,
        so this is named whatever the hidden cases pass (issue 39, item 5)."""
        theirs = records.get("defaults") if isinstance(records, dict) else None
        if not isinstance(theirs, dict) or self.runner == "value":
            return None
        ours = probe.signature_defaults(self.reference)
        for key, expected in ours.items():
            got = theirs.get(key)
            if not isinstance(got, dict):
                continue
            where = f"`{self.function_name}{'.' + key if key else ''}`"
            for name, default in expected.items():
                if default == REQUIRED or name not in got:
                    continue
                have = got[name]
                if have == REQUIRED:
                    return (f"{where}: your `{name}` has no default; the prompt's signature gives "
                            f"{name}={default!r} (keep the signature as given).")
                same = (have == default and type(have) is type(default)) or (
                    type(have) in (int, float) and type(default) in (int, float) and float(have) == float(default))
                if not same:
                    return (f"{where}: your default for {name} is {have!r}; the prompt says "
                            f"{name}={default!r} (a call without {name} must use it: keep the signature as given).")
        return None

    def partial_credit(self, error, records, spec):
        """The GradingError of a wrong answer, with its part scores when they can be told: a
        `PartialCredit`; the error itself when the answer crashed, broke a rule or its results
        did not arrive complete (then no part can be judged, and the answer earns nothing)."""
        try:
            results = self._received(records, "outputs", spec["cases"], f"`{self.function_name}`")
        except GradingError:
            return error
        try:
            scores = self.part_scores(results, str(error))
        except Exception:  # noqa: BLE001 - odd values earn no part, they never break the grader
            scores = [PartScore(p.name, p.share, p.title, False) for p in self.parts]
        return PartialCredit(str(error), scores)

    def part_scores(self, results, message=""):
        """[PartScore] of a wrong answer's results [(case, output)] (see `Part`). `message` is
        the answer's GradingError: a catalogued mistake is recognised by its sentence in it."""
        named = self.mistake_named_in(message)
        if named is not None:
            return [PartScore(p.name, p.share, p.title, named.name not in p.mistakes) for p in self.parts]
        scores = []
        for part in self.parts:
            why = self.part_evidence(part, results)
            scores.append(PartScore(part.name, part.share, part.title, why is None, why or ""))
        if all(s.passed for s in scores):  # each part alone looks right, the whole is not
            last = scores[-1]
            scores[-1] = dataclasses.replace(last, passed=False, why="the parts do not work together")
        return scores

    def mistake_named_in(self, message):
        """The catalogued mistake whose sentence `message` (a GradingError's) carries, or None:
        how a wrong answer's verdict is read back into the mistake it names."""
        return next((m for m in self.mistakes if m.message and m.message in message), None)

    def part_evidence(self, part, results):
        """None when the results pass one part's evidence, else a sentence on the first failure."""
        indices = range(len(results)) if part.cases is None else part.cases
        for i in indices:
            case, got = results[i]
            expected = self.run(self.reference, case)
            kinds = [wrong_kind(g, e, name) for name, g, e
                     in zip(self.output_names, self._outputs(got), self._outputs(expected))]
            problem = next((k for k in kinds if k), None) or self.difference(got, expected)
            if problem:
                return f"on a hidden test case{self.describe_case(case)}: {problem}"
        return part.check(self, results) if part.check is not None else None

    def check(self, student_fn, generic=True):
        """Run the answer on every case and judge it, here: the round trip the grader makes
        across its sandbox's wall (collect, serialise, read back as plain data, judge)."""
        spec = self.spec()
        sent = probe.roundtrip_cases(spec)
        return self.judge(probe.roundtrip(probe.collect(sent, student_fn)), generic, spec)

    def diagnose(self, student_fn):
        return self.check(student_fn, generic=False)


def combined_message(mistakes):
    """One message for a number that several catalogued mistakes give: each one's sentence, in
    order, so whichever the student made is named."""
    head, *rest = [m.message for m in mistakes]
    return head + "".join(f" The same number also comes from another mistake: {m}" for m in rest)


def message_matches(template, message):
    """Whether `message` carries a mistake's sentence; a sentence with the student's numbers in it
    ("{steps:,}") matches whatever numbers were filled in."""
    if "{" not in template:
        return template in message
    import re
    pattern = ".+?".join(re.escape(piece) for piece in re.split(r"\{[^{}]*\}", template))
    return re.search(pattern, message, re.S) is not None


@dataclasses.dataclass(frozen=True)
class ValueExercise(Exercise):
    """An answer that is a number, not a function (a "think first" question): `fn` is the
    student's value itself, `reference` the right value and each mistake's `compute` a wrong one.

    A question with numbers of its own per student (course_utils.grading.questions.VARIANTS) has
    a `reference` and mistakes' `compute` that are functions of those numbers, and messages that
    may name them ("{T}"); `personal(student)` is the exercise for one student's numbers, which
    also knows the right answers of the other variants (`others`), so that an answer copied from
    another student is told so. `check` and `judge` use the numbers of the notebook's student
    (questions.student_id(); the grader sets it for each submission)."""

    runner: str = "value"
    numbers: dict = None  # this exercise's numbers, once personal
    others: tuple = ()  # ((numbers, right answer), ...) of the other variants, once personal

    @property
    def varies(self):
        return callable(self.reference)

    def personal(self, student=None):
        if not self.varies:
            return self
        from course_utils.grading import questions
        params = questions.numbers(self.grade_id, student)
        mistakes = tuple(Mistake(m.name, m.message.format(**params),
                                 m.compute(**params) if callable(m.compute) else m.compute)
                         for m in self.mistakes)
        others = tuple((v, self.reference(**v)) for v in questions.variants(self.grade_id) if v != params)
        return dataclasses.replace(self, reference=self.reference(**params), mistakes=mistakes,
                                   numbers=params, others=others)

    def example(self):
        """The exercise for the example's numbers (the notebook's own, and the catalogue tests')."""
        return self.personal("\0") if self.varies else self

    def check(self, student_fn, generic=True):
        if self.varies:
            return self.personal().check(student_fn, generic)
        return super().check(student_fn, generic)

    def judge(self, records, generic=True, spec=None):
        if self.varies:
            return self.personal().judge(records, generic, spec)
        try:
            return super().judge(records, generic, spec)
        except GradingError as error:
            if generic and self.others and self.mistake_named_in(str(error)) is None:
                copied = self._other_variant(records, spec)
                if copied:
                    raise GradingError(copied) from None
            raise

    def matching_mistake(self, results, mistakes=None):
        """The catalogued mistake whose number the student's equals; when several give that same
        number (float16 counted as 1 byte halves the cache exactly as counting the keys only
        does), one mistake whose message names each of them, so the student is not told the
        wrong one alone (issue 39, item 4)."""
        candidates = list(self.mistakes if mistakes is None else mistakes)
        first = super().matching_mistake(results, candidates)
        if first is None:
            return None
        same = [m for m in candidates if m is not first and super(ValueExercise, self).matching_mistake(results, [m])]
        if not same:
            return first
        return Mistake(first.name, combined_message([first, *same]), first.compute)

    def _other_variant(self, records, spec):
        """The sentence for an answer that is right for another variant's numbers, or None."""
        from course_utils.grading import questions
        try:
            results = self._received(records, "outputs", (spec or self.spec())["cases"], self.function_name)
            value = float(results[0][1])
        except (GradingError, TypeError, ValueError, IndexError):
            return None
        mine = questions.words(self.grade_id, self.numbers)
        for index, (params, right) in enumerate(self.others):
            if self.difference(value, float(right)) is None:
                theirs = questions.words(self.grade_id, params)
                example = params == questions.variants(self.grade_id)[0]
                whose = EXAMPLE_ANSWER if example else ANOTHER_STUDENTS
                return (f"`{self.function_name}` = {value:g} {whose} "
                        f"({theirs}), not for yours ({mine}). Every student has numbers of their own: "
                        "work it out for yours (the cell above the answer shows them).")
        return None


@dataclasses.dataclass(frozen=True)
class DtypeKindExercise(Exercise):
    """Tensor results must be of the reference's kind of dtype: floating-point where it is (an
    integer one-hot is no distribution to sample from), and the reference's integer dtype for ids
    (long, as the prompt asks). A floating result may be float32 or float64 whatever the inputs'
    dtype, the course's one policy (tests/exercises/test_categories.py): a comparison with float32
    on either side widens to float32's tolerances."""

    def difference(self, got, expected):
        for name, g, e in zip(self.output_names, self._outputs(got), self._outputs(expected)):
            if not (isinstance(g, torch.Tensor) and isinstance(e, torch.Tensor)):
                continue
            if e.is_floating_point() and not g.is_floating_point():
                return (f"{name} should be a floating-point tensor ({e.dtype}, like the inputs), but it is "
                        f"{g.dtype}.")
            if not e.is_floating_point() and g.dtype != e.dtype:
                return f"{name} should be a {e.dtype} tensor, but it is {g.dtype}."
        return super().difference(got, expected)


def think_first(grade_id, variable, reference, mistakes, answer_name="your answer", rtol=0.0):
    """A think-first question: the number the student sets `variable` to, graded against
    `reference` (exactly, or within `rtol` for an answer like 200 pi) and the catalogued wrong
    numbers of `mistakes`. For a question whose numbers vary by student, `reference` and each
    mistake's `compute` are functions of the numbers (see ValueExercise)."""
    return ValueExercise(grade_id=grade_id, function_name=variable, reference=reference,
                         make_cases=lambda seed: [((), {})], mistakes=mistakes, output_names=(answer_name,),
                         atol=0.0, rtol=rtol)


def mask_scores(scores, mask, mode):
    """Scores masked the right way ("-inf") or a catalogued wrong way, for mistakes to share.

    Returns (scores, after): `after` is the mask to multiply the weights by after the softmax
    (mode "after"), else None. Modes: "-inf" (correct), "inverted", "zero" (0 instead of -inf),
    "after", "ignored". mask is boolean, True = may attend; None leaves the scores alone.
    """
    if mask is None or mode == "ignored":
        return scores, None
    if mode == "-inf":
        return scores.masked_fill(~mask, float("-inf")), None
    if mode == "inverted":
        return scores.masked_fill(mask, float("-inf")), None
    if mode == "zero":
        return scores.masked_fill(~mask, 0.0), None
    if mode == "after":
        return scores, mask
    raise ValueError(f"unknown mask mode {mode!r}")


def check(exercises, grade_id, student_fn):
    """Look up an exercise by grade id in a topic's catalogue and check a student's function."""
    return exercises[grade_id].check(student_fn)


def diagnose(exercises, grade_id, student_fn):
    """Like `check`, but silent on a wrong answer no catalogued mistake explains (see Exercise.check)."""
    return exercises[grade_id].check(student_fn, generic=False)
