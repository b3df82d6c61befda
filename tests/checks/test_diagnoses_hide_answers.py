"""A catalogued mistake's sentence names the mistake, never the answer (issue 37, item 5).

Why: Gradescope may show every test's message before the due date (visibility "visible"), so a
diagnosis is read while the answer can still be changed. A sentence says what was miscounted and
where to look again; it must not print the number the question asks for, nor the formula or
equation whose value is that number.

What this checks, for every question whose answer is a value (think-first questions, their
numbers per student, and the fixed-number questions of notebooks 05, 09, 10 and 11):

* the sentence a student sees for each catalogued mistake (the judge's own message, for the
  numbers of several student ids covering every variant) contains no number that is the right
  answer: written out ("2,016", "628.3", "3.4" for 3.375), as a power ("2^10") or as a multiple of
  pi ("200 pi"), within the tolerance the question accepts;
* it matches none of the formulas that spell the answer's computation (`FORMULAS`), nor a product
  of three or more factors or a shape of three or more axes (the count written out);
* for code exercises, no sentence holds the expression the student is asked to type
  (`CODE_TO_TYPE`).

What it cannot catch: an answer in words ("twice what you gave", "one more layer"), an expression
whose value is the answer ("log2(8)" when it is 3), or a formula written another way than the
patterns below. The tests of the check (`test_the_check_*`) hold sentences the catalogues used to
print and prove each is refused.
"""
import json
import math
import pathlib
import re

import pytest

from course_utils.grading import GradingError, questions
from course_utils.reference import mistakes as framework
from course_utils.reference.mistakes import registry

CATALOGUES = registry.catalogues()
TOPICS = sorted(CATALOGUES)


def _catalogue(topic):
    return CATALOGUES[topic]


def _value_questions():
    return sorted((grade_id, exercise) for topic in TOPICS for grade_id, exercise in _catalogue(topic).items()
                  if isinstance(exercise, framework.ValueExercise))


VALUE_QUESTIONS = dict(_value_questions())


# --------------------------------------------------------------------------- numbers in a sentence

_DIGITS = r"\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?"
_NUMBER = re.compile(rf"(?<![\w.^])({_DIGITS})(?:e([+-]?\d+))?")
_POWER = re.compile(rf"(?<![\w.])({_DIGITS})\s*\^\s*\(?\s*(\d+)")
_TIMES_PI = re.compile(rf"(?<![\w.])({_DIGITS})\s*\*?\s*(?:pi|π)\b")


def _significant(text):
    """How many significant digits a number as written has (an integer's trailing zeros are not)."""
    digits = text.replace(",", "").replace(".", "").lstrip("0")
    return len(digits.rstrip("0")) if "." not in text else len(digits)


def numbers_in(sentence):
    """[(value, significant digits)] of every number written in `sentence`."""
    found = []
    for match in _NUMBER.finditer(sentence):
        value = float(match.group(1).replace(",", ""))
        found.append((value * 10.0 ** int(match.group(2) or 0), _significant(match.group(1))))
    for match in _POWER.finditer(sentence):
        found.append((float(match.group(1).replace(",", "")) ** int(match.group(2)), 16))
    for match in _TIMES_PI.finditer(sentence):
        found.append((float(match.group(1).replace(",", "")) * math.pi, 16))
    return found


def states_answer(sentence, answer, rtol):
    """The number in `sentence` that gives `answer` away, or None: one the question would accept
    (within rtol; exactly for counts), or the answer rounded to that number's own digits (at least
    two of them: "3.4" for 3.375, "630" for 628.3)."""
    answer = float(answer)
    for value, digits in numbers_in(sentence):
        if math.isclose(value, answer, rel_tol=max(rtol, 1e-9), abs_tol=0.0):
            return value
        if digits >= 2 and value == float(f"{answer:.{digits}g}"):
            return value
    return None


# --------------------------------------------------------------------------- formulas in a sentence

_FACTOR = r"(?:[A-Za-z_]\w*|\d+(?:\.\d+)?|\([^()]*\))(?:\^\w+)?"
_TIMES = r"(?:\s*[*×·]\s*|\s+x\s+)"
GENERIC_FORMULAS = (
    re.compile(rf"{_FACTOR}{_TIMES}{_FACTOR}{_TIMES}{_FACTOR}"),  # a count written out: B x H x T x S
    re.compile(r"\(\s*\w+(?:\s*,\s*\w+){2,}\s*\)"),  # a shape of three or more axes: (B, H, T, S)
)

