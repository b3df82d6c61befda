"""The student's own copies of the notebooks, seeded from the release and never overwritten.

Why: the release is generated (`make release` rewrites notebooks/, a new wheel brings a new copy),
so work done in it can be lost, or worse, shipped to other students. A student works in a folder
of their own instead (`workspace/` for `make lab`, any folder for `attention-course init`), into
which every released notebook they do not have yet is copied. One they have is never overwritten:
a notebook released later appears on the next run; a changed one is named, and theirs is kept.
"""
import pathlib
import shutil


def seed(release, workspace):
    """Copy what is missing; returns (copied, kept_but_changed_in_release) relative paths."""
    release, workspace = pathlib.Path(release), pathlib.Path(workspace)
    copied, changed = [], []
    for source in sorted(p for p in release.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts
                         and "__pycache__" not in p.parts):
        relative = source.relative_to(release)
        target = workspace / relative
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            copied.append(relative)
        elif source.stat().st_mtime > target.stat().st_mtime and source.read_bytes() != target.read_bytes():
            changed.append(relative)
    return copied, changed


def remember_student(workspace, student):
    """Write <workspace>/student_id.txt: the notebooks below it read it for the student's own
    think-first numbers (course_utils/grading/questions.py). An empty id changes nothing; an
    invalid one raises ValueError with the sentence to show."""
    student = (student or "").strip()
    if not student:
        return None
    from course_utils.grading import questions
    workspace = pathlib.Path(workspace)
    created = not workspace.exists()
    workspace.mkdir(parents=True, exist_ok=True)
    try:
        return questions.set_student_id(student, folder=workspace)
    except ValueError:
        if created:  # a refused id leaves no trace
            workspace.rmdir()
        raise
