"""Gradescope and PrairieLearn: `python -m autograder gradescope|prairielearn` grade one upload
folder through the class batch and write the platform's results file (autograder/platforms.py).

Four gradings of the fixture assignment (right, wrong, blank, hostile; each also grades the
solution first, as every batch does), the rest without grading: uploads that cannot be graded,
a grader that refuses, the notebook finder, run_autograder's arguments, the zip builder, and
`bash -n` on the Gradescope scripts.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import zipfile

import nbformat
import pytest

import grading_helpers as H

A, NB = "00_fixture", "fixture.ipynb"
GRADESCOPE_DIR = H.REPO / "scripts" / "gradescope"
SECRETS = ("secret_marker", "BEGIN HIDDEN TESTS", "default_rng(1234)", "default_rng(99)", "_x + _x.mean()")

# The documented fields (Gradescope's autograder specification; PrairieLearn's external grading).
GS_TOP = {"score", "execution_time", "output", "output_format", "test_output_format",
          "test_name_format", "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
GS_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output",
           "output_format", "tags", "visibility", "extra_data"}
GS_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
PL_TOP = {"gradable", "score", "message", "output", "images", "tests", "format_errors"}
PL_TEST = {"name", "description", "points", "max_points", "message", "output", "images"}


def check_gradescope(data):
    assert set(data) <= GS_TOP, set(data) - GS_TOP
    assert isinstance(data["score"], (int, float)) and data["score"] >= 0
    assert data["stdout_visibility"] == "hidden"
    assert data["visibility"] in GS_VISIBILITY
    for t in data["tests"]:
        assert set(t) <= GS_TEST, set(t) - GS_TEST
        assert isinstance(t["name"], str) and t["name"]
        assert isinstance(t["output"], str) and t["output"]
        assert 0 <= t["score"] <= t["max_score"]
        assert t["visibility"] in GS_VISIBILITY and t["status"] in ("passed", "failed")
    if data["tests"]:
        assert data["score"] == pytest.approx(sum(t["score"] for t in data["tests"]))
    else:
        assert data["output"]  # a could-not-grade result says why
    json.dumps(data, allow_nan=False)


def check_prairielearn(data):
    assert set(data) <= PL_TOP, set(data) - PL_TOP
    assert isinstance(data["gradable"], bool)
    if not data["gradable"]:
        assert data["message"]
        return
    assert 0.0 <= data["score"] <= 1.0
    for t in data["tests"]:
        assert set(t) <= PL_TEST, set(t) - PL_TEST
        assert isinstance(t["name"], str) and t["name"] and isinstance(t["message"], str)
        assert 0 <= t["points"] <= t["max_points"]
    full = sum(t["max_points"] for t in data["tests"])
    assert data["score"] == pytest.approx(sum(t["points"] for t in data["tests"]) / full)
    json.dumps(data, allow_nan=False)


def run(platform, upload, results, course, *extra, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(H.REPO))
    started = time.monotonic()
    proc = subprocess.run([H.PYTHON, "-m", "autograder", platform, str(upload), str(results),
                           "--course-root", str(course), *extra], cwd=str(H.REPO), env=env,
                          capture_output=True, text=True, timeout=timeout)
    proc.seconds = time.monotonic() - started
    return proc


def upload(root, name, nb, filename=NB, sub=""):
    folder = root / "uploads" / name / sub
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / filename)
    return root / "uploads" / name


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The four gradings, once: {name: (CompletedProcess, results dict)}."""
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")
    root = tmp_path_factory.mktemp("platforms")
    course = H.make_course(root / "course")
    right = H.honest(course, A, NB)
    wrong = H.honest(course, A, NB)  # test_hostile.py's "diagnosed": a named mistake on hidden cases only
    H.cell(wrong, "fixture_double").source = (
        "def double(x):\n    x = np.asarray(x, dtype=float)\n"
        "    return 2 * x if len(x) == 3 else x + x.mean()\n")
    blank = H.release(course, A, NB)
    hostile = H.honest(course, A, NB)  # test_hostile.py's "patch_numpy": wrong answer, patched checks
    H.cell(hostile, "fixture_double").source = (
        "def double(x):\n    return np.asarray(x, dtype=float)\n"
        "np.allclose = lambda *a, **k: True\nnp.testing.assert_allclose = lambda *a, **k: None\n")
    runs = {
        # Gradescope puts the upload in /autograder/submission; a zip upload may nest a folder.
        "right": ("gradescope", upload(root, "right", right), ["--visibility", "visible"]),
        "wrong": ("prairielearn", upload(root, "wrong", wrong), []),
        "blank": ("gradescope", upload(root, "blank", blank, filename="fixture (1).ipynb", sub="hw"), []),
        "hostile": ("gradescope", upload(root, "hostile", hostile), ["--assignment", A]),
    }
    found = {}
    for name, (platform, folder, extra) in runs.items():
        results = root / "results" / name / "results.json"
        proc = run(platform, folder, results, course, *extra)
        assert proc.returncode == 0, proc.stderr[-3000:]
        found[name] = (proc, json.loads(results.read_text()))
        print(f"{platform} {name}: {proc.seconds:.1f} s", file=sys.stderr)
    return found


