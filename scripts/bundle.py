"""`make bundle`: the zip a student downloads — the release, the student-safe course code, and
the files to install it — and nothing that answers an exercise.

Left out: solutions/, course_utils/reference/ (answers and mistake catalogues), tests/, the
autograder, the gradebook. The zip is built from git's list of tracked files, so stray local
files (a gradebook, a scratch notebook) cannot slip in.

usage: python scripts/bundle.py dist/student-bundle.zip
"""
import pathlib
import re
import subprocess
import sys
import tomllib
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
STUDENT_FILES = ROOT / "scripts" / "student"
PREFIX = "attention-course"
INCLUDED = ("notebooks/", "course_utils/", "environment.yml")
EXCLUDED = ("course_utils/reference/",)
# Text that must never reach a student: solution regions, hidden tests, imports of the reference.
SECRETS = re.compile(
    r"BEGIN SOLUTION|BEGIN HIDDEN TESTS|(?<![\w.])(from|import)\s+(course_utils)?\.reference\b"
    r"|from course_utils import reference"
)


def tracked_files():
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return sorted(p for p in listing.stdout.decode().split("\0") if p)


def selected(path):
    return path.startswith(INCLUDED) and not path.startswith(EXCLUDED) and "__pycache__" not in path


def requirements():
    """The runtime pins of pyproject.toml, plus nbgrader for Validate: what a student installs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return "\n".join(project["dependencies"]) + "\n"


def secrets_in(name, data):
    if not name.endswith((".py", ".ipynb", ".md", ".txt", ".yml", ".toml", "Makefile")):
        return []
    return sorted({m.group(0).strip() for m in SECRETS.finditer(data.decode("utf-8", errors="replace"))})


def build(target):
    target = pathlib.Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    entries = {path: (ROOT / path).read_bytes() for path in tracked_files() if selected(path)}
    for extra in sorted(STUDENT_FILES.iterdir()):
        entries[extra.name] = extra.read_bytes()
    entries["requirements.txt"] = requirements().encode()
    leaks = {name: found for name, data in entries.items() if (found := secrets_in(name, data))}
    if leaks:
        raise SystemExit(f"refusing to build the bundle, answers would leak: {leaks}")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in sorted(entries.items()):
            info = zipfile.ZipInfo(f"{PREFIX}/{name}", date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(info, data)
    print(f"wrote {target} ({len(entries)} files, {target.stat().st_size // 1024} KiB)")
    return target


if __name__ == "__main__":
    build(sys.argv[1] if len(sys.argv) > 1 else ROOT / "dist" / "student-bundle.zip")