# The computation of each answer, in the ways a sentence would write it.
FORMULAS = {
    "self_attention_crossover": [r"n\^2\s*d\s*=", r"=\s*\d*\s*n\s*d\^2", r"\bn\s*=\s*\d+\s*d\b"],
    "scaling_dk_raw_variance": [r"Var\(q_i\)\s*Var\(k_i\)", r"d_k\s+times", r"variance\s*(?:\^\s*2|squared)",
                                r"is its square"],
    "causal_cnn_layers_needed": [r"log2", r"2\s*\^\s*L\b", r"ceil", r"about half of"],
    "embeddings_positions_wavelength": [r"2\s*(?:pi|π)", r"exponent is 2i"],
    "rnn_limits_capacity": [r"log2\(", r"floor"],
    "masking_transformer_blocked_pairs": [r"T\s*\(\s*T\s*-\s*1\s*\)", r"T\^2\s*-\s*T"],
    "multi_head_weights_count": [r"batch\s*[x*×]\s*heads", r"the batch has \d"],
    "encoder_decoder_cross_weights": [r"\bB\s*H\s*T\s*S\b"],
    "vision_transformer_embedding_parameters": [r"C\s*\*\s*P\s*\*\s*P", r"C\s*P\^2"],
}


def formula_in(sentence, grade_id):
    """The piece of `sentence` that spells the answer's computation, or None."""
    patterns = [*GENERIC_FORMULAS, *(re.compile(p) for p in FORMULAS.get(grade_id, ()))]
    for pattern in patterns:
        match = pattern.search(sentence)
        if match:
            return match.group(0)
    return None


# --------------------------------------------------------------------------- what a student sees

def _students(grade_id):
    """One student id per variant of the question's numbers (None: the example's, no id)."""
    if grade_id not in questions.VARIANTS:
        return {0: None}
    students = {0: None}
    for i in range(1000):
        students.setdefault(questions.variant_index(grade_id, f"student{i}"), f"student{i}")
    assert len(students) == len(questions.VARIANTS[grade_id])
    return students


def _personal(exercise, student):
    return exercise.personal("\0" if student is None else student) if exercise.varies else exercise


def seen_sentences(grade_id):
    """[(student, mistake name, right answer, the sentence the judge gives that mistake's value)]."""
    exercise = VALUE_QUESTIONS[grade_id]
    seen = []
    for student in _students(grade_id).values():
        mine = _personal(exercise, student)
        for mistake in mine.mistakes:
            with pytest.raises(GradingError) as error:
                mine.check(mistake.compute)
            seen.append((student, mistake.name, mine.reference, str(error.value)))
    return seen


pytestmark = pytest.mark.usefixtures("no_student_id")  # tests/checks/conftest.py


def test_every_value_question_is_covered():
    assert set(questions.VARIANTS) <= set(VALUE_QUESTIONS)
    assert {"self_attention_crossover", "encoder_decoder_cross_weights", "fast_generation_predict_cache",
            "vision_transformer_embedding_parameters"} <= set(VALUE_QUESTIONS)
    assert set(FORMULAS) <= set(VALUE_QUESTIONS)


@pytest.mark.parametrize("grade_id", sorted(VALUE_QUESTIONS))
def test_no_diagnosis_states_the_answer(grade_id):
    rtol = VALUE_QUESTIONS[grade_id].rtol
    leaks = []
    for student, name, answer, sentence in seen_sentences(grade_id):
        number = states_answer(sentence, answer, rtol)
        if number is not None:
            leaks.append(f"{name} (student {student!r}, answer {answer:g}) prints {number:g}: {sentence}")
    assert not leaks, "\n".join(leaks)


@pytest.mark.parametrize("grade_id", sorted(VALUE_QUESTIONS))
def test_no_diagnosis_spells_the_computation(grade_id):
    leaks = []
    for student, name, _, sentence in seen_sentences(grade_id):
        formula = formula_in(sentence, grade_id)
        if formula is not None:
            leaks.append(f"{name} (student {student!r}) writes {formula!r}: {sentence}")
    assert not leaks, "\n".join(leaks)


# --------------------------------------------------------------------------- code exercises

_LIBRARY = re.compile(r"\b(?:torch\.nn\.functional|torch|F|np|numpy|math)\.")
_SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
_SOLUTIONS = pathlib.Path(__file__).resolve().parents[2] / "solutions"


def _compact(text):
    """Code without spaces or library prefixes: `torch.tanh(x @ W + b)` and `tanh(x@W+b)` compare equal."""
    return _LIBRARY.sub("", re.sub(r"\s+", "", text or ""))


