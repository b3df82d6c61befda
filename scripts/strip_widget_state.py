"""Remove saved widget state from notebooks: it holds rendered figures (over 100 KB), changes on
every run, and nbgrader would copy it into the student release.

usage: python scripts/strip_widget_state.py NOTEBOOK...
"""
import sys

import nbformat


def strip(path):
    nb = nbformat.read(path, as_version=4)
    if nb.metadata.pop("widgets", None) is not None:
        nbformat.write(nb, path)
        print(f"stripped widget state from {path}")


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        strip(argument)
