"""The student wheel (scripts/student_wheel.py) and its command `attention-course init`
(attention_course/cli.py): no answers in it, and a fresh environment with only the wheel and its
pinned dependencies runs every released notebook, answered, to its end with every visible test
passing.

The fresh environment is built once for the module (tests/student_wheel_env.py); its cost is
printed (`-s`) and recorded in the test report's durations.
"""
import json
import os
import re
import time

import nbformat
import pytest

from attention_course import cli
from scripts import bundle, student_wheel
from tests.browser.lab import fill_answers
from tests.notebook_cells import ROOT, SHORT_RUN_ENV, cell_kind
from tests.student_wheel_env import shared_wheel_and_venv

RELEASED = sorted(p.relative_to(ROOT / "notebooks").as_posix() for p in (ROOT / "notebooks").glob("*/*.ipynb"))


# --- attention-course init, run from the clone (fast) ---------------------------------------

def test_init_copies_the_notebooks_remembers_the_student_and_installs_validate(tmp_path):
    from scripts import setup_lab

    lines = []
    folder = cli.init(tmp_path / "course", student=" jdoe ", prefix=tmp_path / "env", out=lines.append)
    assert sorted(p.relative_to(folder).as_posix() for p in folder.glob("*/*.ipynb")) == RELEASED
    assert (folder / "student_id.txt").read_text().strip() == "jdoe"
    hook = (tmp_path / "env" / "etc" / "jupyter" / "nbgrader_config.py").read_text()
    assert setup_lab.VALIDATE_HOOK.strip() in hook
    settings = json.loads((tmp_path / "env" / "share" / "jupyter" / "lab" / "settings" / "overrides.json").read_text())
    assert settings["@jupyter-widgets/jupyterlab-manager:plugin"]["saveState"] is True
    said = "\n".join(lines)
    assert f"jupyter lab {folder}" in said and f"jupyter notebook {folder}" in said and "jdoe" in said
    # From a clone the environment is the instructor's: its lab keeps nbgrader's tools.
    assert not (tmp_path / "env" / "etc" / "jupyter" / "labconfig").exists()
    assert not (tmp_path / "env" / "etc" / "jupyter" / "jupyter_server_config.json").exists()
    assert "instructor tools" not in said


def test_a_students_lab_leaves_out_the_instructor_tools_and_keeps_other_settings(tmp_path):
    from attention_course import jupyter_setup

    etc = tmp_path / "etc" / "jupyter"
    (etc / "labconfig").mkdir(parents=True)
    (etc / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"someone-else:plugin": True}, "other": 1}))
    (etc / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"ip": "0.0.0.0", "jpserver_extensions": {"other_extension": True}}}))
    for _ in range(2):  # twice: the same result
        jupyter_setup.students_lab_only(tmp_path, ROOT / "scripts" / "student_lab")
    page = json.loads((etc / "labconfig" / "page_config.json").read_text())
    assert page["other"] == 1 and page["disabledExtensions"]["someone-else:plugin"] is True
    assert all(page["disabledExtensions"][name] is True for name in (
        "@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:menu"))
    server = json.loads((etc / "jupyter_server_config.json").read_text())["ServerApp"]
    assert server["ip"] == "0.0.0.0"
    assert server["jpserver_extensions"] == {
        "other_extension": True, "nbgrader.server_extensions.formgrader": False,
        "nbgrader.server_extensions.assignment_list": False, "nbgrader.server_extensions.course_list": False,
        "nbgrader.server_extensions.validate_assignment": True}


def test_init_never_overwrites_a_notebook_the_student_started(tmp_path):
    folder = cli.init(tmp_path / "course", prefix=tmp_path / "env", out=lambda line: None)
    mine = folder / RELEASED[0]
    mine.write_text('{"my answers": 1}')
    os.utime(mine, (1, 1))  # older than the release: the release's copy is named as newer
    (folder / RELEASED[1]).unlink()  # a notebook the student deleted comes back
    lines = []
    cli.init(folder, prefix=tmp_path / "env", out=lines.append)
    assert mine.read_text() == '{"my answers": 1}'
    assert (folder / RELEASED[1]).read_bytes() == (ROOT / "notebooks" / RELEASED[1]).read_bytes()
    assert any(RELEASED[0] in line and "yours is kept" in line for line in lines), lines
    assert "No student id yet" in "\n".join(lines)


@pytest.mark.parametrize("argv, said", [
    ([], "usage: attention-course"),
    (["init"], "the following arguments are required: DIR"),
    (["init", "{file}"], "is a file, not a folder"),
    (["init", "{folder}", "--student", "x" * 101], "a student id is 1 to 100 printable characters"),
    (["init", "{folder}", "--student", "tab\there"], "a student id is 1 to 100 printable characters"),
    (["start", "{folder}"], "invalid choice: 'start'"),
])
def test_bad_input_gets_one_clear_sentence_and_changes_nothing(tmp_path, capsys, argv, said):
    (tmp_path / "notes.txt").write_text("not a folder")
    argv = [a.format(file=tmp_path / "notes.txt", folder=tmp_path / "course") for a in argv]
    try:
        status = cli.main(argv)
    except SystemExit as stop:  # argparse's own errors
        status = stop.code
    out, err = capsys.readouterr()
    assert status == 2
    assert said in out + err and "Traceback" not in out + err, out + err
    assert not (tmp_path / "course").exists(), "a refused command must not have copied anything"


