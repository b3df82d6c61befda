"""`make bench`: figures, never pass/fail. Prints how long each source notebook takes to run
top to bottom, then the grading benchmark when the autograder provides one."""
import pathlib
import runpy
import sys
import time

import nbformat
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1]


def time_notebooks():
    print("notebook run time (top to bottom, fresh kernel):")
    for path in sorted(ROOT.glob("solutions/[0-9][0-9]_*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        print(f"  {path.relative_to(ROOT)}: {time.perf_counter() - start:.1f} s")


def main():
    time_notebooks()
    grading_bench = ROOT / "bench" / "grading.py"
    if grading_bench.exists():
        sys.argv = [str(grading_bench)]
        runpy.run_path(str(grading_bench), run_name="__main__")


if __name__ == "__main__":
    main()
