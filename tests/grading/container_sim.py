"""A platform's grading container, simulated on this machine (tests and benchmarks only).

Gradescope and PrairieLearn run the grader as root in Docker: Docker's default capabilities (no
CAP_SYS_ADMIN, so bubblewrap cannot create namespaces) and the platform's limits (Gradescope by
default ½ vCPU and 768 MB; PrairieLearn 0.9 CPU and 2 GiB). Here a command gets the same:
`setpriv --bounding-set` drops every capability Docker does not grant, and a fresh cgroup (v1 or
v2, whichever this machine mounts) holds its memory and CPU quota. The cgroup also says what the
command used at its peak and whether the kernel's OOM killer struck.
"""
import os
import pathlib
import subprocess
import uuid

DOCKER_CAPS = ("-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+setpcap,"
               "+net_bind_service,+net_raw,+sys_chroot,+mknod,+audit_write,+setfcap")
GRADESCOPE = {"memory_mb": 768, "cpus": 0.5}
PRAIRIELEARN = {"memory_mb": 2048, "cpus": 0.9}
ROOT = pathlib.Path("/sys/fs/cgroup")
PERIOD_US = 100_000


def why_not():
    """None when a container can be simulated here, else a sentence."""
    if os.geteuid() != 0:
        return "needs root"
    if subprocess.run(["setpriv", f"--bounding-set={DOCKER_CAPS}", "--", "true"],
                      capture_output=True).returncode != 0:
        return "setpriv cannot set a capability bounding set here"
    if not ((ROOT / "memory").is_dir() or (ROOT / "cgroup.controllers").exists()):
        return "no cgroup memory controller is mounted"
    return None


class Container:
    """`with Container(memory_mb=768, cpus=0.5) as c: c.run(argv, ...)`; then c.peak_mb, c.oom_kills."""

    def __init__(self, memory_mb=None, cpus=None):
        self.memory_mb, self.cpus = memory_mb, cpus
        self.name = "course-sim-" + uuid.uuid4().hex[:8]
        self.v2 = not (ROOT / "memory").is_dir()
        self.peak_mb = self.oom_kills = None

    def _dirs(self):
        if self.v2:
            return {"memory": ROOT / self.name, "cpu": ROOT / self.name}
        return {"memory": ROOT / "memory" / self.name, "cpu": ROOT / "cpu" / self.name}

    def __enter__(self):
        dirs = self._dirs()
        for d in set(dirs.values()):
            d.mkdir()
        mem, cpu = dirs["memory"], dirs["cpu"]
        limit = self.memory_mb * 2**20 if self.memory_mb else None
        if self.v2:
            if limit:
                (mem / "memory.max").write_text(str(limit))
                (mem / "memory.swap.max").write_text("0")
            if self.cpus:
                (cpu / "cpu.max").write_text(f"{int(self.cpus * PERIOD_US)} {PERIOD_US}")
        else:
            if limit:
                (mem / "memory.limit_in_bytes").write_text(str(limit))
                sw = mem / "memory.memsw.limit_in_bytes"
                if sw.exists():
                    sw.write_text(str(limit))  # no swap beyond the limit, as in the platform
            if self.cpus:
                (cpu / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (cpu / "cpu.cfs_quota_us").write_text(str(int(self.cpus * PERIOD_US)))
        return self

    def run(self, argv, **kwargs):
        """Run argv as the platform would: in this cgroup, under Docker's capabilities."""
        procs = " ".join(str(d / "cgroup.procs") for d in set(self._dirs().values()))
        shell = f'for f in {procs}; do echo $$ > "$f"; done; exec "$@"'
        return subprocess.run(["sh", "-c", shell, "sh", "setpriv", f"--bounding-set={DOCKER_CAPS}", "--",
                               *argv], **kwargs)

    def __exit__(self, *exc):
        mem = self._dirs()["memory"]
        try:
            if self.v2:
                peak = mem / "memory.peak"
                self.peak_mb = int(peak.read_text()) / 2**20 if peak.exists() else None
                events = dict(line.split() for line in (mem / "memory.events").read_text().splitlines())
                self.oom_kills = int(events.get("oom_kill", 0))
            else:
                self.peak_mb = int((mem / "memory.max_usage_in_bytes").read_text()) / 2**20
                control = dict(line.split() for line in (mem / "memory.oom_control").read_text().splitlines())
                self.oom_kills = int(control.get("oom_kill", 0))
        except (OSError, ValueError):
            pass
        for d in set(self._dirs().values()):
            try:
                d.rmdir()
            except OSError:
                pass
        return False
