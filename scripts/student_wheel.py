"""The student wheel: `pip install attention_course-<version>-py3-none-any.whl`, then
`attention-course init DIR`, for students who work in the Jupyter they already have (VS Code,
Notebook 7, a university hub, a hosted notebook service) rather than in a clone.

`make bundle` calls `build` with the same committed files and the same fresh nbgrader release as
the zip (scripts/bundle.py), and bundle.py's leak scan reads the written wheel back before it is
kept. The wheel holds:

- `course_utils/` without `course_utils/reference/` (the answer key and mistake catalogues);
- `attention_course/` (the `attention-course` command), with the release as package data in
  `attention_course/notebooks/` and the lab's settings in `attention_course/student_lab/`;
- metadata declaring pyproject.toml's runtime dependencies with their exact pins (torch==2.13.0).

Why write the zip ourselves rather than ask setuptools (`pip wheel`): a wheel is a zip with three
small metadata files (PEP 427 and 376), and writing it from a dict of {name: bytes} means the
bytes that were selected and scanned are exactly the bytes shipped. No package discovery or
package-data globs decide what goes in, no build/ or egg-info folder left over from an earlier
build can slip in, nothing needs the network or build isolation, and the same commit always
gives the same wheel byte for byte (fixed timestamps, sorted entries).
"""
import base64
import hashlib
import pathlib
import tomllib
import zipfile

PACKAGES = ("course_utils/", "attention_course/")
LEFT_OUT = ("course_utils/reference/",)  # the answer key; bundle.py's scan refuses it too
STUDENT_LAB = "scripts/student_lab/"
TIMESTAMP = (2026, 1, 1, 0, 0, 0)


def project(course):
    return tomllib.loads((pathlib.Path(course) / "pyproject.toml").read_text())["project"]


def wheel_name(course):
    meta = project(course)
    return f"{meta['name'].replace('-', '_')}-{meta['version']}-py3-none-any.whl"


def files(course, release):
    """{name in the wheel: bytes} of the packages, from the course folder `course` (a commit's
    files) and `release` ({"notebooks/NN_topic/topic.ipynb": bytes}, nbgrader's fresh release)."""
    course = pathlib.Path(course)
    chosen = {}
    for path in sorted(p for p in course.rglob("*") if p.is_file()):
        name = path.relative_to(course).as_posix()
        if "__pycache__" in name:
            continue
        if name.startswith(PACKAGES) and not name.startswith(LEFT_OUT):
            chosen[name] = path.read_bytes()
        elif name.startswith(STUDENT_LAB):
            chosen[f"attention_course/student_lab/{name[len(STUDENT_LAB):]}"] = path.read_bytes()
    for name, data in release.items():
        chosen[f"attention_course/{name}"] = data
    return chosen


def metadata(course):
    """The dist-info files but RECORD: {file name: text}."""
    meta = project(course)
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {meta['name']}",
        f"Version: {meta['version']}",
        f"Summary: {meta['description']}",
        f"Requires-Python: {meta['requires-python']}",
        f"License: {meta.get('license', {}).get('text', '')}",
        *(f"Requires-Dist: {requirement}" for requirement in meta["dependencies"]),
    ]
    scripts = "".join(f"{command} = {target}\n" for command, target in meta.get("scripts", {}).items())
    return {
        "METADATA": "\n".join(lines) + "\n",
        "WHEEL": "Wheel-Version: 1.0\nGenerator: scripts/student_wheel.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "entry_points.txt": f"[console_scripts]\n{scripts}",
    }


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write(target, entries):
    """Write {name: bytes} as a zip with fixed timestamps, in name order (dist-info last)."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries.items():
            info = zipfile.ZipInfo(name, date_time=TIMESTAMP)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return target


def build(directory, course, release):
    """Write the wheel of `course` into `directory`; returns its path."""
    target = pathlib.Path(directory) / wheel_name(course)
    dist_info = wheel_name(course).split("-py3-")[0] + ".dist-info"
    entries = dict(sorted(files(course, release).items()))
    entries.update({f"{dist_info}/{name}": text.encode() for name, text in metadata(course).items()})
    record = [_record_line(name, data) for name, data in entries.items()] + [f"{dist_info}/RECORD,,"]
    entries[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    return write(target, entries)


def read(path):
    """{name: bytes} of every file in a wheel (what pip would install)."""
    with zipfile.ZipFile(path) as wheel:
        return {name: wheel.read(name) for name in wheel.namelist() if not name.endswith("/")}
