"""A fresh Python environment with only the student wheel and its pinned dependencies in it:
what a student gets from `pip install attention_course-*.whl` (shared by tests/test_student_wheel.py
and tests/browser/test_student_wheel_lab.py).

pip installs with `-c constraints.txt`, as `make setup` does, so every distribution is the tested
version (torch exactly 2.13.0), from this machine's pip configuration and cache: no network.
Nothing of the clone is reachable from it: no editable install, no PYTHONPATH, and every command
runs with its working directory outside the clone.

`shared_wheel_and_venv` builds the wheel and the environment once per test session, whichever of
the two modules asks first, on whichever xdist worker: the bundle (a fresh nbgrader release of
every assignment) and the venv cost about 80 CPU-seconds, once instead of twice. The modules only
read the environment; each `attention-course init`s its own folder.
"""
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def build_wheel(directory):
    """`make bundle`'s wheel of HEAD, written into `directory`."""
    from scripts import bundle, student_wheel

    bundle.build(pathlib.Path(directory) / "student-bundle.zip", root=ROOT)
    return pathlib.Path(directory) / student_wheel.wheel_name(ROOT)


def clean_env(**extra):
    """This process's environment (temporary HOME and Jupyter folders, set by conftest.py)
    without anything that would let the clone's code in."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, **extra}


class FreshVenv:
    def __init__(self, folder):
        self.folder = pathlib.Path(folder)
        self.bin = self.folder / "bin"
        self.python = self.bin / "python"

    def run(self, *command, cwd, check=True, timeout=900, env=None):
        """Run a command of this environment (bin/ first on the PATH)."""
        env = clean_env(**(env or {}))
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        result = subprocess.run([str(self.bin / command[0]), *command[1:]], cwd=cwd, env=env,
                                capture_output=True, text=True, timeout=timeout)
        if check:
            assert result.returncode == 0, f"{' '.join(map(str, command))} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result


def make_venv(folder, wheel):
    """A new venv holding the wheel and its pinned dependencies; (FreshVenv, seconds it took)."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, env=clean_env())
    venv = FreshVenv(folder)
    # --no-compile: pip would byte-compile all of torch (half the time); a kernel compiles what it imports.
    venv.run("python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
             "-c", str(ROOT / "constraints.txt"), str(wheel), cwd=folder, timeout=1800)
    return venv, time.monotonic() - started


def shared_wheel_and_venv(tmp_path_factory):
    """(wheel, FreshVenv, seconds the venv took), built once per test session: the first caller
    builds under a file lock in the session's shared temporary folder, later callers, on this or
    another xdist worker, wait for it and reuse it."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # each worker has its own basetemp under the session's
    folder = base / "student-wheel-shared"
    ready = folder / "ready.json"
    with FileLock(str(folder) + ".lock", timeout=3600):
        if not ready.exists():
            folder.mkdir(parents=True, exist_ok=True)
            wheel = build_wheel(folder / "dist")
            venv, seconds = make_venv(folder / "venv", wheel)
            ready.write_text(json.dumps({"wheel": str(wheel), "seconds": seconds}))
        built = json.loads(ready.read_text())
    return pathlib.Path(built["wheel"]), FreshVenv(folder / "venv"), built["seconds"]