@pytest.mark.slow
def test_right_scores_full_marks_on_gradescope(graded):
    proc, data = graded["right"]
    check_gradescope(data)
    assert data["score"] == 5 and data["visibility"] == "visible"
    assert [(t["name"], t["score"], t["max_score"], t["output"], t["visibility"]) for t in data["tests"]] == [
        ("fixture_double_tests", 2, 2, "Passed.", "visible"), ("fixture_rows_tests", 3, 3, "Passed.", "visible")]
    # nothing to note but whose numbers were graded (no metadata here: the placeholder)
    assert data["output"].startswith("No student id was given") and "Notes from the grader" not in data["output"]
    assert data["extra_data"]["student"] == "student"
    assert data["extra_data"]["sandboxed"] is True
    assert "00_fixture for student: 5/5" in proc.stderr


@pytest.mark.slow
def test_wrong_gets_the_named_mistake_on_prairielearn_and_no_hidden_test(graded):
    _, data = graded["wrong"]
    check_prairielearn(data)
    assert data["gradable"] is True and data["score"] == pytest.approx(0.6)
    tests = {t["description"]: t for t in data["tests"]}
    assert tests["fixture_double_tests"]["points"] == 0
    assert tests["fixture_double_tests"]["message"] == "You added the mean instead of doubling."
    assert tests["fixture_rows_tests"]["points"] == 3 and tests["fixture_rows_tests"]["max_points"] == 3
    text = json.dumps(data)
    assert not any(s in text for s in SECRETS)


@pytest.mark.slow
def test_blank_scores_zero_as_not_attempted(graded):
    """The release as given (uploaded as a re-upload copy in a subfolder): zero, not attempted,
    tests hidden until the due date by default."""
    _, data = graded["blank"]
    check_gradescope(data)
    assert data["score"] == 0 and data["visibility"] == "after_due_date"
    assert [t["output"] for t in data["tests"]] == ["Not attempted: the answer cell is still the stub as released."] * 2
    assert {t["extra_data"]["outcome"] for t in data["tests"]} == {"not attempted"}
    assert all(t["visibility"] == "after_due_date" for t in data["tests"])


@pytest.mark.slow
def test_hostile_keeps_its_class_verdict(graded):
    """Patching numpy's comparisons gains nothing here either (test_hostile.py: 0 points, tampering named)."""
    _, data = graded["hostile"]
    check_gradescope(data)
    assert data["score"] == 0
    assert "Tampering detected" in data["output"] and "numpy.allclose" in data["output"]
    assert all(t["status"] == "failed" for t in data["tests"])


@pytest.mark.slow
def test_no_result_quotes_a_hidden_test_or_a_grader_path(graded):
    for name, (_, data) in graded.items():
        text = json.dumps(data)
        assert not any(s in text for s in SECRETS), name
        assert "autograder-one-" not in text and "/tmp" not in text, name