def test_help_names_the_command_and_its_options(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["init", "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert "DIR" in text and "--student ID" in text and "kept" in text


# --- the wheel's contents ------------------------------------------------------------------

@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return shared_wheel_and_venv(tmp_path_factory)[0]


@pytest.mark.slow
def test_the_wheel_holds_the_library_the_release_and_the_command(wheel):
    files = student_wheel.read(wheel)
    assert wheel.name == "attention_course-0.1.0-py3-none-any.whl"
    assert sorted(n[len("attention_course/notebooks/"):] for n in files
                  if n.startswith("attention_course/notebooks/")) == RELEASED
    for needed in ("course_utils/grading/__init__.py", "course_utils/widgets/__init__.py", "attention_course/cli.py",
                   "attention_course/workspace.py", "attention_course/student_lab/nbgrader_config.py",
                   "attention_course/student_lab/overrides.json"):
        assert needed in files, needed
    dist_info = "attention_course-0.1.0.dist-info"
    metadata = files[f"{dist_info}/METADATA"].decode()
    import tomllib
    for pin in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        assert f"Requires-Dist: {pin}\n" in metadata, pin
    assert "Requires-Dist: torch==2.13.0\n" in metadata and "Requires-Dist: notebook==7" in metadata
    assert "attention-course = attention_course.cli:main" in files[f"{dist_info}/entry_points.txt"].decode()
    recorded = {line.split(",")[0] for line in files[f"{dist_info}/RECORD"].decode().splitlines()}
    assert recorded == set(files)


@pytest.mark.slow
def test_the_wheel_holds_no_answer(wheel):
    files = student_wheel.read(wheel)
    assert bundle.wheel_leaks(wheel) == {}
    assert not [n for n in files if n.startswith(("course_utils/reference", "solutions/", "tests/", "autograder/"))]
    for name, data in files.items():
        if name.endswith(".ipynb"):
            assert b"BEGIN HIDDEN TESTS" not in data and b"BEGIN SOLUTION" not in data, name


@pytest.mark.parametrize("planted_name, planted", [
    ("course_utils/reference/__init__.py", b'"""nothing secret in the text, but the path is the answer key"""\n'),
    ("attention_course/notebooks/05_self_attention/self_attention.ipynb",
     b'{"cells": [{"source": ["### BEGIN HIDDEN TESTS\\n", "assert True\\n"]}]}'),
    ("course_utils/grading/helper.py", b"from course_utils.reference import scaled_dot_product_attention\n"),
])
def test_the_wheel_leak_scan_fails_on_a_planted_answer(tmp_path, planted_name, planted):
    clean = {"course_utils/__init__.py": b"", "attention_course/cli.py": b"print('init')\n"}
    assert bundle.wheel_leaks(student_wheel.write(tmp_path / "clean.whl", clean)) == {}
    leaky = student_wheel.write(tmp_path / "leaky.whl", {**clean, planted_name: planted})
    assert list(bundle.wheel_leaks(leaky)) == [planted_name]


def test_make_bundle_refuses_a_leaking_wheel_and_keeps_none(tmp_path, monkeypatch):
    """bundle.build scans the wheel it wrote and deletes it when an answer got in (here planted
    past the selection); the same course without the plant gives a wheel."""
    import contextlib
    import shutil

    course = tmp_path / "course"
    for name in ("pyproject.toml", "course_utils/__init__.py", "scripts/student/README.md"):
        (course / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, course / name)
    shutil.copytree(ROOT / "scripts" / "student_lab", course / "scripts" / "student_lab")
    release = {"notebooks/05_topic/topic.ipynb": b'{"cells": []}'}
    monkeypatch.setattr(bundle, "committed_course", contextlib.contextmanager(lambda root, commit: (yield course, release)))
    monkeypatch.setattr(bundle, "uncommitted", lambda root: [])
    dist = tmp_path / "dist"
    bundle.build(dist / "student-bundle.zip")
    assert (dist / student_wheel.wheel_name(course)).exists()

    selection = student_wheel.files
    monkeypatch.setattr(student_wheel, "files", lambda c, r: {
        **selection(c, r), "course_utils/reference/attention.py": b"def answer(): ...\n"})
    (dist / student_wheel.wheel_name(course)).unlink()
    with pytest.raises(SystemExit, match="refusing to build the student wheel.*course_utils/reference/attention.py"):
        bundle.build(dist / "student-bundle.zip")
    assert not (dist / student_wheel.wheel_name(course)).exists()


# --- a fresh environment with only the wheel ----------------------------------------------

# The first cell of every notebook run from the fresh environment: the kernel is that
# environment's Python, and its course_utils the wheel's, without the answer key.
WHERE_FROM = """\
import importlib.util, os, sys
import course_utils
prefix = os.path.realpath({prefix!r})
assert os.path.realpath(sys.prefix) == prefix, sys.prefix
assert os.path.realpath(course_utils.__file__).startswith(prefix), course_utils.__file__
assert importlib.util.find_spec("course_utils.reference") is None, "the answer key reached the wheel"
"""


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory):
    """(the environment, the folder `attention-course init` made), built once for the module."""
    work = tmp_path_factory.mktemp("fresh")
    _, venv, seconds = shared_wheel_and_venv(tmp_path_factory)
    size = sum(p.stat().st_size for p in venv.folder.rglob("*") if p.is_file()) // 2**20
    print(f"\nfresh venv with the student wheel: {seconds:.0f} s to build, {size} MiB")
    started = time.monotonic()
    said = venv.run("attention-course", "init", str(work / "course"), "--student", "jdoe", cwd=work).stdout
    print(f"attention-course init: {time.monotonic() - started:.1f} s")
    return venv, work / "course", said


def execute(venv, path, **env):
    """nbclient from the fresh environment, as `jupyter execute --inplace` (tests/run_notebook.py,
    which keeps nbclient from waiting forever on a widget cell), saving the run into the file:
    it stops at the first error of a cell not tagged raises-exception."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(WHERE_FROM.format(prefix=str(venv.folder))))
    nbformat.write(nb, path)
    result = venv.run("python", str(ROOT / "tests" / "run_notebook.py"), str(path), "600", cwd=path.parent,
                      check=False, env={**SHORT_RUN_ENV, **env})
    return result, nbformat.read(path, as_version=4)


@pytest.mark.slow
def test_init_from_the_wheel_sets_up_the_folder_and_validate(fresh):
    venv, folder, said = fresh
    assert sorted(p.relative_to(folder).as_posix() for p in folder.glob("*/*.ipynb")) == RELEASED
    assert (folder / "student_id.txt").read_text().strip() == "jdoe"
    assert f"jupyter lab {folder}" in said and f"jupyter notebook {folder}" in said
    hook = (venv.folder / "etc" / "jupyter" / "nbgrader_config.py").read_text()
    assert "_attention_course_validate()" in hook
    found = venv.run("python", "-c", "import importlib.util as u; print(u.find_spec('course_utils.reference'))",
                     cwd=folder).stdout.strip()
    assert found == "None"
    assert "torch==2.13.0" in venv.run("python", "-m", "pip", "freeze", cwd=folder).stdout.replace("+cpu", "")
    assert venv.run("attention-course", "--help", cwd=folder).stdout.startswith("usage: attention-course")
    # The student's lab has Validate and none of the instructor's tools, whatever pip enabled.
    assert "instructor tools" in said
    listed = venv.run("jupyter", "server", "extension", "list", cwd=folder)
    states = dict(re.findall(r"(nbgrader\.server_extensions\.\w+) \S*?(enabled|disabled)",
                             re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)))
    assert states == {"nbgrader.server_extensions.formgrader": "disabled",
                      "nbgrader.server_extensions.validate_assignment": "enabled",
                      "nbgrader.server_extensions.assignment_list": "disabled",
                      "nbgrader.server_extensions.course_list": "disabled"}, listed.stdout + listed.stderr


@pytest.mark.slow
@pytest.mark.parametrize("path", RELEASED)
def test_every_answered_notebook_runs_to_its_end_from_the_wheel(fresh, path):
    """A diligent student's notebook (every answer cell filled in) in the environment the wheel
    alone builds, without the answer key: every cell runs, nothing raises, every visible test
    passes and the last cell says so. The untouched release's Run All (only the unanswered
    exercises fail, each in one sentence) is tests/browser/test_first_hour.py's, over the student
    bundle: one run of each notebook per way a student gets the course, not two."""
    venv, folder, _ = fresh
    answered = folder / "answered" / path
    answered.parent.mkdir(parents=True)
    fill_answers(ROOT / "notebooks" / path, ROOT / "solutions" / path, answered)
    result, nb = execute(venv, answered)
    assert result.returncode == 0, result.stderr[-3000:]
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "the run stopped before the last cell"
    errors = [f"{o.ename}: {o.evalue}" for c in code for o in c.outputs if o.output_type == "error"]
    assert errors == []
    widgets = [c for c in code if any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                                      for o in c.outputs)]
    assert widgets, "no cell displayed a widget"
    tests = [c for c in code if cell_kind(c) == "test"]
    summary = "".join(o.get("data", {}).get("text/plain", "") for o in code[-1].outputs)
    assert f"{len(tests)} of {len(tests)} exercises pass" in summary, summary
