"""What Validate tells a student (course_utils/validation.py): one line per exercise, passed or
its whole sentence, under the title the student saw; no kernel warning; the same in the dialog."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.course import ROOT

NOTEBOOK = ROOT / "notebooks" / "02_causal_cnn" / "causal_cnn.ipynb"
TITLES = ("Exercise 1", "Exercise 2", "Think first", "Exercise 3")


@pytest.fixture(scope="module")
def unanswered(tmp_path_factory):
    target = tmp_path_factory.mktemp("validate") / NOTEBOOK.name
    shutil.copy(NOTEBOOK, target)
    return target


@pytest.mark.slow
def test_the_command_prints_one_whole_sentence_per_exercise(unanswered):
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))
    result = subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(unanswered)], cwd=ROOT,
                            capture_output=True, text=True, env=env, timeout=600)
    printed = result.stdout + result.stderr
    assert "WARNING" not in printed and "without encryption" not in printed, printed
    assert "Traceback" not in printed, printed
    assert not any(line.rstrip().endswith("...") for line in printed.splitlines()), printed  # nbgrader cut lines so
    entries = re.split(r"\n  (?=FAILS|passes)", result.stdout.split("\n", 1)[1].strip())
    assert len(entries) == len(TITLES), result.stdout
    for entry, title in zip(entries, TITLES):
        sentence = " ".join(entry.split())
        assert sentence.startswith(f"FAILS {title}"), sentence
        assert "not answered yet" in sentence and sentence.endswith("."), sentence


@pytest.mark.slow
def test_the_dialog_shows_the_title_and_the_sentence(unanswered):
    from nbgrader.validator import Validator

    from course_utils import validation
    validation.install()
    failed = Validator().validate(str(unanswered))["failed"]
    assert len(failed) == len(TITLES) and all(entry["source"].startswith(title)
                                              for entry, title in zip(failed, TITLES)), [e["source"] for e in failed]
    for entry in failed:
        assert "\n" not in entry["raw_error"] and "not answered yet" in entry["raw_error"], entry


def test_a_sentence_is_taken_whole_from_each_kind_of_error():
    from nbformat.v4 import new_code_cell, new_output

    from course_utils.validation import one_sentence

    def cell(ename, evalue):
        return new_code_cell(outputs=[new_output("error", ename=ename, evalue=evalue, traceback=["x"])])

    long = "your weights sum to one along axis -2 instead " * 4 + "is your softmax over the wrong axis?"
    assert one_sentence(cell("GradingError", long)) == " ".join(long.split())
    assert "not answered yet" in one_sentence(cell("NotImplementedError", ""))
    assert one_sentence(cell("ValueError", "shapes (2,3) and (4,5) not aligned\nmore")) == \
        "ValueError: shapes (2,3) and (4,5) not aligned"
    assert one_sentence(new_code_cell()) == ""
