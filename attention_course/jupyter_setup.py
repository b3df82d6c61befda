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
3. Only in a student's environment (the wheel's `attention-course init`, never the clone's
   instructor environment): nbgrader's instructor tools (Formgrader, Create Assignment, the
   assignment and course lists, their menu) left out of the lab, as `make lab` leaves them out
   with scripts/student_lab/. The lab extensions are disabled in
   `<prefix>/etc/jupyter/labconfig/page_config.json`, the server extensions in
   `<prefix>/etc/jupyter/jupyter_server_config.json` (read after, and so over, the
   `jupyter_server_config.d/nbgrader.json` that pip wrote); both merged into what is there.

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
    current = _read_json(target)
    current.update(overrides)
    return _write_json(target, current)


def _read_json(target):
    return json.loads(target.read_text()) if target.exists() else {}


def _write_json(target, data):
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=2) + "\n")
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


def _merged(current, wanted):
    """`current` with `wanted` written into it, dictionaries merged at every depth."""
    for key, value in wanted.items():
        if isinstance(value, dict) and isinstance(current.get(key), dict):
            _merged(current[key], value)
        else:
            current[key] = value
    return current


def students_lab_only(prefix, student_lab):
    """3. above: the instructor's nbgrader tools left out of the lab of this environment."""
    student_lab, etc = pathlib.Path(student_lab), pathlib.Path(prefix) / "etc" / "jupyter"
    written = []
    for name in ("labconfig/page_config.json", "jupyter_server_config.json"):
        target = etc / name
        wanted = json.loads((student_lab / name).read_text())  # shipped with the course: must be there
        written.append(_write_json(target, _merged(_read_json(target), wanted)))
    return tuple(written)


def install(prefix, student_lab):
    """Both of the above, from the folder holding overrides.json and nbgrader_config.py."""
    student_lab = pathlib.Path(student_lab)
    overrides = json.loads((student_lab / "overrides.json").read_text())
    return (lab_settings(prefix, overrides),
            validate_hook(prefix, (student_lab / "nbgrader_config.py").read_text()))
