"""Kernel messages are read promptly (course_utils/kernel_messages.py): the client polls in short
slices, so a message whose wake-up was lost is read when a slice ends, not when the cell's whole
timeout does; and every nbclient the course runs (the grader's, Validate's, the test runner's)
polls so."""
import asyncio
import os
import time
from queue import Empty

import nbformat
import pytest

from course_utils import kernel_messages


class LostWakeUp:
    """A channel's get_msg whose poll is never woken: it notices a message only when its own
    timeout ends (as pyzmq does once a wake-up is lost), and it never ends without one."""

    def __init__(self, ready_on_call):
        self.ready_on_call = ready_on_call  # the message is there from this call on (1-based)
        self.timeouts = []

    async def get_msg(self, timeout=None):
        self.timeouts.append(timeout)
        if timeout is None:  # an endless poll whose wake-up was lost: it would never return
            raise AssertionError("get_msg was asked to wait without end")
        await asyncio.sleep(timeout)
        if len(self.timeouts) >= self.ready_on_call:
            return {"msg_type": "execute_reply"}
        raise Empty


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_a_stranded_message_is_read_when_a_slice_ends(timeout):
    channel = LostWakeUp(ready_on_call=3)
    get_msg = kernel_messages.sliced(channel.get_msg, slice_seconds=0.01)
    assert asyncio.run(get_msg(timeout=timeout)) == {"msg_type": "execute_reply"}
    assert len(channel.timeouts) == 3, channel.timeouts
    assert all(t is not None and 0 <= t <= 0.01 for t in channel.timeouts), channel.timeouts


def test_a_blocking_clients_get_msg_is_sliced_too():
    """A NotebookClient given a (blocking) KernelManager gets a client whose get_msg is plain."""
    calls = []

    def get_msg(timeout=None):
        calls.append(timeout)
        if len(calls) < 3:
            raise Empty
        return {"msg_type": "kernel_info_reply"}

    assert asyncio.run(kernel_messages.sliced(get_msg, slice_seconds=0.01)(timeout=30)) == {"msg_type": "kernel_info_reply"}
    assert len(calls) == 3 and all(t <= 0.01 for t in calls), calls


def test_without_a_message_it_raises_empty_once_the_timeout_has_passed():
    channel = LostWakeUp(ready_on_call=10**9)
    get_msg = kernel_messages.sliced(channel.get_msg, slice_seconds=0.01)
    started = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(get_msg(timeout=0.05))
    assert time.monotonic() - started >= 0.05  # not before the deadline
    assert len(channel.timeouts) >= 2 and all(t <= 0.01 for t in channel.timeouts), channel.timeouts


def test_a_timeout_of_zero_is_one_look():
    channel = LostWakeUp(ready_on_call=10**9)
    with pytest.raises(Empty):
        asyncio.run(kernel_messages.sliced(channel.get_msg, slice_seconds=0.01)(timeout=0))
    assert channel.timeouts == [0.0]


def test_cancelling_the_wait_stops_it():
    """nbclient cancels its IOPub wait (asyncio.wait_for): the slices must not swallow that."""
    channel = LostWakeUp(ready_on_call=10**9)
    get_msg = kernel_messages.sliced(channel.get_msg, slice_seconds=0.01)

    async def cancelled():
        return await asyncio.wait_for(get_msg(timeout=None), 0.05)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(cancelled())


class FakeClient:
    def __init__(self):
        self.shell_channel, self.iopub_channel = LostWakeUp(1), LostWakeUp(1)


def test_read_promptly_slices_both_channels_once():
    kc = FakeClient()
    assert not kernel_messages.reads_promptly(kc)
    kernel_messages.read_promptly(kc)
    assert kernel_messages.reads_promptly(kc)
    once = kc.shell_channel.get_msg
    kernel_messages.read_promptly(kc)
    assert kc.shell_channel.get_msg is once  # not wrapped twice


@pytest.mark.slow
def test_a_real_kernel_client_of_notebook_client_reads_promptly():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    client = kernel_messages.notebook_client(nb, timeout=60, kernel_name="python3")
    with client.setup_kernel():
        assert kernel_messages.reads_promptly(client.kc)
        client.execute_cell(nb.cells[0], 0)
    assert nb.cells[0].outputs[0]["text"] == "42\n"


@pytest.mark.slow
def test_the_test_runner_runs_a_notebook_on_its_own_kernel_manager(tmp_path):
    """tests/run_notebook.py hands nbclient a blocking KernelManager over IPC sockets, as the
    student wheel's test does, and shuts that kernel down at the end."""
    from tests import run_notebook

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os; print(os.getpid())")])
    run_notebook.execute(nb, tmp_path, timeout=60)
    pid = int(nb.cells[0].outputs[0]["text"])
    deadline = time.monotonic() + 30  # the kernel was asked to stop; allow it to finish exiting
    while not _reaped(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _reaped(pid), "the kernel outlived the run"


def _reaped(pid):
    """The kernel (a child of this process, started by its KernelManager) exited and was waited for."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_grader_executes_with_it():
    from autograder.execute import SandboxedExecute

    assert issubclass(SandboxedExecute, kernel_messages.ReadsPromptly)


@pytest.mark.slow
def test_validate_executes_with_it(tmp_path, monkeypatch):
    from nbgrader.validator import Validator

    from course_utils import validation
    validation.install()
    clients = []
    original = kernel_messages.read_promptly
    monkeypatch.setattr(kernel_messages, "read_promptly", lambda kc: clients.append(original(kc)) or kc)
    path = tmp_path / "one.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    Validator().validate(str(path))
    assert len(clients) == 1 and kernel_messages.reads_promptly(clients[0])
