"""The kernel's CPU seconds of one notebook, cell by cell: what issue 44 measures notebooks by.

Why CPU and not the clock: the course's machines are shared, and a busy machine stretches the wall
time of a run several times over, but barely its CPU time. The total is read from
getrusage(RUSAGE_CHILDREN) after the kernel exits (so workers the kernel forked count too); each
cell's share from the kernel's /proc stat (its own time and its reaped children's) before and after
the cell. Run it with ATEN_CPU_CAPABILITY set to compare kernels:

    ATEN_CPU_CAPABILITY=avx2 .venv/bin/python bench/notebook_cpu.py solutions/04_bahdanau_attention/bahdanau_attention.ipynb
"""
import argparse
import os
import resource
import tempfile
import time

import nbformat

from course_utils.kernel_messages import notebook_client


def _private_jupyter_folders():
    """Jupyter and matplotlib write to folders of their own, not to the user's."""
    root = tempfile.mkdtemp(prefix="notebook-cpu-")
    for name in ("HOME", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        os.environ[name] = os.path.join(root, name.lower())
        os.makedirs(os.environ[name], exist_ok=True)


def measure(path, top=8, save=None):
    """Run the notebook at `path` top to bottom; print the `top` costliest cells and the total."""
    _private_jupyter_folders()
    nb = nbformat.read(path, as_version=4)
    client = notebook_client(nb, timeout=600, kernel_name="python3", allow_errors=True,
                             resources={"metadata": {"path": os.path.dirname(os.path.abspath(path))}})
    tick = os.sysconf("SC_CLK_TCK")

    def kernel_cpu():  # utime, stime, cutime, cstime of the kernel process
        with open(f"/proc/{client.km.provisioner.process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / tick

    start, rows = {}, []

    def cell_started(cell, cell_index):
        start.update(cpu=kernel_cpu(), wall=time.perf_counter())

    def cell_done(cell, cell_index, execute_reply):
        first_line = cell.source.splitlines()[0][:60] if cell.source else ""
        rows.append((kernel_cpu() - start["cpu"], time.perf_counter() - start["wall"], cell_index, first_line))

    client.on_cell_execute, client.on_cell_executed = cell_started, cell_done
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    client.execute()
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    for cpu, seconds, index, first_line in sorted(rows, reverse=True)[:top]:
        print(f"  cell {index:2d}: {cpu:6.2f} s CPU, {seconds:6.2f} s wall   {first_line}")
    print(f"{path}: kernel CPU {total:.2f} s, wall {wall:.1f} s "
          f"(ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', 'unset')})")
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                print(f"  error in a cell: {output['ename']}: {output['evalue'][:200]}")
    if save:
        nbformat.write(nb, save)
    return total


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook")
    parser.add_argument("--top", type=int, default=8, help="how many of the costliest cells to list")
    parser.add_argument("--save", help="write the executed notebook here")
    arguments = parser.parse_args()
    measure(arguments.notebook, arguments.top, arguments.save)
