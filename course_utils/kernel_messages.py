"""Read every message a kernel sends as soon as it is there, even when nbclient was not woken for it.

Why: nbclient (under nbgrader's autograde and Validate, `jupyter execute`, our test runner) waits
for a cell's reply and outputs with asyncio polls of the kernel's shell and IOPub sockets, and
pyzmq wakes those polls through an edge-triggered descriptor (`ZMQ_FD`). Some wake-ups are lost:
nbclient's stand-in for an ipywidgets `Output` sends comm messages on the shell socket while the
cell runs, and every notebook of the course has such a widget. A message whose wake-up is lost
sits in the socket, unread, until the poll's own timeout makes pyzmq look again: the whole cell
timeout. Measured in the grader (`--timeout 120`, two jobs): in each of three gradings of twelve
untouched notebook 10s, one waited 119.8 s after its widget cell for a reply whose timestamp was
119.8 s older; the Gradescope runs of notebook 15 (60 s per cell) took 103 s and 109 s where
others took 44 s.

The cure does not depend on which send swallowed which edge: poll in short slices. A slice that
ends re-reads the socket's state (pyzmq's `poll(0)`), so a stranded message is read within one
slice. With slices of 0.5 s, messages read only as a slice ended showed up on both sockets (an
`execute_reply`, `display_data`); with slices of 0.25 s the twelve notebooks were graded twice
without a wait, in 75 s and 65 s instead of 165 s to 170 s.

`read_promptly(kc)` does this to a kernel client's shell and IOPub channels; `ReadsPromptly` is a
mixin for an nbclient `NotebookClient` (nbgrader's `Execute` is one) that applies it to the client
it starts; `notebook_client(...)` is nbclient's `NotebookClient` with the mixin.
"""
import time
from queue import Empty

from jupyter_core.utils import ensure_async, run_sync

SLICE_SECONDS = 0.25
_MARK = "_course_reads_promptly"


def sliced(get_msg, slice_seconds=SLICE_SECONDS):
    """An async `get_msg(timeout=None)` that calls the channel's own `get_msg` (a coroutine's, or
    a blocking client's plain one) with at most `slice_seconds` at a time until a message comes
    (returned) or `timeout` passes (queue.Empty, as the channel raises it). `timeout=None` waits
    without end, slice after slice."""
    async def get_msg_in_slices(timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = slice_seconds if deadline is None else deadline - time.monotonic()
            try:
                return await ensure_async(get_msg(timeout=max(0.0, min(slice_seconds, left))))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
    setattr(get_msg_in_slices, _MARK, True)
    return get_msg_in_slices


def read_promptly(kc, slice_seconds=SLICE_SECONDS):
    """Make the shell and IOPub channels of kernel client `kc` poll in slices (see above);
    applying it twice changes nothing. Returns kc."""
    for channel in (kc.shell_channel, kc.iopub_channel):
        if not getattr(channel.get_msg, _MARK, False):
            channel.get_msg = sliced(channel.get_msg, slice_seconds)
    return kc


def reads_promptly(kc):
    """True when both channels of `kc` poll in slices."""
    return all(getattr(channel.get_msg, _MARK, False) for channel in (kc.shell_channel, kc.iopub_channel))


class ReadsPromptly:
    """Mixin for an nbclient NotebookClient subclass: the kernel client it starts reads promptly.
    Put it first among the bases."""

    async def async_start_new_kernel_client(self):
        return read_promptly(await super().async_start_new_kernel_client())

    start_new_kernel_client = run_sync(async_start_new_kernel_client)


def notebook_client(nb, **options):
    """nbclient's NotebookClient(nb, **options), reading promptly."""
    from nbclient import NotebookClient

    class PromptNotebookClient(ReadsPromptly, NotebookClient):
        pass

    return PromptNotebookClient(nb, **options)
