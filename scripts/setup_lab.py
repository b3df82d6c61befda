"""Quiet JupyterLab defaults for the course environment.

Writes `<venv>/share/jupyter/lab/settings/overrides.json` so that JupyterLab neither fetches
news nor checks for updates: the course runs offline, and a pop-up on first start distracts.
"""
import json
import pathlib
import sys

OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}


def main():
    target = pathlib.Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(target.read_text()) if target.exists() else {}
    current.update(OVERRIDES)
    target.write_text(json.dumps(current, indent=2) + "\n")
    print(f"JupyterLab settings: {target}")


if __name__ == "__main__":
    main()
