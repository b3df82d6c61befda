"""Run one notebook with nbclient, as `jupyter execute --inplace` does, and keep the kernel awake.

Why not `jupyter execute` itself: nbclient can miss the end of a cell that shows widgets and then
wait forever with the kernel idle (jupyter/nbclient#312, jupyter/nbconvert#2029; seen here on 07's
`interactive_output` cell in the wheel's fresh venv: the run went on as soon as another client
asked the kernel something). Every 15 s this script asks the kernel for its info on a client of its
own; the kernel's busy/idle messages for that request wake nbclient's wait, and change nothing else.

Runs in the environment under test (the student wheel's fresh venv): it imports nbclient and
jupyter_client only, both dependencies of the course.
usage: python run_notebook.py NOTEBOOK [TIMEOUT]; exit 0, or 1 when a cell raised (the run is saved).
"""
import os
import sys
import threading

import nbformat
from jupyter_client import BlockingKernelClient
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

POKE_EVERY = 15  # seconds


def _keep_awake(client, done):
    while not done.wait(POKE_EVERY):
        km = client.km
        if km is None or not km.has_kernel:
            continue
        poke = BlockingKernelClient()
        try:
            poke.load_connection_info(km.get_connection_info())
            poke.start_channels()
            poke.kernel_info(reply=True, timeout=5)
        except Exception:  # noqa: BLE001 - a kernel that is busy or gone: try again later
            pass
        finally:
            poke.stop_channels()


def main(path, timeout=600):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(os.path.abspath(path))}})
    done = threading.Event()
    threading.Thread(target=_keep_awake, args=(client, done), daemon=True).start()
    try:
        client.execute()
        return 0
    except CellExecutionError as error:
        print(error, file=sys.stderr)
        return 1
    finally:
        done.set()
        nbformat.write(nb, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], *(int(a) for a in sys.argv[2:3])))