def test_an_upload_without_a_course_notebook_is_told_why(tmp_path):
    """No grading happens: the finder refuses first. Gradescope: score 0 and the reason, shown
    at once whatever the visibility; PrairieLearn: not gradable (no attempt used)."""
    course = tmp_path / "course"
    shutil.copytree(H.FIXTURE, course / "solutions")
    folder = tmp_path / "upload"
    folder.mkdir()
    nbformat.write(nbformat.v4.new_notebook(), folder / "my_homework.ipynb")
    (folder / "notes.txt").write_text("hello")
    gs = run("gradescope", folder, tmp_path / "gs.json", course)
    assert gs.returncode == 0, gs.stderr
    data = json.loads((tmp_path / "gs.json").read_text())
    check_gradescope(data)
    assert data["score"] == 0 and data["tests"] == [] and data["visibility"] == "visible"
    assert "No notebook of this course was found" in data["output"] and "fixture.ipynb" in data["output"]
    assert "my_homework.ipynb" in data["output"]
    pl = run("prairielearn", folder, tmp_path / "pl.json", course)
    assert pl.returncode == 0, pl.stderr
    data = json.loads((tmp_path / "pl.json").read_text())
    check_prairielearn(data)
    assert data["gradable"] is False and "No notebook of this course was found" in data["message"]


def test_another_assignments_notebook_is_told_in_one_sentence(tmp_path):
    """06's notebook uploaded to the fixture's assignment (graded under its name, as one notebook
    of another name is) used to reach nbgrader, whose 1,700 characters ended in "see the above
    traceback"; now it is refused before grading, in one sentence the student can act on."""
    course = tmp_path / "course"
    shutil.copytree(H.FIXTURE, course / "solutions")
    folder = tmp_path / "upload"
    folder.mkdir()
    shutil.copyfile(H.REPO / "notebooks" / "06_scaling_dk" / "scaling_dk.ipynb", folder / "scaling_dk.ipynb")
    gs = run("gradescope", folder, tmp_path / "gs.json", course, "--assignment", A)
    assert gs.returncode == 0, gs.stderr
    data = json.loads((tmp_path / "gs.json").read_text())
    check_gradescope(data)
    assert data["score"] == 0 and data["tests"] == [] and data["visibility"] == "visible"
    assert data["output"] == (
        "Your submission could not be graded: scaling_dk.ipynb is the notebook of another assignment "
        "(its exercises, scaling_dk_fit, scaling_dk_fit_tests, scaling_dk_jacobian, ..., are not those of "
        f"{A}): upload {NB}, the notebook of {A}, and submit again.")
    assert "traceback" not in data["output"] and len(data["output"]) < 300

    from autograder.platforms import NotGradable, check_belongs
    names = [NB]
    check_belongs({NB: str(H.FIXTURE / A / NB)}, A, str(H.FIXTURE), names)  # its own: fine
    empty = tmp_path / "empty.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), empty)
    check_belongs({NB: str(empty)}, A, str(H.FIXTURE), names)  # no graded cells: intake's to judge
    (tmp_path / "broken.ipynb").write_text("{not json")
    check_belongs({NB: str(tmp_path / "broken.ipynb")}, A, str(H.FIXTURE), names)
    with pytest.raises(NotGradable, match="another assignment"):
        check_belongs({NB: str(folder / "scaling_dk.ipynb")}, A, str(H.FIXTURE), names)


def test_a_grader_that_refuses_writes_no_gradescope_score(tmp_path):
    """A broken set-up must not record zeros: Gradescope gets no results.json (an autograder
    failure; a stale file is removed) and exit status 2; PrairieLearn a not-gradable result with
    its reason in format_errors and exit status 0 (it reads results.json only after a zero exit,
    else its student sees "Unknown error")."""
    course = tmp_path / "course"
    shutil.copytree(H.FIXTURE, course / "solutions")
    folder = tmp_path / "upload"
    folder.mkdir()
    (tmp_path / "gs.json").write_text('{"score": 100}')
    gs = run("gradescope", folder, tmp_path / "gs.json", course, "--assignment", "99_nope")
    assert gs.returncode == 2 and "unknown assignment 99_nope" in gs.stderr
    assert not (tmp_path / "gs.json").exists()
    pl = run("prairielearn", folder, tmp_path / "pl.json", course, "--assignment", "99_nope")
    assert pl.returncode == 0 and "unknown assignment 99_nope" in pl.stderr
    data = json.loads((tmp_path / "pl.json").read_text())
    check_prairielearn(data)
    assert data["gradable"] is False and "99_nope" not in data["message"]
    assert data["format_errors"] == [data["message"]]


