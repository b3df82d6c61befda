"""`make bundle`: the zip a student downloads — the release, the student-safe course code, and
the files to install it — and nothing that answers an exercise; and beside it the student wheel
(scripts/student_wheel.py) for students without a clone: `pip install` it, `attention-course init`.

Built from a commit (HEAD by default), never from the working tree: `git archive` gives the
committed files, nbgrader generates the release from the committed solutions/ afresh, and only
that fresh release goes into the zip. So a notebook someone answered in notebooks/ (or any other
uncommitted file) cannot reach students; uncommitted changes are named, not shipped.

Left out: solutions/, course_utils/reference/ (answers and mistake catalogues), tests/, the
autograder, the gradebook. A last scan refuses the zip if a solution region, a hidden test or an
import of the reference would leak anyway.

usage: python scripts/bundle.py [dist/student-bundle.zip] [--commit REV] [--no-wheel]
"""
import argparse
import contextlib
import io
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: scripts/ is a package of the course

from scripts import student_wheel  # noqa: E402

STUDENT_FILES = pathlib.Path("scripts") / "student"
STUDENT_LAB = pathlib.Path("scripts") / "student_lab"  # the lab without the instructor's tools
PREFIX = "attention-course"
INCLUDED = ("course_utils/", "environment.yml")
EXCLUDED = ("course_utils/reference/",)
# Text that must never reach a student: solution regions, hidden tests, imports of the reference.
SECRETS = re.compile(
    r"BEGIN SOLUTION|BEGIN HIDDEN TESTS|(?<![\w.])(from|import)\s+(course_utils)?\.reference\b"
    r"|from course_utils import reference"
)
# Paths that must never be in the wheel, whatever they hold.
FORBIDDEN_IN_WHEEL = ("course_utils/reference/", "solutions/", "tests/", "autograder/", "gradebook")


def git(root, *args):
    return subprocess.run(["git", *args], cwd=root, capture_output=True, check=True).stdout


def export_commit(root, commit, target):
    """The files of `commit` (what git tracks, as committed) unpacked into `target`."""
    archive = git(root, "archive", "--format=tar", commit)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")


def generate_release(course):
    """nbgrader's release of every assignment of `course`, made afresh: {relative path: bytes}."""
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    released = course / "notebooks"
    subprocess.run(["rm", "-rf", str(released)], check=True)
    result = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "[0-9][0-9]_*",
                             "--force", "--log-level=WARN"], cwd=course, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"nbgrader could not generate the release:\n{result.stdout}\n{result.stderr}")
    return {f"notebooks/{p.relative_to(released)}": p.read_bytes() for p in sorted(released.rglob("*"))
            if p.is_file() and ".ipynb_checkpoints" not in p.parts}


def uncommitted(root):
    """Tracked files that differ from HEAD, and what git does not track under notebooks/."""
    status = git(root, "status", "--porcelain", "--", "solutions", "notebooks", "course_utils").decode()
    return [line[3:] for line in status.splitlines() if line.strip()]


def selected(path):
    return path.startswith(INCLUDED) and not path.startswith(EXCLUDED) and "__pycache__" not in path


def requirements(course):
    """The runtime pins of pyproject.toml: what a student installs."""
    project = tomllib.loads((course / "pyproject.toml").read_text())["project"]
    return "\n".join(project["dependencies"]) + "\n"


def secrets_in(name, data):
    if not name.endswith((".py", ".ipynb", ".md", ".txt", ".yml", ".toml", "Makefile")):
        return []
    return sorted({m.group(0).strip() for m in SECRETS.finditer(data.decode("utf-8", errors="replace"))})


@contextlib.contextmanager
def committed_course(root=ROOT, commit="HEAD"):
    """The files of `commit` in a temporary folder, and nbgrader's release of them made afresh:
    yields (folder, {"notebooks/...": bytes}). The zip and the wheel are both made from these."""
    with tempfile.TemporaryDirectory(prefix="bundle-") as tmp:
        course = pathlib.Path(tmp)
        export_commit(root, commit, course)
        yield course, generate_release(course)


def bundle_entries(course, release):
    """{name in the zip: bytes}: the release, the student-safe library and the student's files."""
    entries = dict(release)
    for path in sorted(p for p in course.rglob("*") if p.is_file()):
        relative = path.relative_to(course).as_posix()
        if selected(relative):
            entries[relative] = path.read_bytes()
    for extra in sorted((course / STUDENT_FILES).iterdir()):
        entries[extra.name] = extra.read_bytes()
    for extra in sorted(p for p in (course / STUDENT_LAB).rglob("*") if p.is_file()):
        entries[f"student_lab/{extra.relative_to(course / STUDENT_LAB).as_posix()}"] = extra.read_bytes()
    entries["requirements.txt"] = requirements(course).encode()
    return entries


def contents(root=ROOT, commit="HEAD"):
    """{name in the zip: bytes} of the bundle of `commit`, with its release generated afresh."""
    with committed_course(root, commit) as (course, release):
        return bundle_entries(course, release)


def leaks(entries):
    """{name: what leaks} over {name: bytes}: solution regions, hidden tests, reference imports."""
    return {name: found for name, data in entries.items() if (found := secrets_in(name, data))}


def wheel_leaks(path):
    """What must not reach students in the wheel at `path`, read back as pip would install it:
    a forbidden path (the reference, solutions, tests, the autograder), whatever it holds, and
    the same text scan as the zip's."""
    files = student_wheel.read(path)
    found = {name: ["a file students must not get"] for name in files if name.startswith(FORBIDDEN_IN_WHEEL)}
    for name, secrets in leaks(files).items():
        found.setdefault(name, []).extend(secrets)
    return found


def build(target, root=ROOT, commit="HEAD", wheel=True):
    """Write the zip at `target` and, unless told not to, the wheel beside it; both from `commit`."""
    target = pathlib.Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with committed_course(root, commit) as (course, release):
        entries = bundle_entries(course, release)
        if found := leaks(entries):
            raise SystemExit(f"refusing to build the bundle, answers would leak: {found}")
        wheel_path = student_wheel.build(target.parent, course, release) if wheel else None
    if wheel_path and (found := wheel_leaks(wheel_path)):
        wheel_path.unlink()
        raise SystemExit(f"refusing to build the student wheel, answers would leak: {found}")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in sorted(entries.items()):
            info = zipfile.ZipInfo(f"{PREFIX}/{name}", date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(info, data)
    revision = git(root, "rev-parse", "--short", commit).decode().strip()
    print(f"wrote {target} ({len(entries)} files, {target.stat().st_size // 1024} KiB), "
          f"built from commit {revision} with the release generated afresh")
    if wheel_path:
        print(f"wrote {wheel_path} ({wheel_path.stat().st_size // 1024} KiB) from the same files: "
              f"pip install it, then attention-course init DIR")
    if commit == "HEAD" and (changed := uncommitted(root)):
        print(f"not in the bundle (uncommitted): {', '.join(changed[:8])}" + (" ..." if len(changed) > 8 else ""))
    return target


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="?", default=str(ROOT / "dist" / "student-bundle.zip"))
    parser.add_argument("--commit", default="HEAD", help="the commit to build from (default: HEAD)")
    parser.add_argument("--no-wheel", action="store_true", help="write only the zip, not the student wheel")
    arguments = parser.parse_args()
    build(arguments.target, commit=arguments.commit, wheel=not arguments.no_wheel)
