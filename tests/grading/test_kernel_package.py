"""The course_utils the sandboxed kernels import (autograder/hidden_cases.kernel_package): no
reference in it, and bytecode compiled by the grader, so that a kernel, which cannot write
bytecode, does not compile the package again for every student."""
import os
import re
import stat
import subprocess
import sys

import pytest

import grading_helpers as H
from autograder import hidden_cases


def _code_objects_loaded(package_parent, modules):
    """The file each code object came from (a .py or a .pyc), as `python -v` reports a kernel's
    `import modules`, with bytecode writing off as in the sandbox."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(package_parent)}
    run = subprocess.run([sys.executable, "-v", "-c", f"import {modules}"], env=env, cwd=package_parent,
                         capture_output=True, text=True, check=True)
    return re.findall(r"^# code object from '?([^'\n]+)'?$", run.stderr, re.M)


def test_the_kernels_package_has_no_reference_and_loads_from_the_graders_bytecode(tmp_path):
    dest = hidden_cases.kernel_package(str(H.REPO / "course_utils"), str(tmp_path / "pkg" / "course_utils"))
    assert not os.path.exists(os.path.join(dest, "reference"))
    loaded = _code_objects_loaded(tmp_path / "pkg", "course_utils.grading, course_utils.widgets, course_utils.training")
    ours = [path for path in loaded if path.startswith(dest)]
    assert len(ours) > 10, loaded
    assert all(path.endswith(".pyc") for path in ours), [p for p in ours if not p.endswith(".pyc")]
    # every uid reads it; nobody but the grader writes it
    for root, dirs, files in os.walk(dest):
        for path in [root] + [os.path.join(root, f) for f in files]:
            mode = stat.S_IMODE(os.stat(path).st_mode)
            assert mode & 0o444 == 0o444 and not mode & 0o022, (path, oct(mode))


def test_a_course_utils_that_does_not_compile_stops_the_grader(tmp_path):
    broken = tmp_path / "course_utils"
    broken.mkdir()
    (broken / "__init__.py").write_text("def oops(:\n")
    with pytest.raises(RuntimeError, match="does not compile"):
        hidden_cases.kernel_package(str(broken), str(tmp_path / "pkg" / "course_utils"))
