"""Shared test set-up: Jupyter, IPython and matplotlib must not write into the real $HOME."""
import os
import pathlib
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

_home = pathlib.Path(tempfile.mkdtemp(prefix="course-test-home-"))
for variable, folder in {
    "HOME": "home",
    "JUPYTER_CONFIG_DIR": "jupyter-config",
    "JUPYTER_DATA_DIR": "jupyter-data",
    "JUPYTER_RUNTIME_DIR": "jupyter-runtime",
    "IPYTHONDIR": "ipython",
    "MPLCONFIGDIR": "matplotlib",
}.items():
    (_home / folder).mkdir(parents=True, exist_ok=True)
    os.environ[variable] = str(_home / folder)
os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # silences a debugger warning in kernels
