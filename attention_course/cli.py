"""`attention-course`: the command a student gets from `pip install attention_course-*.whl`.

Why a command: a student who installed the course into the Jupyter they already have (VS Code,
Notebook 7, a university hub, a hosted notebook service) has no clone and no Makefile. `init`
does for them what `make lab` does in a clone: copies the released notebooks into a folder of
their own without overwriting one they started (workspace.py), remembers their student id
there, and installs nbgrader's one-line Validate report into this environment's Jupyter
configuration (jupyter_setup.py); from the wheel, it also leaves nbgrader's instructor tools out
of that environment's lab, as `make lab` does. Then any Jupyter started on that folder is the
course's lab.

The notebooks and the lab's settings are package data of the wheel (attention_course/notebooks/,
attention_course/student_lab/, written by scripts/student_wheel.py). Run from a clone, where they
are not packaged, the command reads the clone's notebooks/ and scripts/student_lab/ instead.
"""
import argparse
import pathlib
import sys

from attention_course import jupyter_setup, workspace

PACKAGE = pathlib.Path(__file__).resolve().parent


class UsageError(Exception):
    """Bad input from the command line: said in one sentence, without a traceback."""


def from_wheel():
    """True when this is the installed student wheel (its package data holds the notebooks)."""
    return (PACKAGE / "notebooks").is_dir()


def course_files():
    """(released notebooks, student lab settings): the wheel's package data, else the clone's."""
    if from_wheel():
        return PACKAGE / "notebooks", PACKAGE / "student_lab"
    clone = PACKAGE.parent
    return clone / "notebooks", clone / "scripts" / "student_lab"


def init(folder, student=None, prefix=sys.prefix, out=print):
    folder = pathlib.Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is a file, not a folder: give the folder to put the notebooks in")
    release, student_lab = course_files()
    if not any(release.glob("*/*.ipynb")):
        raise UsageError(f"no notebooks found in {release}: reinstall the course's wheel")
    try:
        saved_id = workspace.remember_student(folder, student)  # first: a refused id copies nothing
        copied, changed = workspace.seed(release, folder)
    except ValueError as error:  # an id that cannot be one: questions.set_student_id says why
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(f"cannot write the notebooks into {folder}: {error.strerror or error}") from None
    _, hook = jupyter_setup.install(prefix, student_lab)
    student_only = from_wheel()  # a clone's environment is the instructor's: its lab keeps nbgrader's tools
    if student_only:
        jupyter_setup.students_lab_only(prefix, student_lab)

    notebooks = sorted(p.relative_to(folder) for p in folder.glob("[0-9][0-9]_*/*.ipynb"))
    out(f"Your notebooks are in {folder.resolve()}/ ({len(notebooks)} notebooks; {len(copied)} file(s) copied now).")
    for relative in changed:
        out(f"  {relative}: this version of the course has a newer copy; yours is kept. To start that notebook "
            "over, rename your copy and run this command again.")
    if saved_id:
        out(f"  Student id: {saved_id.read_text().strip()} (saved in {saved_id}; your think-first numbers come from it).")
    elif not (folder / "student_id.txt").exists():
        out("  No student id yet: run this command again with --student <your id> (your login or student "
            "number, as your instructor knows you) to get think-first numbers of your own.")
    out(f"  Validate's one-line report is set up in {hook}.")
    if student_only:
        out("  nbgrader's instructor tools (Formgrader, Create Assignment) are left out of this environment's lab.")
    out("Open them with one of:")
    out(f"  jupyter lab {folder}")
    out(f"  jupyter notebook {folder}")
    out("or open the folder in VS Code and pick this Python environment as the notebook kernel.")
    return folder


def parser():
    commands = argparse.ArgumentParser(
        prog="attention-course",
        description="Attention, from RNNs to Vision Transformers: set up the course's notebooks in a folder of yours.")
    sub = commands.add_subparsers(dest="command", metavar="COMMAND")
    init_command = sub.add_parser(
        "init", help="copy the course's notebooks into DIR (never overwriting one you started) and set up Validate",
        description="Copy the course's notebooks into DIR; a notebook you already have there is kept as it is. "
                    "Also sets up nbgrader's Validate for this Python environment.")
    init_command.add_argument("dir", metavar="DIR", help="the folder to work in (created if missing)")
    init_command.add_argument("--student", metavar="ID",
                              help="your student id (login or student number, as your instructor knows you)")
    return commands


def main(argv=None):
    commands = parser()
    arguments = commands.parse_args(argv)
    if arguments.command is None:
        commands.print_help()
        return 2
    try:
        init(arguments.dir, arguments.student)
    except UsageError as error:
        print(f"attention-course {arguments.command}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
