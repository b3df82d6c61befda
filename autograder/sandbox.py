"""Isolate: every student's kernel runs in a bubblewrap sandbox, as an unprivileged user.

Why this shape:
- nbgrader starts kernels as the grader's own user in the grader's working directory, so one
  submission could overwrite the gradebook, read `solutions/` or other students' work, or kill the
  batch. Here the kernelspec's argv is this file, run as a plain script (stdlib only, so it starts
  in milliseconds and needs no import path). It builds a bubblewrap command and `exec`s it.
- The sandbox is an allow-list, not a deny-list: a fresh root holding only /usr, /etc, the Python
  installation, the virtual environment and the installed `course_utils` package, all read-only;
  a private tmpfs `/tmp`; a private, size-limited tmpfs at the notebook's path holding a copy
  of the student's submission (so nbgrader's own output files are never reachable from the
  kernel, even by a symlink, and writing gigabytes fills only that tmpfs, never the grader's
  disk); and the folder of the kernel's ZMQ `ipc` sockets (the network is unshared, so TCP to
  the grader is impossible by design). Nothing else of the course exists inside.
- bwrap runs as root (it needs to read the Python under root's mode-700 home, and to bind
  mounts), then `setpriv` drops to a per-slot uid (60000 + slot) with no capabilities, an empty
  bounding set and no_new_privs, *before* any student code runs. Running bwrap as root without
  dropping was shown to let code escape (remount `/` read-write). Distinct uids per parallel slot
  keep one student's process limit and signals away from the other's.
- Limits: `prlimit` address space (a clean MemoryError), process count, file size, open files,
  no core dumps; `timeout -s KILL` bounds the whole notebook (wall limit). `--unshare-pid` plus
  `--die-with-parent` makes every descendant die with the kernel, and PR_SET_PDEATHSIG ties the
  whole chain to the grading worker, so nothing outlives it. The kernel inherits no grader
  descriptor: 0-2 are /dev/null and every other is closed before bwrap starts.

Where bubblewrap cannot start (Gradescope's and PrairieLearn's Docker containers: no
CAP_SYS_ADMIN, so no namespaces), the same launcher runs the kernel with the privilege drop alone
(spec mode "drop", `drop_command`): `timeout`, `prlimit`, then `setpriv` to the slot's uid with no
groups, no capabilities and no_new_privs, an empty environment and a working folder of its own.
Without a mount namespace the kernel sees the real file system, so the grader first makes what
the student must not read unreadable to that uid (`harden_course`), keeps its own folders mode
700, and after every notebook kills every process of the uid (`kill_user`) before it reads or
writes a result. Student code never runs as root on either path.

Configuration comes from the environment variable AUTOGRADER_SANDBOX (JSON), set by the worker
for each student; bwrap's `--clearenv` (or `env -i`) keeps the grader's environment out of the kernel.
"""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time

ENV_VAR = "AUTOGRADER_SANDBOX"
CONNECTION_FILE_INSIDE = "/tmp/.kernel-connection.json"
UID_BASE = 60000
# The privilege drop's uids: a range of their own, because `kill_user` kills every process of a
# uid, and must never reach a bubblewrap kernel of another grader on the same machine.
DROP_UID_BASE = 61000


DROP_BLOCK = 64  # uids a grader claims at once (slots 1..63)
_claimed = {"base": DROP_UID_BASE, "lock": None}


def claim_drop_uids():
    """Claim a block of the privilege drop's uids for this process's life (an flock held until
    it exits): two fallback graders on one machine (two containers sharing the host's process
    table, two benchmarks) then never kill each other's kernels. Returns the block's base."""
    import fcntl
    if _claimed["lock"] is not None:
        return _claimed["base"]
    folder = "/run" if os.path.isdir("/run") and os.access("/run", os.W_OK) else "/tmp"
    for n in range(256):
        path = os.path.join(folder, f".autograder-drop-{n}.lock")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            continue
        if os.fstat(fd).st_uid != os.geteuid():  # someone else's file: not ours to trust
            os.close(fd)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _claimed.update(base=DROP_UID_BASE + n * DROP_BLOCK, lock=fd)
        return _claimed["base"]
    raise RuntimeError("no block of uids for the privilege drop is free (256 graders at once?)")


