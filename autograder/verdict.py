"""The solution check's verdict, kept so that it is paid for once, not by every batch.

Why: before grading anyone, the batch grades the assignment's own solution in the sandbox and
refuses unless it scores full marks (batch.Batch.check_solution). On a real notebook that is a
whole notebook run, paid again by every rerun of `make grade`, every Gradescope or PrairieLearn
upload and many grading tests. A verdict depends only on what `key` hashes; when none of it
changed, running the check again can only give the same answer.

What the key holds: the check task's fingerprint (the solution's source, the hidden cases, the
limits), the grader's own code and the course_utils the kernels import, the Python and every
installed package (torch and nbgrader among them), how student code is isolated, the family of
numerical kernels PyTorch runs on this CPU (a verdict from AVX2 kernels says nothing about
AVX-512 ones) and whether an environment failure refuses the batch.

What is kept: only a full-marks verdict, as `<folder>/<assignment>/<key>.json` holding the key,
the time and the score (and, beside the assignments' folders, `cpu-<fingerprint>.json`: which
kernel family PyTorch picks on this CPU, so that a batch need not import PyTorch to ask). A
refusal is never written, so it is checked again every time. An entry that cannot be read, or
says anything else, is ignored. The folder must be one no student code can reach:
`private_folder` refuses one the sandbox mounts, and makes it readable by its owner only (the
privilege drop's student uid then cannot open it).
"""
import functools
import hashlib
import json
import os
import platform
import sys
import tempfile
import time

ENV_VAR = "AUTOGRADER_VERDICT_CACHE"  # a folder several batches share (`--verdict-cache`)
_GRADER = os.path.dirname(os.path.abspath(__file__))
_MOUNTED = ("/usr", "/etc", "/bin", "/lib", "/lib64", "/sbin")  # what bwrap binds besides the prefixes


def chosen_folder(given, default):
    """The folder the verdicts live in: the option, else the environment variable, else default."""
    return given or os.environ.get(ENV_VAR) or default


def private_folder(path):
    """(the folder, made and readable by its owner only; None) or (None, why it cannot be used)."""
    real = os.path.realpath(path)
    mounted = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, *_MOUNTED)}
    if any(real == m or real.startswith(m.rstrip(os.sep) + os.sep) for m in mounted):
        return None, f"{path} is inside a folder the sandbox shows to student code"
    try:
        os.makedirs(real, mode=0o700, exist_ok=True)
        os.chmod(real, 0o700)
    except OSError as exc:
        return None, f"{path} cannot be made private ({exc.strerror or exc})"
    return real, None


def key(task, *, isolation, strict, course_utils, folder=None):
    """A hash of everything the verdict of the solution check `task` depends on. `folder`, the
    verdicts' folder, also keeps what `cpu_key` found (see there)."""
    parts = {"task": task["fingerprint"], "code": code_key(course_utils), "packages": packages_key(),
             "isolation": isolation or "none", "cpu": cpu_key(folder), "strict": bool(strict)}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def source_files(folder):
    """Every file under folder that is not a cache (__pycache__, .pyc, checkpoints)."""
    return [os.path.join(d, f) for d, dirs, files in os.walk(folder) for f in files
            if "__pycache__" not in d and ".ipynb_checkpoints" not in d and not f.endswith(".pyc")]


def code_key(course_utils):
    """A hash of the code a grading runs besides the packages: this grader's modules and the
    course_utils the tests import (its reference holds the judge's catalogue)."""
    h = hashlib.sha256()
    for folder, only in ((_GRADER, ".py"), (course_utils, "")):
        for path in sorted(p for p in source_files(folder) if p.endswith(only)):
            h.update(os.path.relpath(path, folder).encode())
            with open(path, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def packages_key():
    """A hash of the Python and the installed packages (torch, nbgrader, numpy, ...)."""
    import sysconfig
    from importlib import metadata
    # The environment's own site-packages, not sys.path: importing nbgrader puts setuptools'
    # vendored packages on sys.path, which would change the key within one run.
    where = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    packages = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions(path=where))
    return hashlib.sha256(json.dumps([sys.version, os.path.realpath(sys.prefix), packages]).encode()).hexdigest()


