"""The course's Jupyter defaults, written into the environment (sys.prefix) that runs Jupyter.

Why in the environment: nbgrader and JupyterLab read `<prefix>/etc/jupyter` and
`<prefix>/share/jupyter` wherever they start (a clone's workspace/, a folder made by
`attention-course init`, a hub's home), so a student never has to start Jupyter in a particular
folder or with a particular variable for Validate to speak the course's language.

1. JupyterLab settings merged into `<prefix>/share/jupyter/lab/settings/overrides.json`: no news,
   no update check (the course runs offline), widget state saved with the notebook.
2. nbgrader's Validate hook written as a marked block into `<prefix>/etc/jupyter/nbgrader_config.py`;
   whatever else that file holds (a hub's exchange settings) is kept, and writing it again
   replaces only the block.

The texts themselves live in scripts/student_lab/ (overrides.json, nbgrader_config.py), which the
clone's scripts/setup_lab.py reads and the student wheel ships as attention_course/student_lab/.
"""
import json
import pathlib
import re

BEGIN = "# >>> attention course: Validate (scripts/setup_lab.py rewrites this block) >>>"
END = "# <<< attention course: Validate <<<"
BLOCK = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n?", re.DOTALL)


def lab_settings(prefix, overrides):
    """Merge `overrides` (a dict of JupyterLab settings) into the environment's overrides.json."""
    target = pathlib.Path(prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(target.read_text()) if target.exists() else {}
    current.update(overrides)
    target.write_text(json.dumps(current, indent=2) + "\n")
    return target


def validate_hook(prefix, hook):
    """Write (or replace) the course's block, holding `hook`, in <prefix>/etc/jupyter/nbgrader_config.py."""
    target = pathlib.Path(prefix) / "etc" / "jupyter" / "nbgrader_config.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    block = f"{BEGIN}\n{hook.rstrip()}\n{END}\n"
    current = target.read_text() if target.exists() else ""
    if BLOCK.search(current):
        updated = BLOCK.sub(lambda _: block, current, count=1)
    else:
        updated = current + ("\n" if current and not current.endswith("\n") else "") + ("\n" if current else "") + block
    if updated != current:
        target.write_text(updated)
    return target


def install(prefix, student_lab):
    """Both of the above, from the folder holding overrides.json and nbgrader_config.py."""
    student_lab = pathlib.Path(student_lab)
    overrides = json.loads((student_lab / "overrides.json").read_text())
    return (lab_settings(prefix, overrides),
            validate_hook(prefix, (student_lab / "nbgrader_config.py").read_text()))
