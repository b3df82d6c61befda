"""Think-first numbers of your own: every student answers the same question with other numbers.

Why: a think-first question ("how many layers reach 1,000 steps?") graded against one number is
answered once per class and passed around. Here each question lists variants of its numbers;
a student gets one of them from their student id (the one the grader knows them by), so the
grader, which knows the id too, computes each student's own right answer, and an answer copied
from a friend is told it answers another student's numbers.

Where the id comes from, first found wins:
1. `COURSE_STUDENT_ID` (the grader sets it for each submission's kernel);
2. `JUPYTERHUB_USER` (on the course's JupyterHub, your login, which is also your id there);
3. a file `student_id.txt` beside the notebook or in a folder above it, which
   `set_student_id("...")` writes (and `make lab STUDENT=...` does for you).
Without an id you see the example's numbers, the ones the notebook works through later, and the
answer cell tells you how to set it. The variants are public (they are the question); the right
answers live with the mistake catalogues, which students never receive.
"""
import hashlib
import os
import pathlib
import re

ID_FILE = "student_id.txt"
# What the grader's sentence says of an answer right for other numbers than the student's own
# (the catalogue writes it, the class report reads it).
ANOTHER_STUDENTS = "is the right answer for another student's question"
EXAMPLE_ANSWER = "is the right answer for the notebook's example"

# grade_id -> the variants of its numbers. The first is the example the notebook itself uses (and
# reveals after the question): a student with an id never gets it.
VARIANTS = {
    "causal_cnn_layers_needed": [{"steps": n} for n in (1000, 200, 300, 1500, 3000, 5000, 12000, 20000)],
    "masking_transformer_blocked_pairs": [{"T": n} for n in (64, 24, 40, 48, 80, 96, 100, 128)],
    "long_context_weights_guess": [{"heads": h, "T": t} for h, t in (
        (16, 32768), (8, 32768), (12, 16384), (24, 8192), (16, 65536), (40, 8192), (8, 65536), (20, 16384))],
    "scaling_dk_raw_variance": [{"d_k": d, "variance": v} for d, v in (
        (256, 2), (64, 3), (1024, 2), (256, 3), (144, 5), (256, 0.5), (64, 5), (1024, 3))],
    "multi_head_weights_count": [{"batch": b, "tokens": t, "heads": h, "d_model": d} for b, t, h, d in (
        (2, 10, 8, 64), (3, 10, 4, 64), (2, 12, 8, 128), (4, 6, 8, 64), (2, 16, 4, 32), (3, 8, 16, 128),
        (4, 7, 2, 32), (2, 20, 6, 96))],
    "rnn_limits_capacity": [{"numbers": n, "bits_each": b, "symbols": s} for n, b, s in (
        (32, 2, 8), (20, 2, 8), (100, 2, 8), (64, 2, 32), (48, 3, 32), (50, 3, 16), (46, 2, 8), (26, 3, 16))],
    "embeddings_positions_wavelength": [{"d_model": d, "i": i} for d, i in (
        (8, 2), (12, 4), (16, 5), (16, 7), (32, 9), (32, 11), (32, 13), (24, 7))],
    "bahdanau_attention_weights_count": [{"source": s, "target": t} for s, t in (
        ("the 3rd of March, 1999", "1999-03-03"), ("1987/06/14", "1987-06-14"), ("June 14, 1987", "1987-06-14"),
        ("sun 21 sep 2031", "2031-09-21"), ("December 24, 2043", "2043-12-24"), ("Sunday, 5 May 1968", "1968-05-05"),
        ("wednesday, august 1, 2012", "2012-08-01"), ("the 21st of September, 2031", "2031-09-21"))],
    "llm_attention_cache_guess": [{"layers": l, "q_heads": q, "kv_heads": kv, "T": t} for l, q, kv, t in (
        (32, 32, 8, 32768), (32, 32, 4, 32768), (40, 40, 8, 32768), (28, 28, 4, 65536), (24, 32, 8, 16384),
        (32, 32, 8, 131072), (36, 36, 6, 32768), (16, 16, 2, 65536))],
    "induction_heads_position_guess": [{"span": s, "query": t} for s, t in (
        (12, 17), (10, 14), (9, 16), (11, 19), (14, 24), (8, 10), (16, 27), (7, 13))],
    "linear_attention_cache_ratio": [{"layers": l, "heads": h, "d": d, "T": t} for l, h, d, t in (
        (24, 16, 64, 4096), (32, 32, 128, 10240), (12, 12, 64, 3072), (28, 16, 128, 32768), (16, 8, 64, 12288),
        (40, 40, 128, 4096), (20, 16, 80, 10240), (36, 24, 96, 9216))],
}

