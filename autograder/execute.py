"""Execute: nbgrader's `Execute` preprocessor, made to survive kernels that misbehave.

Why: plain nbgrader gives up on the whole notebook when a cell times out and the kernel ignores
the interrupt, or when the kernel dies (`os._exit`, a memory bomb, the wall limit). The student's
graded notebook is then dropped and the CSV shows a zero that looks like a real one.

Here a cell that times out, or whose kernel stops answering or dies, gets an error output that
says so in plain words, and every later code cell gets a "not run" error output instead of being
executed. nbgrader's own scoring then does the rest: a test cell with an error output scores zero,
cells that ran before keep their points, and the notebook is saved and graded as usual. The reason
is recorded in the notebook metadata so the worker can list it in problems.csv.

It is also where a test cell is judged: the results a hidden check publishes (a display message
of MIME type `probe.MIME`) are taken off the cell as they arrive and judged in this process
when the cell ends (autograder/judge.py); a failing verdict becomes the cell's first output.
"""
import collections

import zmq
from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Unicode

from course_utils.grading import probe
from course_utils.kernel_messages import ReadsPromptly

from . import judge, routes

BROKEN_KEY = "autograder_stopped"

# Run silently after every graded test cell: a test that passed only because the notebook had
# replaced a comparison or a course check (say `grading.assert_close = lambda *a: None`, which
# the replaced check itself can never notice) gets the TamperError output, so it scores zero.
VERIFY = (
    "import sys as _autograder_sys\n"
    "_autograder_t = _autograder_sys.modules.get('course_utils.grading.tamper')\n"
    "del _autograder_sys\n"
    "if _autograder_t is not None:\n"
    "    _autograder_t, _autograder_v = None, _autograder_t.verify\n"
    "    _autograder_v()\n"
)


def _name(cell, index):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or f"#{index + 1}"


def _error(ename, evalue):
    return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                        traceback=[f"{ename}: {evalue}"])


# What the grader keeps of one cell's output while it runs. Past it, further output is dropped
# as it arrives (so a cell printing 1 GB never costs the worker 1 GB) and one note says so.
# Feedback shows far less (redact.CELL_TEXT); this bound is about the worker's memory.
CELL_OUTPUT_BYTES = 4 * 2**20
# The largest message frame the grader accepts from a kernel. ipykernel sends whatever was
# printed in 0.2 s as one message (hundreds of MB for a print loop), and decoding it costs
# several times its size before any budget can apply: ZMQ refuses bigger frames up front (the
# connection is dropped and re-made, and that output is lost).
MAX_MESSAGE_BYTES = 16 * 2**20
CUT_NOTE = "[output cut: this cell produced more than {:,} bytes of output; the rest was dropped]\n"
# What the grader keeps of the whole notebook's output (printed text, displays, errors, display
# updates, widget messages), whatever the number of cells: 100 cells of 4 MB each cost the worker
# ~1.9 GB before (a notebook is copied several times on its way to the feedback page). The course's
# notebooks hold well under 1 MB of output. Past it, each cell keeps one NOTEBOOK_CUT_NOTE.
NOTEBOOK_OUTPUT_BYTES = 32 * 2**20
NOTEBOOK_CUT_NOTE = ("[output cut: this notebook produced more than {:,} bytes of output in all; "
                     "the rest of this cell's output was dropped]\n")
# An error's message and traceback are kept (the cell must still fail), cut to these lengths.
ERROR_VALUE_CHARS, ERROR_TRACEBACK_CHARS = 10_000, 20_000
# What the grader keeps of one cell's probe messages (results for the judge, never shown). Only
# the messages the cell's source asks for are kept (as many "check" records per exercise as it
# makes check calls, the last "diagnose"); the others are counted, never kept, and a cell's are
# dropped once it has been judged.
PROBE_BYTES = 32 * 2**20


def _size(msg):
    content = msg.get("content", {})
    if msg.get("msg_type") == "stream":
        return len(content.get("text", ""))
    return sum(len(v) if isinstance(v, str) else len(str(v))
               for v in (content.get("data") or {}).values()) + 64


def _stderr_is_not_failure(cell):
    """nbgrader scores a test cell zero when it wrote to stderr (a UserWarning from torch, a
    logging.warning), yet the feedback says every test passed. A test cell's points must depend
    only on whether it raised, so its stderr is kept as ordinary printed text."""
    for output in cell.outputs:
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            output["name"] = "stdout"


