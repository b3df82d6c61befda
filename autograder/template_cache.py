"""nbgrader's template of an assignment (its gradebook and release), kept so that batches share it.

Why: before grading, every batch runs nbgrader generate_assignment on each assignment it grades,
into a template gradebook and a private release (batch.Batch._template), about 2 s of CPU each
(nbgrader's converters, and the `alembic` command it runs for a new gradebook). A batch already
skips that when its own output folder holds a template of the same source; the grading tests and
a platform's warming run start from a new output folder every time, so each paid it again.

What the key holds: the assignment's source files (the batch's fingerprint of them), the grader's
code (it says how nbgrader is configured), and the Python with every installed package (nbgrader's
version decides what it writes). The template holds the hidden tests (the gradebook keeps every
test cell's source), so it is kept in the solution verdicts' folder, which no student code can
reach (verdict.private_folder), as `<folder>/templates/<assignment>/<key>/`.

A kept template is written to a temporary folder and renamed, so a reader never sees half of
one; one that cannot be read or written only means nbgrader runs as before.
"""
import hashlib
import json
import os
import shutil
import tempfile

from . import verdict


def key(source_fingerprint, course_utils):
    return hashlib.sha256(json.dumps([source_fingerprint, verdict.code_key(course_utils),
                                      verdict.packages_key()]).encode()).hexdigest()


def _entry(folder, assignment, template_key):
    return os.path.join(folder, "templates", assignment, template_key)


def restore(folder, assignment, template_key, db, release):
    """Copy a kept template into place (db: the template gradebook's path; release: the release
    folder holding `assignment/`). True when it was there and copied."""
    entry = _entry(folder, assignment, template_key)
    kept_db, kept_release = os.path.join(entry, "gradebook.db"), os.path.join(entry, "release")
    if not (os.path.isfile(kept_db) and os.path.isdir(kept_release)):
        return False
    target = os.path.join(release, assignment)
    try:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(kept_release, target)
        shutil.copyfile(kept_db, db)
        return True
    except OSError:
        shutil.rmtree(target, ignore_errors=True)
        if os.path.exists(db):
            os.remove(db)
        return False


def keep(folder, assignment, template_key, db, release):
    """Keep a copy of the template nbgrader just wrote (True when kept)."""
    entry = _entry(folder, assignment, template_key)
    if os.path.isdir(entry):
        return True
    parent = os.path.dirname(entry)
    tmp = None
    try:
        os.makedirs(parent, mode=0o700, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".new-", dir=parent)
        shutil.copytree(os.path.join(release, assignment), os.path.join(tmp, "release"))
        shutil.copyfile(db, os.path.join(tmp, "gradebook.db"))
        os.rename(tmp, entry)  # fails if another batch kept the same template first: fine
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
