"""The student's own copies of the notebooks: `workspace/`, seeded from the release on first use.

Why: `notebooks/` is generated (`make release` rewrites it, `make bundle` regenerates it), so work
done there can be overwritten, or worse, shipped to other students. `make lab` opens
`workspace/` instead. This script copies into it every released notebook the student does not
have yet and never overwrites one they have: a new notebook the instructor releases later
appears on the next `make lab`; a changed one is named, and the student's copy is kept.
`workspace/` is ignored by git. The copying itself lives in attention_course/workspace.py, which
the pip-installed course's `attention-course init` uses too.

usage: [STUDENT=<id>] python scripts/workspace.py [RELEASE_DIR] [WORKSPACE_DIR]
"""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the course's packages sit beside scripts/

from attention_course.workspace import remember_student, seed  # noqa: E402  (shared with `attention-course init`)


def main(argv):
    release = pathlib.Path(argv[1]) if len(argv) > 1 else ROOT / "notebooks"
    workspace = pathlib.Path(argv[2]) if len(argv) > 2 else ROOT / "workspace"
    copied, changed = seed(release, workspace)
    print(f"Your work lives in {workspace}/ (yours alone: make release and make bundle never touch it).")
    if remember_student(workspace, os.environ.get("STUDENT")):
        print(f"  student id: {os.environ['STUDENT'].strip()} (in {workspace}/student_id.txt; your think-first "
              "numbers come from it)")
    elif not (workspace / "student_id.txt").exists():
        print("  no student id yet: run `make lab STUDENT=<your id>` once (your login or student number, as "
              "your instructor knows you) to get your own think-first numbers")
    if copied:
        print(f"  copied from the release: {len(copied)} file(s), e.g. {copied[0]}")
    for relative in changed:
        print(f"  {relative}: the release has a newer version; yours is kept. To start that notebook over, "
              f"rename your copy and run make lab again.")


if __name__ == "__main__":
    main(sys.argv)
