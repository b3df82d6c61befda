"""The class overview as Chromium lays it out: a long student id stays in its own column.

Why a browser: whether text runs over into the next column is a matter of layout (an e-mail
address or an LMS id is one long word, which a table cell does not break by itself); only a
browser can measure it.
"""
from autograder import report
from tests.grading import test_report as synthetic

LONG_IDS = ("a.very.long.student.identifier.0123456789@university.example.edu",
            "s" + "x" * 40 + "<b>&'\"")  # markup in an id is text, never a tag


def test_a_long_student_id_wraps_inside_its_column(tmp_path, browser):
    results = synthetic._class() + [
        synthetic._result(LONG_IDS[0], {"self_attention_softmax": synthetic.RAISES}),
        synthetic._result(LONG_IDS[1], {"self_attention_softmax": f"GradingError: {synthetic.FIRST.message}"}),
        synthetic._result("ab" * 12, status="could_not_grade"),  # the not-graded row has the same header
    ]
    report.write(results, str(tmp_path))
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    try:
        page.goto((tmp_path / "class_overview.html").as_uri())
        headers = page.eval_on_selector_all("table tr > th:first-child", """cells => cells.map(th => {
            const next = th.nextElementSibling;
            return {text: th.firstChild ? th.firstChild.textContent : "",
                    overflows: th.scrollWidth > th.clientWidth,
                    right: th.getBoundingClientRect().right,
                    nextLeft: next ? next.getBoundingClientRect().left : Infinity,
                    height: th.getBoundingClientRect().height};
        })""")
    finally:
        page.close()
    by_id = {h["text"]: h for h in headers}
    for student in (*LONG_IDS, "ab" * 12):
        assert student in by_id, (student, list(by_id))  # the whole id, as text
        assert not by_id[student]["overflows"] and by_id[student]["right"] <= by_id[student]["nextLeft"] + 0.5
    assert by_id[LONG_IDS[0]]["height"] > 1.5 * by_id["passer0"]["height"]  # wrapped over several lines
    assert by_id["passer0"]["height"] == by_id["blank0"]["height"]  # short ids stay on one line
