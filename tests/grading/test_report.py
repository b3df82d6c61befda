"""The class report on a synthetic class whose mistakes are known."""
import csv
import re

from autograder import report
from course_utils.reference.mistakes import self_attention as catalogue

SOFTMAX = catalogue.EXERCISES["self_attention_softmax"]
ATTENTION = catalogue.EXERCISES["self_attention_attention_numpy"]


def _result(student, softmax_message=None, attention_message=None, status="graded"):
    def cell(grade_id, points, message):
        return {"notebook": "self_attention", "grade_id": grade_id, "max_score": points,
                "score": 0.0 if message else points, "message": message or ""}
    return {"student": student, "assignment": "05_self_attention", "status": status,
            "cells": [cell("self_attention_softmax_tests", 2.0, softmax_message),
                      cell("self_attention_attention_numpy_tests", 3.0, attention_message)]}


def _class():
    first, second = SOFTMAX.mistakes[0], SOFTMAX.mistakes[1]
    wrong_axis = [m for m in ATTENTION.mistakes][0]
    results = [_result(f"passer{i}") for i in range(4)]
    results += [_result(f"first{i}", f"GradingError: `softmax`: {first.message}") for i in range(3)]
    results += [_result("second0", f"GradingError: `softmax`: {second.message}",
                        f"GradingError: `attention_numpy`: {wrong_axis.message}")]
    results += [_result("odd0", "GradingError: `softmax` gives a wrong answer on a hidden test case: ...")]
    results += [_result("late0", "NotRun: This cell was not run: the kernel died in cell x.")]
    results += [_result("absent0", status="not_submitted")]  # not counted: nothing was graded
    return results, first, second, wrong_axis


def test_counts_name_each_catalogued_mistake(tmp_path):
    results, first, second, wrong_axis = _class()
    report.write(results, str(tmp_path))
    with open(tmp_path / "mistakes.csv") as fh:
        rows = {(r["exercise"], r["outcome"]): (int(r["students"]), float(r["share"])) for r in csv.DictReader(fh)}
    assert rows[("self_attention_softmax", "passed")] == (4, 0.4)
    assert rows[("self_attention_softmax", first.name)] == (3, 0.3)
    assert rows[("self_attention_softmax", second.name)] == (1, 0.1)
    assert rows[("self_attention_softmax", "uncatalogued")] == (1, 0.1)
    assert rows[("self_attention_softmax", "not run")] == (1, 0.1)
    assert rows[("self_attention_attention_numpy", "passed")] == (9, 0.9)
    assert rows[("self_attention_attention_numpy", wrong_axis.name)] == (1, 0.1)


def test_the_page_is_self_contained_names_no_student_and_puts_the_top_mistake_first(tmp_path):
    results, first, _, _ = _class()
    report.write(results, str(tmp_path))
    page = (tmp_path / "report.html").read_text()
    for result in results:
        assert result["student"] not in page
    assert "<script" not in page.lower() and not re.search(r"(src|href)=['\"]https?:", page)
    assert "data:image/png;base64," in page
    top = page.split("The five most common mistakes", 1)[1].split("</table>", 1)[0]
    assert top.index(first.name) < top.index("uncatalogued")
    assert "30%" in top
