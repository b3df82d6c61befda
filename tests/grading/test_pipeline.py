"""The whole command on a small class: CSV contract, resume, determinism, parallelism, the zip
path, and the two refusals (no sandbox; a solution that fails its own tests)."""
import os
import pathlib
import shutil
import zipfile

import nbformat
import pytest

import grading_helpers as H

A, NB = "00_fixture", "fixture.ipynb"
CSVS = ("grades.csv", "grades_by_cell.csv", "problems.csv")


def _class(root):
    course = H.make_course(root / "course")
    subs = root / "subs"
    H.write_student(subs, "alice", A, NB, H.honest(course, A, NB))
    wrong = H.honest(course, A, NB)
    H.cell(wrong, "fixture_rows").source = "def row_sums(m):\n    return np.asarray(m).sum(axis=0)\n"
    H.write_student(subs, "bob", A, NB, wrong)
    H.write_student(subs, "carol", A, NB, "not a notebook")
    return course, subs


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")
    root = tmp_path_factory.mktemp("small")
    course, subs = _class(root)
    first = H.grade(subs, root / "out", course, "--jobs", "2")
    return root, course, subs, first


def read(out, name):
    return (pathlib.Path(out) / name).read_bytes()


@pytest.mark.slow
def test_csv_contract(small):
    root, _, _, first = small
    assert first.returncode == 0, first.stderr[-3000:]
    out = root / "out"
    assert read(out, "grades.csv").decode().splitlines() == [
        "student_id,assignment,score,max_score,status",
        "alice,00_fixture,5,5,graded",
        "bob,00_fixture,2,5,graded",
        "carol,00_fixture,,5,could_not_grade",
    ]
    cells = H.read_csv(out / "grades_by_cell.csv")
    assert list(cells[0]) == ["student_id", "assignment", "notebook", "grade_id", "score", "max_score", "status"]
    assert [(r["student_id"], r["grade_id"], r["score"]) for r in cells] == [
        ("alice", "fixture_double_tests", "2"), ("alice", "fixture_rows_tests", "3"),
        ("bob", "fixture_double_tests", "2"), ("bob", "fixture_rows_tests", "0"),
        ("carol", "fixture_double_tests", ""), ("carol", "fixture_rows_tests", "")]
    assert H.problems(out, "alice") == [] and H.problems(out, "bob") == []
    assert "not valid notebook JSON" in H.problems(out, "carol")[0]
    for s in ("alice", "bob"):
        assert (out / "feedback" / s / A / "fixture.html").exists()
    assert not (out / "feedback" / "carol").exists()
    html = (out / "feedback" / "bob" / A / "fixture.html").read_text()
    assert "GradingError" in html and "secret_marker" not in html


@pytest.mark.slow
def test_the_batch_writes_the_class_report(small):
    """`make grade` also writes mistakes.csv and report.html, counted over graded students only
    (the fixture has no catalogue, so bob's failure is wrong but not named), with no student named."""
    root, _, _, first = small
    out = root / "out"
    rows = {(r["exercise"], r["outcome"]): r["students"] for r in H.read_csv(out / "mistakes.csv")}
    assert rows == {("fixture_double", "passed"): "2", ("fixture_rows", "passed"): "1",
                    ("fixture_rows", "wrong, not named"): "1"}
    page = (out / "report.html").read_text()
    assert "fixture_rows" in page and not any(name in page for name in ("alice", "bob", "carol"))


@pytest.mark.slow
def test_rerun_resumes_and_gives_identical_csvs(small):
    root, course, subs, first = small
    before = {n: read(root / "out", n) for n in CSVS}
    again = H.grade(subs, root / "out", course, "--jobs", "2")
    assert again.returncode == 0
    assert "(2 already graded earlier, kept)" in again.stderr
    assert {n: read(root / "out", n) for n in CSVS} == before


@pytest.mark.slow
def test_serial_zip_run_matches_parallel_folder_run(small):
    root, course, subs, _ = small
    z = root / "class.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for path in sorted(subs.rglob("*.ipynb")):
            student = path.relative_to(subs).parts[0]
            zf.write(path, f"{student}_1001_2002_{path.name}")
    serial = H.grade(z, root / "out_zip", course, "--jobs", "1", "--regrade")
    assert serial.returncode == 0, serial.stderr[-3000:]
    for name in CSVS:
        assert read(root / "out_zip", name) == read(root / "out", name), name


@pytest.mark.slow
def test_a_solution_that_fails_its_own_tests_stops_the_batch(tmp_path):
    if H.sandbox_unavailable():
        pytest.fail("the grading sandbox cannot run here (make test-tools sets it up)")
    course, subs = _class(tmp_path)
    src = course / "solutions" / A / NB
    nb = nbformat.read(src, as_version=4)
    H.cell(nb, "fixture_rows_tests").source = H.cell(nb, "fixture_rows_tests").source.replace(
        "### BEGIN HIDDEN TESTS\n", "### BEGIN HIDDEN TESTS\nimport course_utils.no_such_module\n")
    nbformat.write(nb, src)
    r = H.grade(subs, tmp_path / "out", course, "--jobs", "1")
    assert r.returncode == 2
    assert "the solution notebook scores 2/5 in the grading sandbox" in r.stderr
    assert "No module named 'course_utils.no_such_module'" in r.stderr
    assert not (tmp_path / "out" / "grades.csv").exists()


def test_no_sandbox_means_no_grading_unless_asked(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(H.FIXTURE, course / "solutions")
    env_path = os.environ.get("PATH")
    try:
        os.environ["PATH"] = os.path.dirname(H.PYTHON)  # no bwrap on the PATH
        r = H.grade(tmp_path / "subs", tmp_path / "out", course)
    finally:
        os.environ["PATH"] = env_path
    assert r.returncode == 2
    assert "cannot sandbox student code" in r.stderr and "--unsafe-no-sandbox" in r.stderr
