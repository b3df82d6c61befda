"""Run one notebook with nbclient, as `jupyter execute --inplace` does, over IPC sockets.

Why not `jupyter execute` itself: it talks to the kernel over TCP ports on localhost, and in the
wheel's fresh venv, with other tests' kernels starting beside it, two runs (07 and 09) waited for
10 minutes with their kernels idle and answering other clients (nbclient's own reports of such
waits: jupyter/nbclient#312, jupyter/nbconvert#2029). The grader's kernels talk over IPC sockets in
a folder of their own and have never waited so; this script does the same.

Runs in the environment under test (the student wheel's fresh venv): it imports nbformat, nbclient
and jupyter_client only, all dependencies of the course.
usage: python run_notebook.py NOTEBOOK [TIMEOUT]; exit 0, or 1 when a cell raised (the run is saved).
"""
import os
import shutil
import sys
import tempfile

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def execute(nb, folder, timeout=600, **options):
    """Run `nb` in place in a fresh python3 kernel whose working folder is `folder`, over IPC
    sockets in a temporary folder of its own (removed afterwards). `options` go to NotebookClient
    (allow_errors=True, say); a cell that raises without it raises CellExecutionError."""
    sockets = tempfile.mkdtemp(prefix="kernel-ipc-")
    try:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "kernel"))
        NotebookClient(nb, km=km, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(folder)}}, **options).execute()
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