# How each variant reads in the notebook: grade_id -> a function of the numbers.
_WORDS = {
    "causal_cnn_layers_needed": lambda steps: f"a receptive field of at least {steps:,} input steps",
    "masking_transformer_blocked_pairs": lambda T: f"a window of T = {T} tokens",
    "long_context_weights_guess": lambda heads, T: f"{heads} heads at T = {T:,} tokens",
    "llm_attention_cache_guess": lambda layers, q_heads, kv_heads, T: (
        f"{layers} layers, {q_heads} query heads and {kv_heads} key/value heads of dimension 128 in float16, "
        f"T = {T:,} tokens"),
    "scaling_dk_raw_variance": lambda d_k, variance: f"d_k = {d_k}, entries of q and k of variance {variance:g}",
    "multi_head_weights_count": lambda batch, tokens, heads, d_model: (
        f"{batch} sentences of {tokens} tokens, d_model = {d_model}, {heads} heads of width {d_model // heads}"),
    "rnn_limits_capacity": lambda numbers, bits_each, symbols: (
        f"a state of {numbers} numbers of {bits_each} bits each, an alphabet of {symbols} symbols"),
    "embeddings_positions_wavelength": lambda d_model, i: (
        f"d_model = {d_model}, dimensions {2 * i} and {2 * i + 1}, the pair i = {i}"),
    "bahdanau_attention_weights_count": lambda source, target: (
        f"the date \"{source}\", {len(source)} characters long, written as \"{target}\""),
    "induction_heads_position_guess": lambda span, query: (
        f"a span of L = {span} random tokens followed by the same {span} tokens (positions 0 to {2 * span - 1}), "
        f"the query at position t = {query}"),
    "linear_attention_cache_ratio": lambda layers, heads, d, T: (
        f"{layers} layers of {heads} heads of dimension d = {d}, in float16, after T = {T:,} tokens"),
}


def _valid(student):
    """The id as given, without surrounding spaces, or None if there is none (empty, too long,
    or with control characters)."""
    student = str(student).strip() if student is not None else ""
    return student if 0 < len(student) <= 100 and student.isprintable() else None


def _id_file(start=None):
    folder = pathlib.Path(start or os.getcwd()).resolve()
    for candidate in [folder, *folder.parents][:4]:
        path = candidate / ID_FILE
        if path.is_file():
            return path
    return None


def student_id():
    """Your student id, or None when none is set (see the module's docstring)."""
    for variable in ("COURSE_STUDENT_ID", "JUPYTERHUB_USER"):
        value = _valid(os.environ.get(variable))
        if value:
            return value
    path = _id_file()
    if path is not None:
        try:
            return _valid(path.read_text(encoding="utf-8", errors="replace")[:200])
        except OSError:
            return None
    return None


def set_student_id(student, folder=None):
    """Write your id (as your instructor knows you: your login or student number) to
    student_id.txt above this notebook's folder, so every notebook of the course finds it."""
    value = _valid(student)
    if value is None:
        raise ValueError("a student id is 1 to 100 printable characters, e.g. set_student_id('jdoe')")
    here = pathlib.Path(folder or os.getcwd()).resolve()
    target = here.parent if re.match(r"^\d\d_", here.name) else here
    (target / ID_FILE).write_text(value + "\n", encoding="utf-8")
    return target / ID_FILE


# The id graders file a student under keeps letters, digits, ".", "_", "@" and "-" (a grading
# folder's name; Gradescope's emails hold "+": ada+cs101@uni.edu). The numbers are drawn from the
# id in that form, so the student's notebook and every grader agree whichever form was typed.
_NOT_IN_IDS = re.compile(r"[^A-Za-z0-9._@-]")


def canonical_id(student):
    """`student` as graders file it: every character other than a letter, a digit, '.', '_', '@'
    or '-' becomes '-', leading punctuation is dropped, at most 64 characters; None if nothing is
    left (ada+cs101@uni.edu -> ada-cs101@uni.edu)."""
    student = _valid(student)
    made = _NOT_IN_IDS.sub("-", student).lstrip("._@-")[:64] if student else ""
    return made or None


def variants(grade_id):
    return [dict(v) for v in VARIANTS[grade_id]]


def variant_index(grade_id, student):
    """0 (the example) without an id; else one of the others, fixed by the id and the question."""
    count = len(VARIANTS[grade_id])
    student = canonical_id(student)
    if student is None or count < 2:
        return 0
    digest = hashlib.sha256(f"{grade_id}\0{student}".encode()).digest()
    return 1 + int.from_bytes(digest[:8], "big") % (count - 1)


def numbers(grade_id, student=None):
    """The numbers of `grade_id`'s question for `student` (default: this notebook's student)."""
    if grade_id not in VARIANTS:
        return {}
    if student is None:
        student = student_id()
    return dict(VARIANTS[grade_id][variant_index(grade_id, student)])


def words(grade_id, params):
    return _WORDS[grade_id](**params)


def show(grade_id):
    """Display the numbers of the question for this notebook's student (Markdown)."""
    student = student_id()
    text = words(grade_id, numbers(grade_id, student))
    if student:
        message = f"**Your numbers** (student `{student}`): **{text}**."
    else:
        message = (f"**Example numbers**: **{text}**. These are the numbers the notebook works through "
                   "later; your own come from your student id. Set it once with "
                   "`grading.questions.set_student_id(\"your id\")` (your login or student number, as your "
                   "instructor knows you), then run this cell again.")
    try:
        from IPython.display import Markdown, display
        display(Markdown(message))
    except ImportError:  # outside IPython
        print(message)
    return None
