"""A throwaway copy of the course for tests that run nbgrader's real CLI on it."""
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
NBGRADER = [sys.executable, "-m", "nbgrader"]


def assignments():
    return sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*") if p.is_dir())


def make_course_copy(target):
    """Copy what nbgrader needs (solutions/ and the configuration) into `target`."""
    target = pathlib.Path(target)
    shutil.copytree(ROOT / "solutions", target / "solutions",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    (target / "autograder").mkdir()
    shutil.copy(ROOT / "autograder" / "nbgrader_config.py", target / "autograder")
    shutil.copy(ROOT / "nbgrader_config.py", target)
    return target


def nbgrader(course, *args):
    # nbgrader runs alembic as a command: the environment's bin folder must be on the PATH.
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    result = subprocess.run(
        NBGRADER + list(args) + ["--log-level=WARN"], cwd=course, env=env,
        capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result
