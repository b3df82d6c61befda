"""JupyterLab defaults for the course environment, from `scripts/student_lab/overrides.json`.

Merges them into `<venv>/share/jupyter/lab/settings/overrides.json`: JupyterLab neither fetches
news nor checks for updates (the course runs offline, and a pop-up on first start distracts),
and it saves widget state with the notebook, so a reopened notebook shows its sliders, figures
and progress lines instead of "Error displaying widget: model not found". The student bundle's
Makefile copies the same file.
"""
import json
import pathlib
import sys

OVERRIDES = json.loads((pathlib.Path(__file__).parent / "student_lab" / "overrides.json").read_text())


def main():
    target = pathlib.Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(target.read_text()) if target.exists() else {}
    current.update(OVERRIDES)
    target.write_text(json.dumps(current, indent=2) + "\n")
    print(f"JupyterLab settings: {target}")


if __name__ == "__main__":
    main()