def test_the_notebook_is_found_by_its_released_name(tmp_path):
    from autograder.platforms import NotGradable, find_notebooks
    course = {"01_a": ["alpha.ipynb"], "02_b": ["beta.ipynb"], "03_c": ["shared.ipynb"],
              "04_d": ["shared.ipynb"]}

    def put(*names):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        for n in names:
            (folder / n).parent.mkdir(parents=True, exist_ok=True)
            (folder / n).write_text("{}")
        return folder

    folder = put("__MACOSX/alpha.ipynb", "sub/beta (1).ipynb", ".ipynb_checkpoints/alpha.ipynb")
    assert find_notebooks(folder, course) == ("02_b", {"beta.ipynb": str(folder / "sub/beta (1).ipynb")})
    folder = put("alpha.ipynb", "beta.ipynb")
    with pytest.raises(NotGradable, match="several assignments .*01_a.*02_b"):
        find_notebooks(folder, course)
    assert find_notebooks(folder, course, "02_b")[0] == "02_b"
    folder = put("shared.ipynb")
    with pytest.raises(NotGradable, match="several assignments"):
        find_notebooks(folder, course)
    assert find_notebooks(folder, course, "04_d") == ("04_d", {"shared.ipynb": str(folder / "shared.ipynb")})
    folder = put("homework.ipynb")  # one notebook of another name: graded as the chosen assignment's
    assert find_notebooks(folder, course, "01_a") == ("01_a", {"homework.ipynb": str(folder / "homework.ipynb")})
    with pytest.raises(NotGradable, match="No notebook of this course.*homework.ipynb"):
        find_notebooks(folder, course)
    folder = put("alpha.ipynb", "deeper/alpha.ipynb", "alpha-1.ipynb")  # the exact, shallowest copy
    assert find_notebooks(folder, course)[1] == {"alpha.ipynb": str(folder / "alpha.ipynb")}


def test_run_autograder_passes_the_zip_settings(tmp_path):
    """run_autograder's command line, with a stand-in for the course's Python."""
    source = tmp_path / "source"
    (source / ".venv" / "bin").mkdir(parents=True)
    fake = source / ".venv" / "bin" / "python"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$PWD" "$@" > "$ARGS_OUT"\n')
    fake.chmod(0o755)
    env = dict(os.environ, AUTOGRADER_SOURCE=str(source), ARGS_OUT=str(tmp_path / "args"))

    def args(conf):
        if conf is not None:
            (source / "gradescope.conf").write_text(conf)
        subprocess.run([str(GRADESCOPE_DIR / "run_autograder")], env=env, check=True)
        return (tmp_path / "args").read_text().splitlines()

    assert args(None) == [str(source), "-m", "autograder", "gradescope", "/autograder/submission",
                          "/autograder/results/results.json", "--visibility", "after_due_date",
                          "--container-fallback"]
    assert args("assignment=05_self_attention\nvisibility=visible\nsandbox=required\n")[4:] == [
        "/autograder/submission", "/autograder/results/results.json", "--visibility", "visible",
        "--assignment", "05_self_attention"]
    assert args("visibility=hidden\ntimeout=120\nmemory=1.5\n")[4:] == [
        "/autograder/submission", "/autograder/results/results.json", "--visibility", "hidden",
        "--timeout", "120", "--memory", "1.5", "--container-fallback"]


