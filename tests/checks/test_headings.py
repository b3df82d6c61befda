"""The one reader of exercise headings (course_utils/grading/headings.py): which heading titles
an exercise, its title and points, and which graded cells it titles."""
import pytest

from course_utils.grading import headings


def md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(grade_id, solution=False, points=0):
    return {"cell_type": "code", "source": "", "outputs": [], "execution_count": None,
            "metadata": {"nbgrader": {"grade_id": grade_id, "solution": solution, "grade": bool(points),
                                      "points": points}}}


@pytest.mark.parametrize("text, title, points", [
    ("Exercise 1 · A stable softmax (2 points)", "Exercise 1 · A stable softmax", 2.0),
    ("Exercise 1: `rnn_step` (2 points)", "Exercise 1: `rnn_step`", 2.0),
    ("Exercise 2 — think first (1 point)", "Exercise 2 — think first", 1.0),
    ("Think first · How deep? (1 point)", "Think first · How deep?", 1.0),
    ("Exercise 6 · Where the $n^2$ term  takes over ( 1.5 Points )", "Exercise 6 · Where the $n^2$ term takes over", 1.5),
    ("Exercise 3 · no points given", "Exercise 3 · no points given", None),
    ("Counting heads (1 point)", "Counting heads", 1.0),  # its points make it an exercise
])
def test_an_exercise_heading_gives_its_title_and_points(text, title, points):
    heading = headings.exercise_heading(text, 3)
    assert (heading.title, heading.points, heading.level) == (title, points, 3)
    assert heading.shown == " ".join(text.split())


@pytest.mark.parametrize("text", ["A section", "Exercises in this notebook", "Hint: use `keepdims`",
                                  "Why (2 points) are not at the end", ""])
def test_a_heading_that_names_no_exercise_is_none(text):
    assert headings.exercise_heading(text, 3) is None


def test_markdown_headings_skip_fenced_code_and_closing_hashes():
    source = "# 05 · Self-attention ##\n\ntext\n```python\n# a comment, not a heading\n```\n#### Hint\n####### no"
    assert headings.markdown_headings(source) == [(1, "05 · Self-attention"), (4, "Hint")]


def test_each_graded_cell_is_titled_by_the_exercise_heading_over_it():
    cells = [
        code("z_first", solution=True),  # no heading yet
        md("# 99 · A notebook\n\n### Exercise 1: `rnn_step` (2 points)\nWrite it."),
        code("x_step", solution=True),
        md("#### A hint, not an exercise"),  # deeper: the exercise goes on
        code("x_step_tests", points=2),
        md("## A section\n\n### Think first · how deep? (1 point)"),
        code("x_depth", solution=True),
        md("### Exercise 9 · a heading between answer and tests (1 point)"),
        code("x_depth_tests", points=1),  # takes its answer's title
        md("## Another section: a heading, not an exercise's"),
        code("y_f", solution=True),
        code("y_f_tests", points=1),
        {"cell_type": "code", "source": "print(1)", "metadata": {}, "outputs": [], "execution_count": None},
    ]
    notebook = {"cells": cells}
    found = [(headings.grade_id(c), h and h.title) for c, h in headings.graded_cells(notebook)]
    assert found == [("z_first", None), ("x_step", "Exercise 1: `rnn_step`"),
                     ("x_step_tests", "Exercise 1: `rnn_step`"), ("x_depth", "Think first · how deep?"),
                     ("x_depth_tests", "Think first · how deep?"), ("y_f", None), ("y_f_tests", None)]
    assert headings.exercise_titles(notebook) == {
        "x_step": "Exercise 1: `rnn_step`", "x_step_tests": "Exercise 1: `rnn_step`",
        "x_depth": "Think first · how deep?", "x_depth_tests": "Think first · how deep?"}
    assert [headings.is_test_cell(c) for c in cells if c["cell_type"] == "code"] == [
        False, False, True, False, True, False, True, False]


def test_sources_as_lists_of_lines_read_the_same():
    cells = [md(["### Exercise 1 · ", "Split (1 point)\n"]), code("a_tests", points=1)]
    [(_, heading)] = headings.graded_cells({"cells": cells})
    assert heading.shown == "Exercise 1 · Split (1 point)" and heading.points == 1.0


def test_the_answer_id_of_a_test_cell():
    assert headings.exercise_of("self_attention_softmax_tests") == "self_attention_softmax"
    assert headings.exercise_of("self_attention_softmax") == "self_attention_softmax"
