"""The two exceptions a test cell can raise, and how a notebook shows them.

A failed check is a `GradingError`: one sentence, in a student's words, about *their* code.
In JupyterLab the error is shown as that sentence alone; a traceback through course internals
would only bury it. nbgrader still sees an error output, so the cell scores zero as it should.
"""
from .ipython_hooks import running_shell


class GradingError(AssertionError):
    """A check failed; the message says what is wrong and, where known, why."""


class TamperError(GradingError):
    """The notebook replaced something the tests rely on (a comparison function, a course check)."""


def _show_only_the_message(shell, etype, value, tb, tb_offset=None):
    """IPython custom-exception handler: an error output whose traceback is the message alone."""
    stb = [f"\x1b[0;31m{etype.__name__}\x1b[0m: {value}"]
    shell._showtraceback(etype, value, stb)
    return stb


NOT_ANSWERED = ("not answered yet: a function this cell calls still raises NotImplementedError; "
                "replace `raise NotImplementedError()` with your code.")


def _show_stub_in_one_line(shell, etype, value, tb, tb_offset=None):
    """A bare NotImplementedError is an exercise still to write (the release's stubs raise it):
    one line that says so, not a traceback through the test cell. With a message of its own
    (a student's deliberate raise) it shows as IPython always shows it."""
    if str(value).strip():
        return shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    stb = [f"\x1b[0;31m{etype.__name__}\x1b[0m: {NOT_ANSWERED}"]
    shell._showtraceback(etype, value, stb)
    return stb


def _custom_display(shell, etype, value, tb, tb_offset=None):
    if issubclass(etype, GradingError):
        return _show_only_the_message(shell, etype, value, tb, tb_offset)
    return _show_stub_in_one_line(shell, etype, value, tb, tb_offset)


def install_notebook_display():
    """In an IPython kernel, show grading errors, and the stubs' bare NotImplementedError, as one
    sentence. Elsewhere, do nothing."""
    shell = running_shell()
    if shell is None or not hasattr(shell, "_showtraceback"):
        return False
    shell.set_custom_exc((GradingError, NotImplementedError), _custom_display)
    return True