def cpu_key(folder=None):
    """The machine and the family of numerical kernels PyTorch dispatches to on it (DEFAULT,
    AVX2, AVX512, ...: the CPU's capability, or ATEN_CPU_CAPABILITY when set): what decides a
    computation's last bits. Not the CPU's full list of flags: Gradescope builds the image on one
    machine and grades on others, and a verdict warmed at build time must survive that whenever
    the kernels are the same (the stored outputs are checked on each family in `make test`).

    Only PyTorch can say which family it picks, and importing it costs a batch 1.4 CPU-s and
    210 MB (measured) before any student is graded. With a `folder` (the verdicts' own, private one)
    the answer is kept there under what PyTorch's choice depends on (`_cpu_fingerprint`), and a
    later batch on the same CPU, variable and PyTorch reads it instead of importing PyTorch."""
    fingerprint = _cpu_fingerprint(os.environ.get("ATEN_CPU_CAPABILITY", ""))
    path = os.path.join(folder, f"cpu-{fingerprint}.json") if folder and fingerprint else None
    if path:
        try:
            with open(path) as fh:
                kept = json.load(fh)
            if isinstance(kept, dict) and kept.get("fingerprint") == fingerprint and isinstance(kept.get("cpu"), str):
                return kept["cpu"]
        except (OSError, ValueError):
            pass  # none kept yet, or unreadable: ask PyTorch
    import torch
    # The variable too: the kernels inherit it, whatever this process's torch chose at import.
    found = json.dumps([platform.machine(), torch.backends.cpu.get_cpu_capability(),
                        os.environ.get("ATEN_CPU_CAPABILITY", "")])
    if path:
        _write_atomically(path, {"fingerprint": fingerprint, "cpu": found})
    return found


@functools.lru_cache(maxsize=None)
def _cpu_fingerprint(capability_variable):
    """A hash of what PyTorch's choice of kernels depends on: the CPU's model and its flags as
    Linux reports them, the machine, ATEN_CPU_CAPABILITY (`capability_variable`), and which
    PyTorch (its version and where it is installed); computed once per process and variable, not
    once per assignment. None where there is no /proc/cpuinfo to read, or no PyTorch: then
    nothing is kept, and PyTorch is asked every time."""
    from importlib import metadata, util
    try:
        with open("/proc/cpuinfo") as fh:
            lines = [line.strip() for line in fh if line.startswith(("model name", "flags", "Features", "CPU part"))]
        spec = util.find_spec("torch")
        torch_version = metadata.version("torch")
    except (OSError, ValueError, ImportError, metadata.PackageNotFoundError):
        return None
    if not lines or spec is None or not spec.origin:
        return None
    parts = [platform.machine(), sorted(set(lines)), capability_variable, torch_version,
             os.path.realpath(spec.origin)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def _path(folder, assignment, verdict_key):
    return os.path.join(folder, assignment, verdict_key + ".json")


def reused(folder, assignment, verdict_key):
    """The kept full-marks verdict ({key, assignment, time, score, max_score}) or None: none
    kept, or one that cannot be read or does not say full marks for this key."""
    try:
        with open(_path(folder, assignment, verdict_key)) as fh:
            kept = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != verdict_key or kept.get("assignment") != assignment:
        return None
    score, full = kept.get("score"), kept.get("max_score")
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (score, full))
    if not numbers or not full > 0 or score != full or not isinstance(kept.get("time"), str):
        return None
    return kept


def keep(folder, assignment, verdict_key, score, max_score):
    """Write a full-marks verdict (anything else is refused: ValueError). Written to a temporary
    name and renamed, so a reader never sees half a file; a failure to write only means no reuse."""
    if not (max_score > 0 and score == max_score):
        raise ValueError(f"only a full-marks verdict is kept, not {score}/{max_score}")
    entry = {"key": verdict_key, "assignment": assignment,
             "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
             "score": score, "max_score": max_score}
    return _write_atomically(_path(folder, assignment, verdict_key), entry)


def _write_atomically(path, entry):
    """Write `entry` as JSON to a temporary name beside `path` and rename it: a reader never sees
    half a file. False when it cannot be written (then nothing is reused, nothing breaks)."""
    where = os.path.dirname(path)
    tmp = None
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".new-", dir=where)
        with os.fdopen(fd, "w") as fh:
            json.dump(entry, fh)
        os.replace(tmp, path)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp:
            os.unlink(tmp)