def test_the_zip_options_reach_gradescope_conf(tmp_path):
    """--timeout and --memory of the zip builder are written to gradescope.conf (which
    run_autograder and setup.sh's cache warming read); left out, the grader's defaults hold."""
    sys.path.insert(0, str(H.REPO))
    from scripts import build_gradescope_zip as B
    assert B.conf_text() == "visibility=after_due_date\nsandbox=fallback\n"
    assert B.conf_text("05_self_attention", "visible", True, 120, 1.5).splitlines() == [
        "assignment=05_self_attention", "visibility=visible", "sandbox=required", "timeout=120", "memory=1.5"]
    with pytest.raises(SystemExit):
        B.main(["--timeout", "0"])
    setup = (GRADESCOPE_DIR / "setup.sh").read_text()
    assert "s/^timeout=//p" in setup and "s/^memory=//p" in setup  # the warm grading uses the same limits


def test_gradescope_scripts_are_valid_bash_and_executable():
    for name in ("setup.sh", "run_autograder"):
        path = GRADESCOPE_DIR / name
        assert os.access(path, os.X_OK), name
        r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    setup = (GRADESCOPE_DIR / "setup.sh").read_text()
    assert "torch==2.13.0" in setup and "download.pytorch.org/whl/cpu" in setup
    assert "bubblewrap" in setup and 'pip" install --no-cache-dir -c "$COURSE/constraints.txt" -e' in setup
    assert "-c constraints.txt -e '.[test]'" in (H.REPO / "Makefile").read_text()


def _pins(lines):
    import re
    pins = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version and ";" not in line, f"not an exact pin: {line}"
            pins[re.sub(r"[-_.]+", "-", name).lower().strip()] = version.strip()
    return pins


def test_the_constraints_pin_the_tested_environment():
    """constraints.txt (make setup and setup.sh install with it) pins every distribution of this
    environment at its installed version, and nothing else, so an image built later cannot drift
    from the tested one silently; pyproject.toml's pins agree with it. pip itself (setup.sh
    upgrades it) and the course are left out; torch's CPU build label (+cpu) is not a version."""
    import re
    import sysconfig
    import tomllib
    from importlib import metadata

    pins = _pins((H.REPO / "constraints.txt").read_text().splitlines())
    where = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    installed = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version.split("+")[0]
                 for d in metadata.distributions(path=where)}
    installed.pop("pip", None)
    installed.pop("attention-course", None)
    assert {n: v for n, v in installed.items() if pins.get(n) != v} == {}, "pinned otherwise or not at all"
    assert sorted(set(pins) - set(installed)) == [], "pinned but not installed"
    project = tomllib.loads((H.REPO / "pyproject.toml").read_text())["project"]
    declared = _pins(project["dependencies"] + [d for ds in project["optional-dependencies"].values() for d in ds])
    assert {n: v for n, v in declared.items() if pins.get(n) != v} == {}
    assert pins["torch"] == "2.13.0"


def test_the_zip_is_built_from_the_commit_not_the_working_tree(tmp_path):
    """A clone with uncommitted edits and local files (gradebook.db, workspace/, dist/): none ship."""
    sys.path.insert(0, str(H.REPO))
    from scripts import build_gradescope_zip as B
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(H.REPO), str(clone)], check=True)
    (clone / "gradebook.db").write_text("grades")
    (clone / "workspace" / A).mkdir(parents=True)
    (clone / "workspace" / A / NB).write_text("{}")
    (clone / "dist").mkdir()
    (clone / "dist" / "old.zip").write_text("old")
    (clone / "autograder" / "platforms.py").write_text("UNCOMMITTED")
    (clone / "course_utils" / "stray.py").write_text("UNTRACKED")
    out, n, _ = B.build(tmp_path / "gs.zip", root=clone, assignment="05_self_attention")
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
        infos = {i.filename: i for i in zf.infolist()}
        assert names[:3] == ["setup.sh", "run_autograder", "gradescope.conf"] and len(names) == n
        for name in ("setup.sh", "run_autograder"):
            assert (infos[name].external_attr >> 16) & 0o111 == 0o111, name
        assert zf.read("gradescope.conf").decode().splitlines() == [
            "assignment=05_self_attention", "visibility=after_due_date", "sandbox=fallback"]
        for needed in ("pyproject.toml", "README.md", "constraints.txt", "autograder/platforms.py", "autograder/__main__.py",
                       "course_utils/__init__.py", "course_utils/reference/__init__.py",
                       "solutions/05_self_attention/self_attention.ipynb",
                       "notebooks/05_self_attention/self_attention.ipynb"):
            assert needed in names, needed
        assert any(n.startswith("course_utils/reference/mistakes/") for n in names)
        assert zf.read("autograder/platforms.py") != b"UNCOMMITTED"
        assert not [n for n in names if n.split("/")[0] in ("workspace", "dist", "tests", ".venv")
                    or n.endswith(("gradebook.db", ".pyc")) or n == "course_utils/stray.py"]
        # one assignment's zip ships that assignment's answers and release, no other's
        assert {tuple(n.split("/")[:2]) for n in names if n.startswith(("solutions/", "notebooks/"))} == {
            ("solutions", "05_self_attention"), ("notebooks", "05_self_attention")}


