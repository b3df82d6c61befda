"""What the student's sandbox gets instead of the reference: a course_utils without it, and the
cases of the hidden tests.

Why (issue 17, item 1): any answer cell could `import course_utils.reference...` (or read its
files, or reach it through a catalogue's attributes) and score full marks with the course's own
answers. Guarding names inside the kernel cannot stop that, since the student's code runs there
first. So the reference is simply absent from the sandbox: the kernel sees a copy of
course_utils made without `reference/`, mounted where the real package is, and the hidden tests
get their inputs from a file of cases (plain data, inputs only) written here. The results come
back to the grader, which judges them with the real reference (judge.py).
"""
import compileall
import glob
import hashlib
import json
import os
import shutil

import nbformat

from course_utils.grading import probe

from . import judge

SECRET_PARTS = ("reference",)  # course_utils subpackages the sandbox never contains


def kernel_package(course_utils, dest):
    """Copy the course_utils package at `course_utils` to `dest`, without its secret parts and
    caches, and compile it; readable by every uid. Returns dest.

    The bytecode is compiled here, once per batch, from the copied sources: the kernels cannot
    write it (the package is mounted read-only, PYTHONDONTWRITEBYTECODE is set), so without it
    every student's kernel compiled the package again (65 ms of CPU each, measured)."""
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    shutil.copytree(course_utils, dest, ignore=shutil.ignore_patterns(
        "__pycache__", "*.pyc", ".ipynb_checkpoints", *SECRET_PARTS))
    if not compileall.compile_dir(dest, quiet=1):
        raise RuntimeError(f"course_utils does not compile: {dest}")
    for root, dirs, files in os.walk(dest):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    return dest


def checked_exercises(notebook_paths):
    """{grade_id: topic} of every hidden catalogue check in these source notebooks, and the
    graded test cells that have none (their score rests on the kernel's word alone)."""
    found, unchecked = {}, []
    for path in notebook_paths:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            wanted = judge.expected(cell.source)
            if wanted is None:
                unchecked.append(f"{os.path.basename(path)}: {meta.get('grade_id', '?')}")
                continue
            topic, ids = wanted
            for grade_id in ids:
                found[grade_id] = topic
    return found, unchecked


def write_cases(notebook_paths, path):
    """Write the specs of every exercise the notebooks check to `path` (mode 0644); return
    (fingerprint of the cases and of the catalogue code judging them, unchecked cells)."""
    import importlib
    found, unchecked = checked_exercises(notebook_paths)
    specs = {}
    for grade_id, topic in sorted(found.items()):
        module = importlib.import_module(f"course_utils.reference.mistakes.{topic}")
        specs[grade_id] = module.EXERCISES[grade_id].spec()
    # Notebooks without hidden checks (judged by their kernel alone) get an empty file: nothing
    # reads it, and serialising even an empty dict would load PyTorch (2 CPU-seconds).
    data = probe.dumps(specs) if specs else b""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    digest = hashlib.sha256(data)
    reference = os.path.join(os.path.dirname(os.path.dirname(probe.__file__)), "reference")
    for source in sorted(glob.glob(os.path.join(reference, "**", "*.py"), recursive=True)):
        with open(source, "rb") as fh:
            digest.update(source.encode() + hashlib.sha256(fh.read()).digest())
    digest.update(json.dumps(sorted(found.items())).encode())
    return digest.hexdigest(), unchecked


__all__ = ["kernel_package", "checked_exercises", "write_cases", "SECRET_PARTS"]
