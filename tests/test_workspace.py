"""Students work in workspace/, seeded from the release and never overwritten (scripts/workspace.py)."""
import os
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
