"""Lock: one grader per output folder.

Why: two graders on the same --out share `.work/` and delete each other's working folders
(each clears a student's shard before grading it), so grades silently go missing. The first
grader holds an exclusive flock on `DIR/.work/lock` until it exits (the kernel releases it even
if the grader is killed); a second one is refused at once with a clear message.
"""
import fcntl
import os


class Busy(Exception):
    """Another grader is using this output folder."""


def hold(out):
    """Take the lock of output folder `out`; returns the open file (keep it open), or raises Busy."""
    work = os.path.join(os.path.abspath(out), ".work")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "lock")
    fh = open(path, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        who = fh.read().strip()
        fh.close()
        raise Busy(f"another grader is already writing to {os.path.abspath(out)}"
                   + (f" ({who})" if who else "") + "; wait for it to finish or use another --out")
    fh.seek(0)
    fh.truncate()
    fh.write(f"process {os.getpid()}\n")
    fh.flush()
    return fh
