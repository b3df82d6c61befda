"""The course's Jupyter defaults, installed into the environment that runs JupyterLab.

1. JupyterLab settings, from `scripts/student_lab/overrides.json`, merged into
   `<prefix>/share/jupyter/lab/settings/overrides.json`: JupyterLab neither fetches news nor checks
   for updates (the course runs offline, and a pop-up on first start distracts), and it saves
   widget state with the notebook, so a reopened notebook shows its sliders, figures and progress
   lines instead of "Error displaying widget: model not found".
2. nbgrader's Validate, from `scripts/student_lab/nbgrader_config.py`, written as a marked block
   into `<prefix>/etc/jupyter/nbgrader_config.py`. nbgrader reads that file wherever it runs (it
   is on jupyter_config_path()), so Validate prints one line per exercise even when JupyterLab
   was started in workspace/ or a notebook's folder, where no course nbgrader_config.py lies.
   Whatever else the file holds (a hub's exchange settings) is kept; running this again replaces
   only the block.

`make setup` and `make lab` run it; a hub image or a conda environment runs it once with the
environment's Python: `<env>/bin/python scripts/setup_lab.py`. The student bundle's Makefile
copies the same two files. The writing itself lives in attention_course/jupyter_setup.py, which the
pip-installed course's `attention-course init` uses too.

usage: python scripts/setup_lab.py [--prefix PREFIX]     (default: this Python's sys.prefix)
"""
import argparse
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent / "student_lab"
sys.path.insert(0, str(HERE.parents[1]))  # run as a script: the course's packages sit beside scripts/

from attention_course import jupyter_setup  # noqa: E402  (shared with `attention-course init`)
from attention_course.jupyter_setup import BEGIN, END  # noqa: E402,F401  (the block's markers)

OVERRIDES = json.loads((HERE / "overrides.json").read_text())
VALIDATE_HOOK = (HERE / "nbgrader_config.py").read_text()


def lab_settings(prefix):
    return jupyter_setup.lab_settings(prefix, OVERRIDES)


def nbgrader_config(prefix):
    """Write (or replace) the course's block in <prefix>/etc/jupyter/nbgrader_config.py."""
    return jupyter_setup.validate_hook(prefix, VALIDATE_HOOK)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", default=sys.prefix, help="the environment to configure (default: %(default)s)")
    prefix = parser.parse_args(argv).prefix
    print(f"JupyterLab settings: {lab_settings(prefix)}")
    print(f"nbgrader's Validate: {nbgrader_config(prefix)}")


if __name__ == "__main__":
    main()
