"""Execute: nbgrader's `Execute` preprocessor, made to survive kernels that misbehave.

Why: plain nbgrader gives up on the whole notebook when a cell times out and the kernel ignores
the interrupt, or when the kernel dies (`os._exit`, a memory bomb, the wall limit). The student's
graded notebook is then dropped and the CSV shows a zero that looks like a real one.

Here a cell that times out, or whose kernel stops answering or dies, gets an error output that
says so in plain words, and every later code cell gets a "not run" error output instead of being
executed. nbgrader's own scoring then does the rest: a test cell with an error output scores zero,
cells that ran before keep their points, and the notebook is saved and graded as usual. The reason
is recorded in the notebook metadata so the worker can list it in problems.csv.
"""
from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute

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


class SandboxedExecute(Execute):
    """Execute each cell; after a timeout or a dead kernel, mark the rest as not run."""

    def preprocess(self, nb, resources=None, km=None):
        self._stopped = None
        try:
            nb, resources = super().preprocess(nb, resources, km=km)
        except (DeadKernelError, RuntimeError) as exc:
            # The kernel died while starting or shutting down; keep what ran.
            self.log.error("kernel failure: %r", exc)
            if self._stopped is None:
                self._stopped = f"the kernel stopped ({type(exc).__name__}: {str(exc)[:200]})"
            nb = self.nb
        if self._stopped:
            nb.metadata[BROKEN_KEY] = self._stopped
            for cell in nb.cells:
                if cell.cell_type == "code" and not cell.get("_autograder_seen"):
                    cell.outputs = [_error("NotRun", "This cell was not run: " + self._stopped + ".")]
        for cell in nb.cells:
            cell.pop("_autograder_seen", None)
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if self._stopped:
            cell["_autograder_seen"] = True
            cell.outputs = [_error("NotRun", "This cell was not run: " + self._stopped + ".")]
            return cell, resources
        cell["_autograder_seen"] = True
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade") and not meta.get("solution"):
                self._verify_untampered(cell)
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

    async def _async_verify(self):
        msg_id = await ensure_async(self.kc.execute(VERIFY, silent=True, store_history=False))
        return await self.async_wait_for_reply(msg_id)

    def _verify_untampered(self, cell):
        reply = run_sync(self._async_verify)()
        content = (reply or {}).get("content", {})
        if content.get("status") == "error" and content.get("ename") == "TamperError":
            if not any(o.get("ename") == "TamperError" for o in cell.outputs):
                cell.outputs.append(_error("TamperError", content.get("evalue", "")))
