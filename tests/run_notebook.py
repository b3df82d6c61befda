"""Run one notebook with nbclient, as `jupyter execute --inplace` does, over IPC sockets.

Why not `jupyter execute` itself: its client waits for each cell's messages with one poll per
cell timeout, and a message whose wake-up was lost sits unread until that timeout ends. In the
wheel's fresh venv two runs (07 and 09) once waited 10 minutes with their kernels idle, as a lost
wake-up would make them. This script's client reads every message promptly
(course_utils/kernel_messages.py says why and how), and talks over IPC sockets in a folder of its
own, as the grader's kernels do.

Runs in the environment under test (the student wheel's fresh venv): it imports nbformat, nbclient,
jupyter_client and the course_utils installed there, all part of the course.
usage: python run_notebook.py NOTEBOOK [TIMEOUT]; exit 0, or 1 when a cell raised (the run is saved).
"""
import os
import shutil
import sys
import tempfile

import nbformat
from jupyter_client.manager import KernelManager
from nbclient.exceptions import CellExecutionError

from course_utils.kernel_messages import notebook_client


def execute(nb, folder, timeout=600, **options):
    """Run `nb` in place in a fresh python3 kernel whose working folder is `folder`, over IPC
    sockets in a temporary folder of its own (removed afterwards). `options` go to NotebookClient
    (allow_errors=True, say); a cell that raises without it raises CellExecutionError."""
    sockets = tempfile.mkdtemp(prefix="kernel-ipc-")
    try:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "kernel"))
        # cleanup_kc: shut the kernel down and remove its connection file at the end (nbclient
        # leaves a kernel it did not start running, until this process exits).
        notebook_client(nb, km=km, timeout=timeout, kernel_name="python3",
                        resources={"metadata": {"path": str(folder)}}, **options).execute(cleanup_kc=True)
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


def main(path, timeout=600):
    nb = nbformat.read(path, as_version=4)
    try:
        execute(nb, os.path.dirname(os.path.abspath(path)), timeout)
        return 0
    except CellExecutionError as error:
        print(error, file=sys.stderr)
        return 1
    finally:
        nbformat.write(nb, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], *(int(a) for a in sys.argv[2:3])))