def _judged_outputs(cell):
    """A test cell's outputs as nbgrader should score them: an error first (nbgrader stops at
    the first execute_result and reads it as a partial grade, so a student's `sys.displayhook(1)`
    before raising would pass the cell), and no execute_result at all (no course test cell
    gives partial credit; a displayed value is shown as display data)."""
    outputs = []
    for output in cell.outputs:
        if output.get("output_type") == "execute_result":
            output = NotebookNode(output_type="display_data", data=output.get("data", {}),
                                  metadata=output.get("metadata", {}))
        outputs.append(output)
    errors = [o for o in outputs if o.get("output_type") == "error"]
    cell.outputs = errors + [o for o in outputs if o.get("output_type") != "error"]


class _OutputBudget:
    """What the grader keeps of one notebook's output while it runs (see CELL_OUTPUT_BYTES and
    NOTEBOOK_OUTPUT_BYTES): it counts what each cell and the whole notebook sent, says whether a
    message is kept, and leaves one note in a cell where output was cut."""

    def __init__(self):
        self.per_cell = {}  # cell index -> bytes of output it sent
        self.notebook = 0  # bytes of output the whole notebook sent
        self.cut = set()  # the cells that already hold the notebook's note

    def is_full(self):
        return self.notebook > NOTEBOOK_OUTPUT_BYTES

    def over_notebook(self, outs, size, cell_index):
        """Count size against the notebook's budget; True (and one note per cell) when over."""
        self.notebook += size
        if self.notebook <= NOTEBOOK_OUTPUT_BYTES:
            return False
        if cell_index not in self.cut and outs is not None:
            self.cut.add(cell_index)
            outs.append(NotebookNode(output_type="stream", name="stdout",
                                     text=NOTEBOOK_CUT_NOTE.format(NOTEBOOK_OUTPUT_BYTES)))
        return True

    def keeps(self, outs, msg, cell_index):
        """Whether a cell's printed text or display is kept: within its cell's budget and the
        notebook's. The first message over the cell's budget leaves one note."""
        used = self.per_cell.get(cell_index, 0)
        size = _size(msg)
        self.per_cell[cell_index] = used + size
        if used + size <= CELL_OUTPUT_BYTES:
            return not self.over_notebook(outs, size, cell_index)
        if used <= CELL_OUTPUT_BYTES:
            outs.append(NotebookNode(output_type="stream", name="stdout",
                                     text=CUT_NOTE.format(CELL_OUTPUT_BYTES)))
        return False

    def bound_error(self, content):
        """Cut an error's message and traceback (in place) to ERROR_VALUE_CHARS and
        ERROR_TRACEBACK_CHARS, and count them against the notebook's budget."""
        content["evalue"] = str(content.get("evalue", ""))[:ERROR_VALUE_CHARS]
        lines, left = [], ERROR_TRACEBACK_CHARS
        for line in reversed(list(content.get("traceback") or [])[-200:]):
            line = str(line)[-left:] if left > 0 else ""
            if not line:
                break
            lines.insert(0, line)
            left -= len(line)
        content["traceback"] = lines
        self.notebook += len(content["evalue"]) + ERROR_TRACEBACK_CHARS - left


class _ProbeInbox:
    """The probe messages (hidden-check results) kept aside for the judge, cell by cell: only
    what the cell's source asks for (as many "check" records per exercise as it makes check
    calls, plus one without its payload; the last "diagnose"), within PROBE_BYTES per cell."""

    def __init__(self):
        self.kept = {}  # cell index -> the messages kept for the judge
        self.bytes = {}  # cell index -> bytes of payload kept
        self._wanted_by_cell = {}

    def wanted(self, cell_index, source):
        """(topic, {grade_id: number of check calls}) the cell's source asks for, or None."""
        if cell_index not in self._wanted_by_cell:
            wanted = judge.expected(source)
            self._wanted_by_cell[cell_index] = wanted and (
                wanted[0], collections.Counter(judge.CHECKED.findall(source)))
        return self._wanted_by_cell[cell_index]

    def take(self, msg, cell_index, source):
        """True when msg carries hidden-check results: kept aside for the judge if the cell's
        check calls need it, never added to the notebook."""
        data = msg.get("content", {}).get("data")
        if not isinstance(data, dict) or probe.MIME not in data:
            return False
        message = data[probe.MIME]
        wanted = self.wanted(cell_index, source)
        if msg.get("msg_type") != "display_data" or not wanted or not isinstance(message, dict):
            return True
        topic, calls = wanted
        grade_id, mode = message.get("grade_id"), message.get("mode")
        if message.get("topic") != topic or grade_id not in calls or mode not in (probe.CHECK, probe.DIAGNOSE):
            return True  # the judge ignores these: nothing kept
        kept = self.kept.setdefault(cell_index, [])
        same = [m for m in kept if m["grade_id"] == grade_id and m["mode"] == mode]
        if mode == probe.CHECK and len(same) > calls[grade_id]:
            return True  # one record too many is already kept: enough to fail the cell
        # A record past the cell's budget, or one more than the source sends, is kept without
        # its payload: the judge still counts it (too many records fails the cell) or says
        # that the results could not be read.
        stub = {"topic": topic, "grade_id": grade_id, "mode": mode, "records": ""}
        used = self.bytes.get(cell_index, 0)
        size = _size(msg)
        if (mode == probe.CHECK and len(same) == calls[grade_id]) or used + size > PROBE_BYTES:
            message = stub
        else:
            self.bytes[cell_index] = used + size
            message = {"topic": topic, "grade_id": grade_id, "mode": mode,
                       "records": message.get("records", "")}
        if mode == probe.DIAGNOSE:  # the judge reads the last one only
            for old in same:
                kept.remove(old)
                self.bytes[cell_index] -= len(str(old.get("records", "")))
        kept.append(message)
        return True

    def drop(self, cell_index):
        """Forget a cell's messages (once it has been judged)."""
        self.kept.pop(cell_index, None)
        self.bytes.pop(cell_index, None)