def returned_expressions():
    """grade_id -> the expressions its solution returns (a `return` line, or the one line of a
    one-line answer), compacted, leaving out those the notebook prints itself (its prose, or the
    answer cell's stub and docstring): repeating a given is not giving the answer away."""
    found = {}
    for path in sorted(_SOLUTIONS.glob("*/*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        prose = _compact(" ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown"))
        for cell in cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            source = "".join(cell["source"])
            if not grade_id or "### BEGIN SOLUTION" not in source:
                continue
            stub = _compact(_SOLUTION.sub("", source))
            lines = [line.split("#")[0].strip() for body in _SOLUTION.findall(source) for line in body.splitlines()]
            lines = [line for line in lines if line]
            returns = [line for line in lines if line.startswith("return ")]
            chosen = returns or (lines if len(lines) == 1 else [])
            for line in chosen:
                line = re.sub(r"^return\s+", "", line)
                line = re.sub(r"^[\w.\[\], ]+?\s*=(?!=)\s*", "", line)  # a one-line answer's assignment
                expression = _compact(line)
                if len(expression) >= 12 and re.search(r"[@*+/]", expression) and not (
                        expression in prose or expression in stub):
                    found.setdefault(grade_id, []).append(expression)
    return found


def code_in(sentence, expressions):
    """The returned expression `sentence` writes out, or None."""
    compact = _compact(sentence)
    return next((e for e in expressions if e in compact), None)


def test_no_sentence_of_a_code_exercise_writes_what_it_returns():
    """Crash hints too: they are shown when the answer raises, before the deadline as well."""
    returned = returned_expressions()
    assert len(returned) >= 10  # the solutions are found and read
    leaks = []
    for topic in TOPICS:
        for grade_id, exercise in _catalogue(topic).items():
            sentences = [("crash_hint", exercise.crash_hint)] + [(m.name, m.message) for m in exercise.mistakes]
            for name, sentence in sentences:
                code = code_in(sentence, returned.get(grade_id, ()))
                if code:
                    leaks.append(f"{grade_id} {name} writes {code!r}: {sentence}")
    assert not leaks, "\n".join(leaks)


# --------------------------------------------------------------------------- tests of the check

# Sentences the catalogues printed before issue 37 item 5, with the answer they were shown next to.
OLD_NUMBERS = [
    ("that is one head's matrix: the layer has 12 heads, each with its own T x T weights.", 12.0, 2e-3),
    ("that counts 4 bytes a number; float16 takes 2.", 2.0, 2e-3),
    ("that is one sequence: the batch holds 3, each with its own cache.", 3.0, 2e-3),
    ("that is in MiB: the question asks for GiB (1 GiB = 1024 MiB).", 1.0, 2e-3),
]
OLD_FORMULAS = [
    ("self_attention_crossover", "n = d compares one n^2 d term with one n d^2 term; there are two n x n "
                                 "products and four projections: 2 n^2 d = 4 n d^2."),
    ("scaling_dk_raw_variance", "you multiplied d_k by one variance; a product q_i k_i of independent entries "
                                "has variance Var(q_i) Var(k_i)."),
    ("encoder_decoder_cross_weights", "that is one head's weights: each of the heads has its own (B, T, S) weights."),
    ("rnn_limits_capacity", "you counted one bit per symbol; telling 8 symbols apart takes log2(8) bits each."),
    ("vision_transformer_embedding_parameters", "an RGB patch holds C * P * P numbers, the P * P pixels of each "
                                                "of its 3 channels."),
    ("causal_cnn_layers_needed", "you rounded the logarithm down: that many layers reach a field of only about "
                                 "half of 1,000 steps."),
]


@pytest.mark.parametrize("sentence, answer, rtol", OLD_NUMBERS)
def test_the_check_refuses_an_old_sentence_that_printed_the_answer(sentence, answer, rtol):
    assert states_answer(sentence, answer, rtol) == answer


@pytest.mark.parametrize("written, answer, rtol", [
    ("2,016 pairs", 2016, 0.0), ("about 3.4 GiB", 3.375, 2e-3), ("200 pi positions", 200 * math.pi, 0.005),
    ("2^10 weights", 1024, 0.0), ("628.3 positions", 200 * math.pi, 0.005), ("1e9 bytes", 1e9, 0.0)])
def test_the_check_reads_numbers_as_they_are_written(written, answer, rtol):
    assert states_answer(written, answer, rtol) is not None


@pytest.mark.parametrize("sentence, answer, rtol", [
    ("a field of 1,000 steps", 10, 0.0),  # 1,000 is not 10
    ("dimensions 2i and 2i + 1", 628.3, 0.005),
    ("that counts one byte a number; a float16 number takes more.", 2.0, 2e-3),
    ("that is 3 GiB", 3.375, 2e-3),  # one digit: too coarse to count as the answer
])
def test_the_check_passes_a_sentence_without_the_answer(sentence, answer, rtol):
    assert states_answer(sentence, answer, rtol) is None


@pytest.mark.parametrize("grade_id, sentence", OLD_FORMULAS)
def test_the_check_refuses_an_old_sentence_that_spelled_the_computation(grade_id, sentence):
    assert formula_in(sentence, grade_id) is not None


def test_the_check_refuses_an_old_crash_hint_that_wrote_the_returned_line():
    returned = returned_expressions()
    old = ("x_t is (B, d_in), h_prev is (B, H), W_xh is (d_in, H), W_hh is (H, H) and b is (H,): the step is "
           "torch.tanh(x_t @ W_xh + h_prev @ W_hh + b)")
    assert code_in(old, returned["rnn_limits_step"]) is not None
    assert code_in("x_t is (B, d_in): check each product's sizes", returned["rnn_limits_step"]) is None
