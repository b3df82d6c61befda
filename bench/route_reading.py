"""How long the grader's reading of forbidden routes takes on the solution notebooks.

Why: `judge.forbidden_route` runs as each graded test cell ends (autograder/execute.py) and reads
every code cell before it. This times what the grader does, notebook by notebook: each test cell
judged in order, with one `routes.NotebookReader` per notebook when the grader has it (the
statements of a cell are read once), else the cells before each test cell read afresh.

Two passes in one process: the first with every cache cold (the libraries' modules imported on
the way), the second as for the next student of the same class (the cells' parse cached).

Usage: python bench/route_reading.py [--repeat N]
"""
import argparse
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import nbformat  # noqa: E402

from autograder import judge, routes  # noqa: E402


def read_notebook(cells):
    """Judge every test cell of the notebook as the grader does; returns the number judged."""
    reader = routes.NotebookReader(cells) if hasattr(routes, "NotebookReader") else None
    judged = 0
    for index, cell in enumerate(cells):
        if cell.get("cell_type") == "code" and judge.expected(cell.get("source", "")):
            if reader is None:
                judge.forbidden_route(cells, index, cell.source)
            else:
                judge.forbidden_route(cells, index, cell.source, reader=reader)
            judged += 1
    return judged


def one_pass(paths):
    """{notebook: (test cells judged, seconds)} for one reading of every notebook."""
    times = {}
    for path in paths:
        cells = nbformat.read(path, as_version=4).cells
        start = time.perf_counter()
        judged = read_notebook(cells)
        times[path.parent.name] = (judged, time.perf_counter() - start)
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1, help="warm passes to time (the best is shown)")
    args = parser.parse_args()
    paths = sorted((REPO / "solutions").glob("*/*.ipynb"))
    cold = one_pass(paths)
    warm = min((one_pass(paths) for _ in range(max(1, args.repeat))),
               key=lambda times: sum(s for _, s in times.values()))
    print(f"{'notebook':28} {'test cells':>10} {'cold s':>8} {'warm s':>8}")
    for name, (judged, seconds) in cold.items():
        print(f"{name:28} {judged:10d} {seconds:8.2f} {warm[name][1]:8.2f}")
    print(f"{'all ' + str(len(paths)) + ' solutions':28} {sum(j for j, _ in cold.values()):10d} "
          f"{sum(s for _, s in cold.values()):8.2f} {sum(s for _, s in warm.values()):8.2f}")


if __name__ == "__main__":
    main()
