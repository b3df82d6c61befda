"""Test set-up for the whole run (tests/ and the notebooks nbval collects from solutions/):
Jupyter, IPython and matplotlib must not write into the real $HOME; kernels use a known number
of threads; nbval compares numbers that come out of training with a tolerance."""
import atexit
import os
import pathlib
import shutil
import tempfile

from tests import nbval_tolerance

# One temporary root per test run, removed when the process that made it ends. pytest-xdist's
# workers (and pytest runs started by tests) inherit it through the environment and take a
# private subfolder each, so nothing piles up in the system temp folder.
_ROOT_VARIABLE = "COURSE_TEST_TMP_ROOT"
if os.environ.get(_ROOT_VARIABLE) and os.path.isdir(os.environ[_ROOT_VARIABLE]):
    _root = pathlib.Path(os.environ[_ROOT_VARIABLE])
else:
    _root = pathlib.Path(tempfile.mkdtemp(prefix="course-test-home-"))
    os.environ[_ROOT_VARIABLE] = str(_root)
    atexit.register(shutil.rmtree, _root, ignore_errors=True)
_home = pathlib.Path(tempfile.mkdtemp(prefix=f"process-{os.getpid()}-", dir=_root))
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
# Every process of the run writes bytecode caches as Python does on a student's or instructor's
# machine. Some machines (this workplace's, where CI runs) set PYTHONDONTWRITEBYTECODE, and then
# each kernel compiled the course's modules again, and each kernel of the student wheel's fresh
# environment (installed --no-compile) compiled torch, IPython and matplotlib: about 5 CPU-s a
# process there, measured. The grading sandbox sets the variable for its kernels itself, and
# reads bytecode the grader compiled (autograder/hidden_cases.kernel_package).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# Two pytest workers share two cores. Kernels with two OpenMP threads each oversubscribe them, and
# OpenMP's spin-waiting then makes small tensor work 20-40x slower; one thread per kernel keeps
# every test's speed independent of what the other worker is doing. Stored outputs must not
# depend on the thread count: `make test` also validates them with 2 threads, which
# COURSE_TEST_THREADS sets (its pass runs two workers).
_threads = os.environ.get("COURSE_TEST_THREADS", "1")
os.environ["OMP_NUM_THREADS"] = _threads
os.environ["MKL_NUM_THREADS"] = _threads
# That 2-thread pass runs beside the grading suite and another worker: threads that spin while
# they wait burn the cores the others need. Waiting passively changes when a thread sleeps, not
# how the work is split, so the numbers stay those of two threads.
if _threads != "1":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

nbval_tolerance.install()


def pytest_report_header(config):
    """Which CPU kernels and how many threads this run used: read first when a number differs."""
    import torch

    forced = os.environ.get("ATEN_CPU_CAPABILITY")
    return (f"torch {torch.__version__}: CPU capability {torch.backends.cpu.get_cpu_capability()}"
            f" ({'forced by ATEN_CPU_CAPABILITY' if forced else 'the machine best'}),"
            f" {_threads} thread(s) per kernel, {os.cpu_count()} cores")
