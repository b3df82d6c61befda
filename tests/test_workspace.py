"""Students work in workspace/, seeded from the release and never overwritten (scripts/workspace.py)."""
import os
import sys
import pathlib
import subprocess

from scripts import workspace

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _release(tmp_path):
    release = tmp_path / "notebooks"
    (release / "05_topic").mkdir(parents=True)
    (release / "05_topic" / "topic.ipynb").write_text('{"release": 1}')
    return release


def test_first_use_copies_the_release(tmp_path):
    release = _release(tmp_path)
    copied, changed = workspace.seed(release, tmp_path / "workspace")
    assert copied == [pathlib.Path("05_topic/topic.ipynb")] and changed == []
    assert (tmp_path / "workspace" / "05_topic" / "topic.ipynb").read_text() == '{"release": 1}'


def test_a_students_work_is_never_overwritten_and_a_newer_release_is_named(tmp_path):
    release = _release(tmp_path)
    work = tmp_path / "workspace"
    workspace.seed(release, work)
    mine = work / "05_topic" / "topic.ipynb"
    mine.write_text('{"my answers": 1}')
    os.utime(mine, (1, 1))  # the release below is newer than the student's copy
    (release / "05_topic" / "topic.ipynb").write_text('{"release": 2}')
    (release / "06_next").mkdir()
    (release / "06_next" / "next.ipynb").write_text('{"new": 1}')
    copied, changed = workspace.seed(release, work)
    assert mine.read_text() == '{"my answers": 1}'
    assert copied == [pathlib.Path("06_next/next.ipynb")]
    assert changed == [pathlib.Path("05_topic/topic.ipynb")]


def test_workspace_is_ignored_by_git():
    result = subprocess.run(["git", "check-ignore", "-q", "workspace/05_self_attention/self_attention.ipynb"],
                            cwd=ROOT)
    assert result.returncode == 0, "workspace/ must be in .gitignore"


def test_make_lab_opens_the_workspace_with_the_student_configuration():
    makefile = (ROOT / "Makefile").read_text()
    lab = makefile.split("\nlab:", 1)[1].split("\n\n", 1)[0]
    assert "scripts/workspace.py" in lab and "jupyter lab workspace/" in lab
    assert "JUPYTER_CONFIG_PATH=$(CURDIR)/scripts/student_lab" in lab


def test_make_lab_remembers_the_student_id_for_every_notebook(tmp_path, monkeypatch):
    """`make lab STUDENT=jdoe` writes workspace/student_id.txt; a notebook in workspace/NN_topic/
    then gets jdoe's think-first numbers (course_utils/grading/questions.py)."""
    from course_utils.grading import questions

    release = _release(tmp_path)
    folder = tmp_path / "workspace"
    for variable in ("COURSE_STUDENT_ID", "JUPYTERHUB_USER"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("STUDENT", " jdoe ")
    workspace.main(["workspace.py", str(release), str(folder)])
    assert (folder / "student_id.txt").read_text().strip() == "jdoe"
    notebook_folder = next(p.parent for p in folder.rglob("*.ipynb"))
    monkeypatch.chdir(notebook_folder)
    assert questions.student_id() == "jdoe"
    monkeypatch.setenv("STUDENT", "")
    workspace.main(["workspace.py", str(release), str(folder)])  # no STUDENT: the id stays
    assert questions.student_id() == "jdoe"


def test_setup_lab_puts_the_validate_hook_where_nbgrader_reads_it_and_keeps_other_settings(tmp_path):
    """scripts/setup_lab.py writes the hook as a marked block into <prefix>/etc/jupyter/nbgrader_config.py
    (a hub's exchange settings in that file stay); running it again changes nothing."""
    from scripts import setup_lab

    target = tmp_path / "etc" / "jupyter" / "nbgrader_config.py"
    target.parent.mkdir(parents=True)
    target.write_text('c = get_config()\nc.Exchange.root = "/srv/nbgrader/exchange"\n')
    assert setup_lab.nbgrader_config(tmp_path) == target
    first = target.read_text()
    assert first.startswith('c = get_config()\nc.Exchange.root = "/srv/nbgrader/exchange"\n')
    assert first.count(setup_lab.BEGIN) == 1 and setup_lab.VALIDATE_HOOK.strip() in first
    setup_lab.nbgrader_config(tmp_path)
    assert target.read_text() == first
    compile(first, str(target), "exec")


def test_the_environment_has_the_validate_hook():
    """`make setup` / `make lab` installed the current hook into this environment (a stale block
    means scripts/setup_lab.py was not run after the hook changed)."""
    from scripts import setup_lab

    installed = pathlib.Path(sys.prefix) / "etc" / "jupyter" / "nbgrader_config.py"
    assert installed.exists(), "run make setup (scripts/setup_lab.py)"
    assert setup_lab.VALIDATE_HOOK.strip() in installed.read_text(), "stale hook: run make setup"


def test_the_hook_reports_in_one_line_per_exercise_and_defers_the_course_import(tmp_path):
    """Loaded as nbgrader loads configuration, the hook imports no course code (PyTorch) until a
    notebook is validated, and then Validator speaks in the course's one-line sentences."""
    script = (
        "import sys, runpy\n"
        "from traitlets.config import get_config\n"
        f"runpy.run_path({str(ROOT / 'scripts' / 'student_lab' / 'nbgrader_config.py')!r}, "
        "init_globals={'get_config': get_config})\n"
        "assert 'torch' not in sys.modules and 'course_utils.validation' not in sys.modules\n"
        "from nbgrader.validator import Validator\n"
        "assert Validator._course_deferred and not getattr(Validator, '_course_patched', False)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