def slot_uid(slot, isolation="bwrap"):
    """The uid of a grading slot's kernel (slots count from 1): the sandbox's 60000 + slot, or
    the privilege drop's, in the block this process claimed (claim_drop_uids)."""
    return (_claimed["base"] if isolation == "drop" else UID_BASE) + slot


def _ancestors(path):
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


def open_scratch(scratch):
    """(folders, [(fd, path)]) of the scratch copy, relative to it, for bwrap's --dir/--file."""
    dirs, files = [], []
    for root, subdirs, names in os.walk(scratch):
        subdirs.sort()
        rel_root = os.path.relpath(root, scratch)
        if rel_root != ".":
            dirs.append(rel_root)
        for name in sorted(names):
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                files.append((os.open(path, os.O_RDONLY), os.path.normpath(os.path.join(rel_root, name))))
    return dirs, files


def bwrap_command(spec, connection_fd, kernel_args=(), command=None, scratch_dirs=(),
                  scratch_files=()):
    """The full argv (timeout, bwrap, prlimit, setpriv, python) for one kernel.

    spec keys: python (venv python path), ro_paths (list), scratch (host dir), workdir (path
    the scratch appears at, the kernel's cwd), socket_dir (rw), uid, memory_bytes, nproc,
    fsize_bytes, tmp_bytes, wall_seconds, env (dict), pythonpath (list), and optionally
    scratch_bytes: then workdir is a tmpfs of that size holding a copy of scratch_files
    (open fds, see open_scratch) instead of a read-write bind of the host scratch folder.
    """
    argv = ["timeout", "-s", "KILL", str(int(spec["wall_seconds"])), "bwrap",
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--hostname", "sandbox"]
    for top in ("/usr", "/etc"):
        argv += ["--ro-bind", top, top]
    for link in ("/bin", "/lib", "/lib64", "/sbin", "/lib32", "/libx32"):
        if os.path.islink(link):
            argv += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            argv += ["--ro-bind", link, link]
    argv += ["--dev", "/dev", "--proc", "/proc",
             "--size", str(int(spec["tmp_bytes"])), "--perms", "1777", "--tmpfs", "/tmp"]
    made = set()
    mounts = [(p, "--ro-bind") for p in spec["ro_paths"]]
    mounts += [(spec["socket_dir"], "--bind")]
    overlays = [(src, dest) for src, dest in spec.get("ro_binds", [])]
    for path, _ in mounts + [(dest, "") for _, dest in overlays] + [(spec["workdir"], "")]:
        for parent in _ancestors(path):
            if parent not in made and parent not in ("/usr", "/etc", "/tmp", "/dev", "/proc"):
                made.add(parent)
                argv += ["--perms", "0755", "--dir", parent]
    for path, how in mounts:
        argv += [how, path, path]
    # After the trees they may sit in: a mount over a path hides what was bound there before.
    for src, dest in overlays:
        argv += ["--ro-bind", src, dest]
    if spec.get("scratch_bytes"):
        # A private tmpfs of bounded size holds a copy of the submission: what the kernel writes
        # can fill only that (never the grader's disk), and it vanishes with the sandbox.
        argv += ["--size", str(int(spec["scratch_bytes"])), "--perms", "0777", "--tmpfs",
                 spec["workdir"]]
        for rel in scratch_dirs:
            argv += ["--perms", "0777", "--dir", os.path.join(spec["workdir"], rel)]
        for fd, rel in scratch_files:
            argv += ["--perms", "0666", "--file", str(fd), os.path.join(spec["workdir"], rel)]
        argv += ["--chdir", spec["workdir"]]
    else:
        argv += ["--bind", spec["scratch"], spec["workdir"], "--chdir", spec["workdir"]]
    # The connection file is root's (mode 0600): pass its content, opened before dropping.
    argv += ["--perms", "0444", "--ro-bind-data", str(connection_fd), CONNECTION_FILE_INSIDE]
    argv += ["--perms", "0777", "--dir", "/tmp/home"]
    argv += ["--clearenv"]
    env = dict(spec["env"])
    env["PYTHONPATH"] = os.pathsep.join(spec["pythonpath"])
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, str(value)]
    argv += _limits_and_drop(spec)
    if command is not None:  # for tests: run this instead of the kernel
        return argv + list(command)
    argv += [spec["python"], "-m", "ipykernel_launcher", "-f", CONNECTION_FILE_INSIDE]
    argv += [_stream_hook()] + list(kernel_args)
    return argv