def test_the_zip_file_list(tmp_path):
    """Which committed files ship, without building: with --assignment only its solutions/ and
    notebooks/ folders; the constraints always (setup.sh installs with them)."""
    sys.path.insert(0, str(H.REPO))
    from scripts import build_gradescope_zip as B
    assert B.shipped("constraints.txt") and B.shipped("solutions/06_scaling_dk/scaling_dk.ipynb")
    assert B.shipped("solutions/05_self_attention/self_attention.ipynb", "05_self_attention")
    assert B.shipped("notebooks/05_self_attention/self_attention.ipynb", "05_self_attention")
    assert not B.shipped("solutions/06_scaling_dk/scaling_dk.ipynb", "05_self_attention")
    assert not B.shipped("notebooks/06_scaling_dk/scaling_dk.ipynb", "05_self_attention")
    assert not B.shipped("solutions/05_self_attention_old/x.ipynb", "05_self_attention")
    assert not B.shipped("solutions/stray.ipynb", "05_self_attention")
    assert B.shipped("course_utils/reference/mistakes/scaling_dk.py", "05_self_attention")
    assert not B.shipped("tests/grading/test_platforms.py") and not B.shipped("scripts/bundle.py")


def test_a_real_notebook_reads_as_in_the_class_report():
    """No grading: a result.json as the worker writes it for 05, turned into what the student
    reads: the release's exercise titles, the catalogue's sentence, not attempted, a message
    quoting a hidden line withheld, a non-grading error on one line."""
    from autograder import platforms, redact, report
    a, nb = "05_self_attention", "self_attention"
    secret = redact.secret_lines(nbformat.read(H.REPO / "solutions" / a / f"{nb}.ipynb", as_version=4),
                                 nbformat.read(H.REPO / "notebooks" / a / f"{nb}.ipynb", as_version=4))
    mistake = report.load_catalogue(a)["self_attention_attention_numpy"].mistakes[0]
    quoted = next(line for line in secret if len(line) > 20)
    cells = [("self_attention_softmax_tests", 2, 2, ""),
             ("self_attention_attention_numpy_tests", 0, 2, f"GradingError: {mistake.message}"),
             ("self_attention_sdpa_torch_tests", 0, 2, "NotImplementedError: "),
             ("self_attention_self_attention_tests", 0, 2, f"NameError: {quoted}"),
             ("self_attention_flops_tests", 0, 1, "ValueError: shapes differ\n  File secret.py, line 3")]
    result = {"cells": [{"notebook": nb, "grade_id": g, "score": s, "max_score": m, "message": msg}
                        for g, s, m, msg in cells]}
    rows = {r["grade_id"]: r for r in platforms._cells(result, a, str(H.REPO / "notebooks"), {nb: secret})}
    assert rows["self_attention_softmax_tests"]["name"] == "Exercise 1 · A stable softmax"
    assert rows["self_attention_softmax_tests"]["message"] == "Passed."
    numpy_row = rows["self_attention_attention_numpy_tests"]
    assert numpy_row["name"] == "Exercise 2 · Attention in NumPy"
    assert numpy_row["message"] == report.clean(mistake.message, 600)
    assert (numpy_row["outcome"], numpy_row["mistake"]) == ("mistake", mistake.name)
    assert rows["self_attention_sdpa_torch_tests"]["outcome"] == "not attempted"
    assert quoted not in json.dumps(rows)
    assert rows["self_attention_self_attention_tests"]["message"].startswith("Failed (the message quoted a hidden test")
    assert rows["self_attention_flops_tests"]["message"] == "ValueError: shapes differ"
    data = platforms.gradescope_results({"status": "graded", "assignment": a, "cells": list(rows.values()),
                                         "problems": [], "sandboxed": True, "seconds": 1.0}, "hidden")
    check_gradescope(data)
    check_prairielearn(platforms.prairielearn_results(
        {"status": "graded", "assignment": a, "cells": list(rows.values()), "problems": [],
         "sandboxed": True, "seconds": 1.0}))


