"""A small training loop with a progress bar, shared by the notebooks that train a model."""
import contextlib
import functools
import io
import multiprocessing
import os
import pickle
import sys
import threading
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed

import torch
from tqdm.auto import tqdm

from course_utils import optim


@contextlib.contextmanager
def one_thread():
    """Run on one CPU thread, restoring the setting afterwards; usable as `with one_thread():` or
    as a decorator `@one_thread()`. The course's tensors are small, so one thread is as fast (and
    far faster on a busy machine), and results cannot depend on how many cores there are."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def in_parallel(tasks, workers=2, models=None, stop=None, description=None):
    """Run zero-argument callables (each trains one small model, say) `workers` at a time and
    return their results in the order of `tasks`.

    Each task runs on one PyTorch thread, so it computes exactly what it would alone: build seeded
    models before, not inside, the tasks (building one draws from the global random numbers).

    `models`, if given, lists for each task the modules it trains in place (a module, a list of
    modules, or None). It lets the tasks run in forked copies of this process (Linux), where two
    tasks on two cores take the time of one; with threads they take 0.6 to 0.75 of the time of both,
    because Python runs one thread at a time between PyTorch's operations. A worker sends back the
    task's result (pickled), what it printed (printed here when it ends) and the trained weights of
    its modules, which are loaded into the modules here; a module of the task's inside the result
    comes back as the module here, not as a copy. A task whose result cannot be pickled (a lambda in
    it, say) runs again here, on this thread. Without `models`, or where forking is not possible,
    the tasks run on threads; `stop`, a threading.Event, is then set on an error or an interrupt so
    that tasks that watch it end early. Progress bars (`progress`) are silent in a forked worker:
    with a `description`, one bar here counts the tasks as they end.

    Either way the global random numbers are left as they were. If a task fails, the error is
    raised here and the tasks still running or queued are stopped.
    """
    tasks = list(tasks)
    if grading():
        # A grader's container has half a CPU and a memory cap: forked copies of the kernel would
        # gain no speed there and would double its memory (08's solution was OOM-killed at 768 MB).
        # One at a time, on a thread, the results are the same.
        workers = 1
    if models is not None and len(models) != len(tasks):
        raise ValueError(f"{len(tasks)} tasks but {len(models)} entries in models")
    bar = progress(total=len(tasks), desc=description, disable=description is None, unit="runs")
    with bar, torch.random.fork_rng(devices=[]), one_thread():
        if models is not None and workers > 1 and len(tasks) > 1 and _can_fork():
            try:
                return _in_processes(tasks, [_as_modules(m) for m in models], workers, bar)
            except _ForkRefused:
                pass  # the system allows no more processes (a sandbox's limit): threads instead
        return _in_threads(tasks, workers, stop or threading.Event(), bar)


def _can_fork():
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def _as_modules(entry):
    if entry is None:
        return []
    return [entry] if isinstance(entry, torch.nn.Module) else list(entry)


def _in_threads(tasks, workers, stop, bar):
    def run(index):
        result = _on_one_thread(tasks[index])
        bar.update(1)
        return result

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(run, index) for index in range(len(tasks))]
        try:
            return [future.result() for future in futures]
        except BaseException:
            stop.set()
            for future in futures:
                future.cancel()
            raise


def _on_one_thread(task):
    # OpenMP, under torch.set_num_threads, may keep the setting per thread: set it in each worker too.
    torch.set_num_threads(1)
    return task()


class _ForkRefused(Exception):
    pass


# The tasks and modules of the in_parallel running now: forked workers inherit them, so nothing of
# a task (a closure over the student's functions, say) is pickled; only its index goes to a worker.
_PENDING = None
_IN_WORKER = False  # True in a forked worker: progress bars stay silent there


class _ModulePickler(pickle.Pickler):
    """Pickles a task's own modules as their index in the task's list, so that they come back as
    the parent's modules."""

    def __init__(self, file, modules):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._index = {id(module): i for i, module in enumerate(modules)}

    def persistent_id(self, obj):
        return self._index.get(id(obj)) if isinstance(obj, torch.nn.Module) else None


class _ModuleUnpickler(pickle.Unpickler):
    def __init__(self, file, modules):
        super().__init__(file)
        self._modules = modules

    def persistent_load(self, index):
        return self._modules[index]


