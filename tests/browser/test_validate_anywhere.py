"""nbgrader's Validate button in a lab started from the student's own folder (`cd workspace &&
jupyter lab`), where no course nbgrader_config.py lies: the one-line report still comes, because
scripts/setup_lab.py put the hook in the environment's etc/jupyter/nbgrader_config.py, which
nbgrader reads from jupyter_config_path() wherever the server started.

The environment's own file is the developer's .venv (`make setup` wrote it, tests/test_workspace.py
checks it); here the file setup_lab.py writes goes into a temporary prefix put on
JUPYTER_CONFIG_PATH, so the test proves what that file does, not what the machine happens to hold.
"""
import pathlib
import re

import pytest

from scripts import setup_lab
from tests.browser.lab import Notebook, jupyterlab, prepare_root

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
PATH = "02_causal_cnn/causal_cnn.ipynb"
TITLE = "Exercise 2 · `receptive_field` (3 points)"
# A catalogued mistake (causal_cnn's ignores_dilation): the field grows by k - 1 per layer.
NO_DILATION = '''def receptive_field(kernel_sizes, dilations, strides=None):
    """How many consecutive input steps one output of the stack depends on (an int)."""
    if strides is None:
        strides = [1] * len(kernel_sizes)
    field, jump = 1, 1
    for k, d, s in zip(kernel_sizes, dilations, strides):
        field += (k - 1) * jump
        jump *= s
    return field
'''

pytestmark = pytest.mark.skipif(not (ROOT / "notebooks" / PATH).exists(), reason="notebook 02 not released")


@pytest.fixture(scope="module")
def workspace_lab(tmp_path_factory):
    """JupyterLab whose server runs in the student's folder: every exercise of 02 answered, one wrongly."""
    import nbformat

    work = tmp_path_factory.mktemp("workspace-lab")
    workspace = prepare_root(work, ROOT / "notebooks", ROOT / "solutions", filled=True)
    notebook = nbformat.read(workspace / PATH, as_version=4)
    (answer,) = [c for c in notebook.cells
                 if c.metadata.get("nbgrader", {}).get("grade_id") == "causal_cnn_receptive_field"]
    answer.source = NO_DILATION
    nbformat.write(notebook, workspace / PATH)
    assert not (workspace / "nbgrader_config.py").exists()
    prefix = work / "environment"
    config = setup_lab.nbgrader_config(prefix)
    with jupyterlab(workspace, work, env={"JUPYTER_CONFIG_PATH": str(config.parent)}) as url:
        yield url


def test_validate_in_a_lab_started_from_the_workspace_says_one_line_per_failing_exercise(page, workspace_lab):
    Notebook(page, workspace_lab, PATH)
    page.locator(".jp-NotebookPanel-toolbar .validate-button").first.click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=300_000)
    page.wait_for_function(
        "() => /failed|Success|error/i.test(document.querySelector('.jp-Dialog').innerText)", timeout=300_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "validate-dialog-in-workspace.png"))
    text = dialog.inner_text()

    assert "Validation Results" in text, text
    assert text.count("The following cell failed") == 1, text  # the three right answers pass
    blocks = [b.strip() for b in dialog.locator("#validation-message pre").all_inner_texts()]
    assert blocks[0] == TITLE, blocks  # the heading the student saw, not the test cell's source
    sentence = blocks[1]
    assert "\n" not in sentence and sentence.endswith((".", "?")), sentence  # one line, one sentence
    assert "Traceback" not in text and "grading." not in text and "def " not in text, text
    assert not re.search(r"\x1b\[|\[0;3\dm", text), text  # no terminal colour codes
    assert "dilation" in sentence.lower() or "receptive" in sentence.lower(), sentence