def test_the_submitter_id_comes_from_gradescope_metadata(tmp_path):
    """Think-first numbers depend on the student id: on Gradescope the grader takes it from
    submission_metadata.json beside the upload (the Student ID, else the email); --student wins."""
    from autograder import platforms

    upload = tmp_path / "submission"
    upload.mkdir()
    assert platforms.submitter_id(upload) == platforms.STUDENT  # nothing to go by
    meta = tmp_path / "submission_metadata.json"
    meta.write_text(json.dumps({"users": [{"email": "jdoe@uni.example", "sid": "s1234", "name": "J"}]}))
    assert platforms.submitter_id(upload) == "s1234"
    meta.write_text(json.dumps({"users": [{"email": "jdoe@uni.example", "sid": None}]}))
    assert platforms.submitter_id(upload) == "jdoe@uni.example"
    meta.write_text(json.dumps({"users": [{"email": "; / ..", "sid": ""}]}))
    assert platforms.submitter_id(upload) == platforms.STUDENT  # nothing left of it
    meta.write_text("{broken")
    assert platforms.submitter_id(upload, "given-id") == "given-id"


def test_an_id_intake_refuses_is_made_valid_by_the_documented_rule(tmp_path):
    """ada+cs101@uni.edu used to become the placeholder `student` silently: now ID_RULE makes it
    ada-cs101@uni.edu, and the results say which id the numbers were made for."""
    from autograder import intake, platforms

    assert platforms.valid_id("ada+cs101@uni.edu") == "ada-cs101@uni.edu"
    assert platforms.valid_id(" s1234 ") == "s1234" and platforms.valid_id(20231234) == "20231234"
    assert platforms.valid_id("not an id; rm -rf /") == "not-an-id--rm--rf--"
    assert platforms.valid_id("+plus") == "plus" and platforms.valid_id("x" * 80) == "x" * 64
    assert platforms.valid_id("Zoë Ünal") == "Zo---nal"
    for bad in ("", "  ", "+", "../..", None, True, ["a"]):
        assert platforms.valid_id(bad) is None, bad
    for text in ("ada+cs101@uni.edu", "a b c", "é" * 70, "../../etc", "x;y|z"):
        made = platforms.valid_id(text)
        assert made is None or intake.STUDENT_ID.match(made), text
    assert "'+'" not in platforms.ID_RULE and "'-'" in platforms.ID_RULE

    upload = tmp_path / "submission"
    upload.mkdir()
    meta = tmp_path / "submission_metadata.json"
    meta.write_text(json.dumps({"users": [{"email": "ada+cs101@uni.edu", "sid": None}]}))
    ident = platforms.identify(upload)
    assert ident == {"id": "ada-cs101@uni.edu", "source": "email", "raw": "ada+cs101@uni.edu", "members": []}
    note = platforms.identity_note(ident)
    assert "Graded for student id ada-cs101@uni.edu" in note and "ada+cs101@uni.edu" in note
    assert platforms.ID_RULE in note and "group" not in note
    meta.write_text(json.dumps({"users": [{"email": "ada@uni.edu", "sid": "s1"}, {"email": "bob@uni.edu", "sid": "s2"}]}))
    ident = platforms.identify(upload)
    assert ident["id"] == "s1" and ident["members"] == ["ada@uni.edu", "bob@uni.edu"]
    note = platforms.identity_note(ident)
    assert note.startswith("Graded for student id s1 (your Gradescope Student ID)")
    assert "group submission of 2 students (ada@uni.edu, bob@uni.edu)" in note and "first member, ada@uni.edu" in note
    meta.unlink()
    assert "example's numbers" in platforms.identity_note(platforms.identify(upload))

    graded = {"status": "graded", "assignment": A, "problems": ["Tampering detected."], "sandboxed": True,
              "seconds": 1.0, "student": "s1", "identity": note,
              "cells": [{"name": "x", "grade_id": "g", "notebook": "n", "score": 1, "max_score": 1,
                         "outcome": "passed", "message": "Passed."}]}
    data = platforms.gradescope_results(graded)
    check_gradescope(data)
    assert data["output"] == note + "\n\nNotes from the grader: Tampering detected."
    assert data["extra_data"]["student"] == "s1"
    data = platforms.prairielearn_results(graded)
    check_prairielearn(data)
    assert data["output"] == note