def _run_in_worker(index):
    """In a forked worker: run task `index` and return, pickled, what the parent needs to have the
    same outcome: the result, the modules' weights and train/eval modes, and what was printed."""
    global _IN_WORKER
    _IN_WORKER = True
    torch.set_num_threads(1)
    task, modules = _PENDING[0][index], _PENDING[1][index]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        result = task()
    states = [(module.state_dict(), [sub.training for sub in module.modules()]) for module in modules]
    buffer = io.BytesIO()
    try:
        _ModulePickler(buffer, modules).dump((result, states, printed.getvalue()))
    except (pickle.PicklingError, TypeError, AttributeError):
        return None  # the parent runs this task itself
    return buffer.getvalue()


def _receive(payload, modules):
    result, states, printed = _ModuleUnpickler(io.BytesIO(payload), modules).load()
    for module, (state, modes) in zip(modules, states):
        module.load_state_dict(state)
        for sub, training in zip(module.modules(), modes):
            sub.training = training
    if printed:
        print(printed, end="")
    return result


def _in_processes(tasks, modules, workers, bar):
    global _PENDING
    _PENDING = (tasks, modules)
    pool = None
    try:
        try:
            with warnings.catch_warnings():  # Python >= 3.12 warns about forking a process with threads
                warnings.simplefilter("ignore", DeprecationWarning)
                pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)),
                                           mp_context=multiprocessing.get_context("fork"))
                futures = {pool.submit(_run_in_worker, i): i for i in range(len(tasks))}
        except OSError as error:
            raise _ForkRefused() from error
        results, unsent = [None] * len(tasks), []
        for future in as_completed(futures):
            index = futures[future]
            payload = future.result()
            if payload is None:
                unsent.append(index)
                continue
            results[index] = _receive(payload, modules[index])
            bar.update(1)
        for index in sorted(unsent):
            results[index] = _on_one_thread(tasks[index])
            bar.update(1)
        return results
    except BaseException:
        if pool is not None:
            for process in list(getattr(pool, "_processes", {}).values()):
                process.terminate()  # an interrupted cell stops at once, not when the runs end
        raise
    finally:
        _PENDING = None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def grading():
    """True while nbgrader executes the notebook: train only as much as the tests need."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def progress(iterable=None, **kwargs):
    """tqdm's bar: a notebook widget in JupyterLab that turns into one line of text when it is
    done (see `_notebook_bar`), plain text in a terminal."""
    kwargs.setdefault("leave", False)
    kwargs.setdefault("mininterval", 0.5)
    kwargs.setdefault("unit", "steps")
    if _IN_WORKER:  # a forked worker must not write to the notebook's channels
        kwargs["disable"] = True
    bar = None if kwargs.get("disable") else _notebook_bar()
    return (bar or tqdm)(iterable, **kwargs)


@functools.cache
def _notebook_bar():
    """In a notebook kernel, tqdm's widget bar shown through a display handle: when it closes, the
    output becomes one line of text ("training: 150 steps"). Why: a closed widget left in the
    output shows "Error displaying widget: model not found" once the notebook is saved and opened
    again. The line is in the output from the start (next to the widget), so a frontend without
    widgets, and nbval, which ignores display updates, see the same text. None outside a notebook."""
    try:
        from tqdm.notebook import tqdm as notebook_tqdm
    except ImportError:  # pragma: no cover - ipywidgets ships with the course
        return None
    if not issubclass(tqdm, notebook_tqdm):
        return None

    class NotebookBar(tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["display"] = False
            super().__init__(*args, **kwargs)
            from IPython.display import display
            self._line = f"{self.desc or 'progress'}: {self.total} {self.unit}" if self.total else (self.desc or "progress")
            view = {"model_id": self.container.model_id, "version_major": 2, "version_minor": 0}
            self._handle = display({"application/vnd.jupyter.widget-view+json": view, "text/plain": self._line},
                                   raw=True, display_id=True)
            self.displayed = True

        def close(self):
            handle, self._handle = getattr(self, "_handle", None), None
            super().close()
            if handle is not None:
                handle.update({"text/plain": self._line}, raw=True)

    return NotebookBar


def train(model, batches, loss_fn, optimizer, steps, description="training"):
    """Run `steps` optimisation steps over an endless iterator of (inputs, targets) batches.

    Returns the list of losses (floats). The model is left in training mode.
    """
    model.train()
    losses = []
    bar = progress(range(steps), desc=description)
    for _ in bar:
        inputs, targets = next(batches)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if len(losses) % 20 == 0:
            bar.set_postfix(loss=f"{sum(losses[-20:]) / 20:.3f}")
    return losses


def fit_and_evaluate(model, steps, batches, loss_fn, optimizer, evaluate=None, eval_every=0, stop_at=None,
                     learning_rate=None, description="training"):
    """Train for `steps` steps, measuring as it goes; the loop of notebooks 04 and 10's date models.

    `batches` is an endless iterator of tuples and `loss_fn(model, *batch)` the loss of one batch.
    `learning_rate(step)`, if given, sets the optimiser's learning rate before step 1, 2, ...
    Every `eval_every` steps, and after the last, `evaluate(model)` (in eval mode) gives a score;
    with `stop_at`, training stops at the first score that reaches it (`steps` is then a cap).
    Returns the history: lists "step", "seconds" (training time so far, evaluations excluded) and
    "accuracy" (the scores), "loss" (one per step), and "total_seconds". The model ends in eval mode.

    The seconds are this thread's CPU time: with PyTorch on one thread (as the course runs these
    models) that is the training's own time, which a busy machine or a second training on the other
    core (`in_parallel`) inflates far less than the wall clock (by about a fifth, measured on two cores).
    """
    history = {"step": [], "seconds": [], "accuracy": [], "loss": []}
    seconds = 0.0
    bar = progress(range(1, steps + 1), desc=description)
    for step in bar:
        start = time.thread_time()
        model.train()
        if learning_rate is not None:
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step)
        loss = loss_fn(model, *next(batches))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seconds += time.thread_time() - start
        history["loss"].append(loss.item())
        if evaluate is not None and eval_every and (step % eval_every == 0 or step == steps):
            model.eval()
            history["step"].append(step)
            history["seconds"].append(seconds)
            history["accuracy"].append(evaluate(model))
            if hasattr(bar, "set_postfix"):
                bar.set_postfix(loss=f"{loss.item():.3f}", exact=f"{history['accuracy'][-1]:.2f}")
            if stop_at is not None and history["accuracy"][-1] >= stop_at:
                break
    if hasattr(bar, "close"):
        bar.close()
    model.eval()
    history["total_seconds"] = seconds
    return history


# --------------------------------------------------------------------------- next-character LMs
# Notebooks 08 and 11 both train a small language model on the course's generated text: one loop
# serves both, whatever the model (08's CharLM, 11's DecoderLM).

class LMRun:
    """A trained next-character model: the model, its vocabulary, the per-step training losses,
    and the encoded training and held-out texts (1-D long tensors)."""

    def __init__(self, model, vocab, losses, train_ids, held_out_ids):
        self.model, self.vocab, self.losses = model, vocab, losses
        self.train_ids, self.held_out_ids = train_ids, held_out_ids


def text_batch(ids, batch_size, context, generator):
    """Random windows of `ids`: inputs (B, context) and the same windows shifted by one."""
    starts = torch.randint(0, len(ids) - context - 1, (batch_size,), generator=generator).tolist()
    return (torch.stack([ids[s:s + context] for s in starts]),
            torch.stack([ids[s + 1:s + context + 1] for s in starts]))


@one_thread()
def train_next_char(make_model, steps, context, batch_size, lr, seed=0, text=None, progress=None):
    """Train `make_model(vocab_size)` with Adam to predict the next character of `text` (the
    course's generated text by default), the last 10% held out. `progress`, if given, wraps the
    range of steps. Seeded: the same arguments give the same model and losses. Returns an LMRun."""
    from course_utils.data.text import Vocabulary, make_text

    text = make_text() if text is None else text
    vocab = Vocabulary(text)
    ids = torch.tensor(vocab.encode(text))
    split = int(0.9 * len(ids))
    train_ids, held_out_ids = ids[:split], ids[split:]
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = make_model(len(vocab))
    optimizer = optim.Adam(model.parameters(), lr=lr)
    losses = []
    model.train()
    for _ in (progress or (lambda r: r))(range(steps)):
        x, y = text_batch(train_ids, batch_size, context, generator)
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return LMRun(model, vocab, losses, train_ids, held_out_ids)


@one_thread()
@torch.no_grad()
def held_out_loss(run, n_batches=8, batch_size=32, seed=1):
    """Mean cross-entropy (nats per character) on windows of the held-out text."""
    generator = torch.Generator().manual_seed(seed)
    total = 0.0
    for _ in range(n_batches):
        x, y = text_batch(run.held_out_ids, batch_size, run.model.context, generator)
        total += torch.nn.functional.cross_entropy(run.model(x).flatten(0, 1), y.flatten()).item()
    return total / n_batches
