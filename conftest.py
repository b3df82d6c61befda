"""Test set-up for the whole run (tests/ and the notebooks nbval collects from solutions/):
Jupyter, IPython and matplotlib must not write into the real $HOME; kernels use one thread;
pytest-xdist groups."""
import os
import pathlib
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent

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


import pytest  # noqa: E402  (after the environment above is set)


# tryfirst: xdist turns the groups into node ids in its own collection hook, which must see them.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Groups for pytest-xdist's loadgroup: one worker per notebook (nbval runs its cells in order
    in one kernel), per test module (module-scoped fixtures are costly), and one for the whole
    sandboxed-grading suite (it asserts that no sandbox process outlives a batch, which a second
    batch on the other worker would break)."""
    for item in items:
        path = pathlib.Path(str(item.fspath)).resolve().relative_to(ROOT)
        group = "grading" if path.parts[:2] == ("tests", "grading") else str(path)
        item.add_marker(pytest.mark.xdist_group(group))