def test_test_names_are_plain_text():
    """Gradescope and PrairieLearn show a test's name verbatim: no LaTeX, code or bold marks."""
    from autograder import platforms

    assert platforms.plain_name("Exercise 6 · Think before you run: where the $n^2$ term takes over") == \
        "Exercise 6 · Think before you run: where the n^2 term takes over"
    assert platforms.plain_name(r"Why divide by $\sqrt{d_k}$?") == "Why divide by sqrt(d_k)?"
    assert platforms.plain_name(r"$\operatorname{var}(q \cdot k) = d_k$") == "var(q · k) = d_k"
    assert platforms.plain_name(r"Training without the $T \times T$ matrix") == "Training without the T x T matrix"
    assert platforms.plain_name(r"$$\frac{1}{\sqrt{d}}$$ and **bold**") == "(1)/(sqrt(d)) and bold"
    assert platforms.plain_name("Exercise 1: `rnn_step`") == "Exercise 1: rnn_step"
    result = {"cells": [{"notebook": "self_attention", "grade_id": "self_attention_crossover_tests",
                         "score": 1, "max_score": 1, "message": ""}]}
    row, = platforms._cells(result, "05_self_attention", str(H.REPO / "notebooks"), {})
    assert row["name"] == "Exercise 6 · Think before you run: where the n^2 term takes over"


def test_an_upload_without_an_id_answers_the_examples_numbers(tmp_path, monkeypatch):
    """No id anywhere (PrairieLearn without --student): the notebook showed the example's numbers
    (questions.student_id() is None there), so the kernel and the judge use them too, not those
    of the folder's placeholder name; an upload with an id answers its own."""
    from autograder import batch, platforms, worker
    seen = []

    class Capture(platforms.OneSubmission):
        def run(self):
            seen.append(dict(self.o.numbers_for))
            return {}

    monkeypatch.setattr(platforms, "OneSubmission", Capture)
    for given in (None, "ada"):
        upload = tmp_path / f"upload-{given}"
        upload.mkdir()
        nb = next((H.REPO / "solutions").glob("02_*/*.ipynb"))
        shutil.copyfile(nb, upload / nb.name)
        with pytest.raises(batch.GradingRefused):  # Capture graded nothing: the grader refuses
            platforms.grade_one(str(upload), course_root=str(H.REPO), student=given,
                                unsafe_no_sandbox=True, work=str(tmp_path / f"work-{given}"))
    assert seen == [{platforms.STUDENT: ""}, {}]
    task = {"student": platforms.STUDENT, "numbers_for": "", "kernel_python": "/usr/bin/python3"}
    assert worker._kernel_env(task, "/tmp/h", None)["COURSE_STUDENT_ID"] == ""
    assert worker._kernel_env({**task, "numbers_for": "ada"}, "/tmp/h", None)["COURSE_STUDENT_ID"] == "ada"
    from course_utils.grading import questions
    grade_id = next(iter(questions.VARIANTS))
    assert questions.variant_index(grade_id, "") == 0  # what the judge and the kernel do with ""
