"""The two exceptions a test cell can raise, and how a notebook shows them.

A failed check is a `GradingError`: one sentence, in a student's words, about *their* code.
In JupyterLab the error is shown as that sentence alone; a traceback through course internals
would only bury it. nbgrader still sees an error output, so the cell scores zero as it should.
"""


class GradingError(AssertionError):
    """A check failed; the message says what is wrong and, where known, why."""


class TamperError(GradingError):
    """The notebook replaced something the tests rely on (a comparison function, a course check)."""


def _show_only_the_message(shell, etype, value, tb, tb_offset=None):
    """IPython custom-exception handler: an error output whose traceback is the message alone."""
    stb = [f"\x1b[0;31m{etype.__name__}\x1b[0m: {value}"]
    shell._showtraceback(etype, value, stb)
    return stb


def install_notebook_display():
    """In an IPython kernel, show grading errors as one sentence. Elsewhere, do nothing."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with the course
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "_showtraceback"):
        return False
    shell.set_custom_exc((GradingError,), _show_only_the_message)
    return True
