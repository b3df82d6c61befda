"""autograder.gradebook_head: a new gradebook gets the revision the `alembic` command gives."""
import os
import sqlite3
import subprocess
import sys

import nbgrader.api
from nbgrader.api import Gradebook
from nbgrader.dbutil import _temp_alembic_ini

from autograder import gradebook_head


def test_the_revision_read_in_process_is_the_one_the_command_prints():
    """What nbgrader.api.get_alembic_version runs: `alembic heads`, its first word."""
    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        printed = subprocess.check_output([os.path.join(sys.prefix, "bin", "alembic"), "-c", ini, "heads"])
    assert gradebook_head.head() == printed.decode().split()[0]


def test_a_new_gradebook_is_stamped_with_it_without_the_command(tmp_path, monkeypatch):
    def no_command(*args, **kwargs):
        raise AssertionError(f"nbgrader ran a command: {args}")

    monkeypatch.setattr(nbgrader.api.sp, "check_output", no_command)
    gradebook_head.install()
    path = tmp_path / "gradebook.db"
    with Gradebook(f"sqlite:///{path}"):
        pass
    stamped = sqlite3.connect(path).execute("SELECT version_num FROM alembic_version").fetchall()
    assert stamped == [(gradebook_head.head(),)]
