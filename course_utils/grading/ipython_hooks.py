"""The student's IPython shell, and the course's hooks in it, in one place.

Why: three helpers act on the kernel a notebook runs in. The progress table records every cell's
outcome when the cell ends (`progress.install`), grading errors show as one sentence
(`errors.install_notebook_display`), and `parts.use_correct` gives a student's own pieces back
when the cell ends. Each has to find the shell, do nothing outside IPython (a plain script, the
course's tests, the grader's own process), and register its hook once, however often a cell
that calls it is run again. That is this module's job, so the helpers only say what to hook.

A hook is registered under a name: registering the same name again (a cell run twice, a module
reloaded with a new function) leaves exactly one callback, the newest.
"""

_REGISTRY = "_course_cell_end_hooks"  # on the shell: {name: callback} of the hooks added here
CELL_END = "post_run_cell"


def running_shell():
    """The IPython shell this code runs in, or None outside IPython (or in a shell without events)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with the course
        return None
    shell = get_ipython()
    return shell if shell is not None and hasattr(shell, "events") else None


def _hooks(shell):
    hooks = getattr(shell, _REGISTRY, None)
    if hooks is None:
        hooks = {}
        setattr(shell, _REGISTRY, hooks)
    return hooks


def _remove(shell, callback):
    if callback in shell.events.callbacks[CELL_END]:
        shell.events.unregister(CELL_END, callback)


def on_cell_end(name, callback):
    """Call `callback(result)` when each cell ends, from now on; once, whatever the number of calls
    with this `name`. True when it is registered, False outside IPython (then nothing happens)."""
    shell = running_shell()
    if shell is None:
        return False
    hooks = _hooks(shell)
    previous = hooks.get(name)
    if previous is not None and previous is not callback:
        _remove(shell, previous)
    if callback not in shell.events.callbacks[CELL_END]:
        shell.events.register(CELL_END, callback)
    hooks[name] = callback
    return True


def remove_cell_end(name):
    """Stop the hook registered as `name` (if any). False outside IPython."""
    shell = running_shell()
    if shell is None:
        return False
    callback = _hooks(shell).pop(name, None)
    if callback is not None:
        _remove(shell, callback)
    return True
