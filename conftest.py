"""Test set-up for the whole run (tests/ and the notebooks nbval collects from solutions/):
Jupyter, IPython and matplotlib must not write into the real $HOME; kernels use one thread."""
import os
import pathlib
import tempfile


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
# Two pytest workers share two cores. Kernels with two OpenMP threads each oversubscribe them, and
# OpenMP's spin-waiting then makes small tensor work 20-40x slower; one thread per kernel keeps
# every test's speed independent of what the other worker is doing. Stored outputs must not
# depend on the thread count anyway: students' machines have any number of cores.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