def _limits_and_drop(spec):
    """prlimit's limits, then setpriv's drop to the slot's uid: the tail of both commands."""
    uid = int(spec["uid"])
    return (["prlimit", f"--as={int(spec['memory_bytes'])}", f"--nproc={int(spec['nproc'])}",
             f"--fsize={int(spec['fsize_bytes'])}", "--nofile=256", "--core=0", "--"]
            + ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
               "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"])


def drop_command(spec, connection_path, kernel_args=(), command=None):
    """The argv (timeout, prlimit, setpriv, env -i, python) of a kernel where bubblewrap cannot
    start: no namespaces, only the unprivileged uid, the limits and an empty environment. The
    caller chdirs to spec["workdir"], a folder owned by that uid."""
    env = dict(spec["env"])
    env["PYTHONPATH"] = os.pathsep.join(spec["pythonpath"])
    argv = ["timeout", "-s", "KILL", str(int(spec["wall_seconds"]))] + _limits_and_drop(spec)
    argv += ["env", "-i"] + [f"{k}={v}" for k, v in sorted(env.items())]
    if command is not None:  # for tests: run this instead of the kernel
        return argv + list(command)
    return argv + [spec["python"], "-m", "ipykernel_launcher", "-f", connection_path,
                   _stream_hook()] + list(kernel_args)


def why_no_drop(python=sys.executable):
    """None when the privilege drop can run here (root, with setpriv, prlimit and timeout, allowed
    to change uid, and the course's Python startable by that uid), else a sentence saying why not."""
    if os.name != "posix" or not sys.platform.startswith("linux"):
        return "dropping privileges needs Linux"
    for tool in ("setpriv", "prlimit", "timeout"):
        if shutil.which(tool) is None:
            return f"the '{tool}' program is not installed (util-linux / coreutils)"
    if os.geteuid() != 0:
        return "the grader must run as root to run student code as an unprivileged user"
    probe = subprocess.run(["setpriv", f"--reuid={DROP_UID_BASE}", f"--regid={DROP_UID_BASE}", "--clear-groups",
                            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", "id", "-u"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0 or probe.stdout.strip() != str(DROP_UID_BASE):
        return "setpriv cannot drop to an unprivileged user here: " + (probe.stderr.strip() or "unknown error")
    return None


def user_processes(uid):
    """PIDs of the live (not zombie) processes whose real or effective uid is `uid`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except (OSError, ValueError):
            continue
        uids = fields.get("Uid", "").split()
        if fields.get("State", "").strip().startswith("Z") or len(uids) < 2:
            continue
        if str(uid) in uids[:2]:
            found.append(int(name))
    return found


def kill_user(uid, attempts=50):
    """SIGKILL every process of `uid` (daemons, forks that left the kernel's group, anything
    waiting to rewrite a result), until none is left. kill(-1) from a process of that uid reaches
    exactly its processes; a fork racing it is caught by the next round (RLIMIT_NPROC bounds
    them). Returns how many rounds found processes; raises RuntimeError if some survive."""
    if os.geteuid() != 0:
        return 0
    rounds = 0
    for _ in range(attempts):
        if not user_processes(uid):
            return rounds
        rounds += 1
        subprocess.run([sys.executable, "-I", "-S", "-c", "import os, signal; os.kill(-1, signal.SIGKILL)"],
                       user=uid, group=uid, extra_groups=[], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, check=False)
        time.sleep(0.05)
    left = user_processes(uid)
    if left:
        raise RuntimeError(f"processes of uid {uid} survived {attempts} rounds of SIGKILL: {left[:10]}")
    return rounds


def harden_course(course_root, keep=()):
    """Make the course unreadable to the student's uid where no namespace can hide it: the course
    folder itself becomes 0711 (traversable, not listable), and every entry in it but the ones
    the kernel needs (the released notebooks, the virtual environment, pyproject.toml, README.md
    and course_utils, whose reference/ also becomes 0700) loses its permissions for group and
    others. `keep` adds top-level names to leave readable (the Python environment, when it lies
    inside). Root (the grader) still reads everything. Returns the paths made private."""
    course_root = os.path.abspath(course_root)
    readable = {"notebooks", "course_utils", "pyproject.toml", "README.md", *keep}
    private = []
    os.chmod(course_root, os.stat(course_root).st_mode & 0o7700 | 0o711)
    for name in sorted(os.listdir(course_root)):
        path = os.path.join(course_root, name)
        if name not in readable and not os.path.islink(path):
            os.chmod(path, os.stat(path).st_mode & 0o7700)
            private.append(path)
    secret = os.path.join(course_root, "course_utils", "reference")
    if os.path.isdir(secret):
        os.chmod(secret, 0o700)
        private.append(secret)
    return private


def top_names_holding(course_root, paths):
    """The top-level names of course_root under which any of `paths` lies (say, the venv)."""
    root = os.path.realpath(course_root) + os.sep
    names = set()
    for path in paths:
        real = os.path.realpath(path)
        if real.startswith(root):
            names.add(real[len(root):].split(os.sep, 1)[0])
    return names


def _stream_hook():
    """The kernel option that runs kernel_stream.py at start-up, in its own namespace."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel_stream.py")) as fh:
        source = fh.read()
    line = f"exec(compile({source!r}, 'autograder-kernel-stream', 'exec'), {{}})"
    return "--IPKernelApp.exec_lines=" + json.dumps([line])