class SandboxedExecute(ReadsPromptly, Execute):
    """Execute each cell; after a timeout or a dead kernel, mark the rest as not run. Its output
    is bounded (_OutputBudget), its probe messages kept aside (_ProbeInbox), and each graded
    test cell judged as it ends (_judge). Its kernel client reads every message promptly
    (course_utils/kernel_messages.py: otherwise a cell can wait its whole timeout for a reply
    that has arrived)."""

    hidden_cases = Unicode("", help="The file of hidden-test cases given to the sandbox; test "
                           "cells with a hidden catalogue check are judged against it.").tag(config=True)

    student_id = Unicode("", help="The student whose submission this is: think-first questions "
                         "are judged with that student's numbers.").tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reset_budgets()  # usable from the start, not only once a notebook is preprocessed

    def reset_budgets(self):
        """Empty the output and probe budgets (every notebook starts with the full ones)."""
        self._budget = _OutputBudget()
        self._probes = _ProbeInbox()
        self._routes = None  # the notebook's routes.NotebookReader, made when a test cell is judged

    def _source(self, cell_index):
        return self.nb.cells[cell_index].get("source", "") if self.nb else ""

    def output(self, outs, msg, display_id, cell_index):
        """nbclient's output handler, with a byte budget per cell (see CELL_OUTPUT_BYTES) and
        one for the whole notebook (NOTEBOOK_OUTPUT_BYTES)."""
        msg_type = msg.get("msg_type")
        if msg_type in ("display_data", "update_display_data", "execute_result") and \
                self._probes.take(msg, cell_index, self._source(cell_index)):
            return None
        if msg_type == "error":  # kept (the cell fails), never unbounded
            if self._budget.is_full() and any(o.get("output_type") == "error" for o in outs):
                return None  # one error per cell is enough to fail it
            self._budget.bound_error(msg.get("content", {}))
            return super().output(outs, msg, display_id, cell_index)
        if msg_type not in ("stream", "display_data", "execute_result"):
            return super().output(outs, msg, display_id, cell_index)
        if self._budget.keeps(outs, msg, cell_index):
            return super().output(outs, msg, display_id, cell_index)
        return None

    def _update_display_id(self, display_id, msg):
        """A display update replaces the data of every output with that id (in any cell): it
        counts once per output it would change, and past the notebook's budget it is dropped."""
        data = msg.get("content", {}).get("data")
        if isinstance(data, dict) and probe.MIME in data:
            return None
        targets = sum(len(v) for v in self._display_id_map.get(display_id, {}).values())
        if targets and self._budget.over_notebook(None, _size(msg) * targets, None):
            return None
        return super()._update_display_id(display_id, msg)

    def handle_comm_msg(self, outs, msg, cell_index):
        """Widget messages (their state is saved with the notebook) share the notebook's budget."""
        content = msg.get("content", {})
        size = len(str(content.get("data", ""))[:NOTEBOOK_OUTPUT_BYTES + 1]) + sum(
            len(b) for b in msg.get("buffers") or [])
        if self._budget.over_notebook(None, size, None):
            return None
        return super().handle_comm_msg(outs, msg, cell_index)

    async def async_start_new_kernel_client(self):
        make = self.km.client

        def client(**kw):
            kc = make(**kw)
            kc.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)  # default for its sockets
            return kc
        self.km.client = client
        return await super().async_start_new_kernel_client()

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # the sync path uses this

    async def _check_raise_for_error(self, cell, cell_index, exec_reply):
        # The reply said the cell raised, but no error output arrived (it was lost with an
        # oversized message): the test must still fail.
        content = (exec_reply or {}).get("content", {})
        if content.get("status") == "error" and not any(
                o.get("output_type") == "error" for o in cell.get("outputs", [])):
            cell.outputs.append(_error(str(content.get("ename", "Error"))[:100],
                                       str(content.get("evalue", ""))[:2000]))
        return await super()._check_raise_for_error(cell, cell_index, exec_reply)

    def preprocess(self, nb, resources=None, km=None):
        self._stopped = None
        self.reset_budgets()
        self._cases = judge.Cases(self.hidden_cases) if self.hidden_cases else None
        try:
            nb, resources = super().preprocess(nb, resources, km=km)
        except (DeadKernelError, RuntimeError) as exc:
            # The kernel died while starting or shutting down; keep what ran.
            self.log.error("kernel failure: %r", exc)
            if self._stopped is None:
                self._stopped = f"the kernel stopped ({type(exc).__name__}: {str(exc)[:200]})"
            nb = self.nb
        if self._stopped:
            self._record_the_stop(nb)
        for cell in nb.cells:
            cell.pop("_autograder_seen", None)
        return nb, resources

    def _not_run(self):
        """The output of a code cell that was not run because the notebook stopped."""
        return _error("NotRun", "This cell was not run: " + self._stopped + ".")

    def _record_the_stop(self, nb):
        """Say in the notebook why it stopped (for problems.csv) and mark every code cell it
        never reached as not run (scored zero by nbgrader, as an error output)."""
        nb.metadata[BROKEN_KEY] = self._stopped
        for cell in nb.cells:
            if cell.cell_type == "code" and not cell.get("_autograder_seen"):
                cell.outputs = [self._not_run()]

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if self._stopped:
            cell["_autograder_seen"] = True
            cell.outputs = [self._not_run()]
            return cell, resources
        cell["_autograder_seen"] = True
        try:
            return self._run_cell(cell, resources, index)
        finally:  # a cell's probe messages are not kept past its own judging
            self._probes.drop(index)

    def _run_cell(self, cell, resources, index):
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade") and not meta.get("solution"):
                self._verify_untampered(cell)
                _stderr_is_not_failure(cell)
                self._judge(cell, index)
            return cell, resources
        except CellTimeoutError:
            self._stopped = (f"cell {_name(cell, index)} ran longer than {self.timeout} s and did "
                             "not stop when interrupted")
            cell.outputs.append(_error("Timeout", f"This cell ran longer than {self.timeout} s and "
                                       "did not stop when interrupted; the kernel was stopped."))
        except DeadKernelError:
            self._stopped = (f"the kernel died in cell {_name(cell, index)} (it exited, ran out of "
                             "memory or went over the time limit for the whole notebook)")
            cell.outputs.append(_error("KernelDied", "The kernel died while running this cell "
                                       "(it exited, ran out of memory or went over the time "
                                       "limit for the whole notebook)."))
        return cell, resources

    def _judge(self, cell, index):
        """Put the verdict of the hidden check first among the cell's outputs, or the partial
        score it earns (judge.apply, see judge.py)."""
        sentence = self._verdict(cell, index) if self._cases is not None else None
        _judged_outputs(cell)
        judge.apply(cell, sentence)

    def _verdict(self, cell, index):
        """The judge's sentence for a test cell (None: it stands as the kernel left it): the
        hidden check's results, then the routes the notebook's text shows."""
        failed = any(o.get("output_type") == "error" for o in cell.outputs)
        try:
            sentence = judge.verdict(cell.source, self._probes.kept.get(index, []), failed, self._cases,
                                     self.student_id or None)
            # A forbidden route the notebook's text shows fails the cell whatever the kernel
            # reported (the in-kernel guard cannot see a library call made from a thread).
            return judge.forbidden_route(self.nb.cells, index, cell.source,
                                         reader=self._route_reader()) or sentence
        except Exception as exc:  # noqa: BLE001 - a grader bug must fail loudly, not pass the cell
            self.log.error("judging cell %s failed: %r", _name(cell, index), exc)
            return f"the grader could not judge this cell ({type(exc).__name__}); tell your instructor"

    def _route_reader(self):
        """The notebook's routes.NotebookReader: one per notebook, so that each cell is read once
        whatever the number of test cells after it."""
        if self._routes is None or self._routes.cells is not self.nb.cells:
            self._routes = routes.NotebookReader(self.nb.cells)
        return self._routes

    async def _async_verify(self):
        msg_id = await ensure_async(self.kc.execute(VERIFY, silent=True, store_history=False))
        return await self.async_wait_for_reply(msg_id)

    def _verify_untampered(self, cell):
        reply = run_sync(self._async_verify)()
        content = (reply or {}).get("content", {})
        if content.get("status") == "error" and content.get("ename") == "TamperError":
            if not any(o.get("ename") == "TamperError" for o in cell.outputs):
                cell.outputs.append(_error("TamperError", content.get("evalue", "")))