def why_unavailable():
    """None when the sandbox can run here, else a sentence saying why not."""
    if os.name != "posix" or not sys.platform.startswith("linux"):
        return "bubblewrap sandboxing needs Linux"
    for tool in ("bwrap", "setpriv", "prlimit", "timeout"):
        if shutil.which(tool) is None:
            hint = " (Debian/Ubuntu: apt-get install bubblewrap)" if tool == "bwrap" else ""
            return f"the '{tool}' program is not installed{hint}"
    if os.geteuid() != 0:
        return ("the grader must run as root so that bubblewrap can mount the sandbox and then "
                "drop student code to an unprivileged user")
    probe = subprocess.run(
        ["bwrap", "--unshare-pid", "--unshare-net", "--die-with-parent", "--ro-bind", "/", "/",
         "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
         "setpriv", f"--reuid={UID_BASE}", f"--regid={UID_BASE}", "--clear-groups",
         "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", "true"],
        capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return "bubblewrap cannot create a sandbox here: " + (probe.stderr.strip() or "unknown error")
    return None


def _die_with_parent():
    """Ask the kernel to SIGKILL this process when the grading worker dies (survives exec)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except OSError:  # pragma: no cover
        pass


def _no_grader_descriptors():
    """stdin/stdout/stderr become /dev/null and nothing else is inherited: the kernel must not
    hold the grading worker's log (it could truncate or forge it) or any other grader file."""
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    os.closerange(3, 65536)


def _launch_dropped(spec, connection_file, kernel_args):
    """The kernel as the slot's uid, without namespaces: its connection file copied (root's is
    mode 0600) into its own folder, its working folder that uid's."""
    uid = int(spec["uid"])
    with open(connection_file, "rb") as fh:
        data = fh.read()
    inside = os.path.join(spec["private_dir"], "kernel-connection.json")
    fd = os.open(inside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o400)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chown(inside, uid, uid)
    os.chdir(spec["workdir"])
    command = drop_command(spec, inside, kernel_args)
    _die_with_parent()
    os.execvp(command[0], command)


def launch(argv):
    """Kernelspec entry point: `sandbox.py CONNECTION_FILE [kernel args...]`."""
    if len(argv) < 1:
        sys.exit("usage: sandbox.py CONNECTION_FILE [kernel args]")
    spec = json.loads(os.environ[ENV_VAR])
    _no_grader_descriptors()
    if spec.get("mode") == "drop":
        _launch_dropped(spec, argv[0], argv[1:])
    fd = os.open(argv[0], os.O_RDONLY)
    os.set_inheritable(fd, True)
    dirs, files = open_scratch(spec["scratch"]) if spec.get("scratch_bytes") else ([], [])
    for file_fd, _ in files:
        os.set_inheritable(file_fd, True)
    command = bwrap_command(spec, fd, argv[1:], scratch_dirs=dirs, scratch_files=files)
    _die_with_parent()
    os.execvp(command[0], command)


if __name__ == "__main__":
    launch(sys.argv[1:])
