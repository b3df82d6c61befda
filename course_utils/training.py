"""A small training loop with a progress bar, shared by the notebooks that train a model."""
import contextlib
import os
import time
from concurrent.futures import ThreadPoolExecutor

import torch
from tqdm.auto import tqdm


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


def in_parallel(tasks, workers=2):
    """Run zero-argument callables (each trains one small model, say) on `workers` threads and
    return their results in the order of `tasks`.

    Each task runs on one PyTorch thread, so a task computes exactly what it would alone: build
    seeded models before, not inside, the tasks (the global random numbers are shared). PyTorch
    releases Python's lock inside its operations, so two small trainings on two cores finish in
    about 0.6-0.75 of the time one after the other. If one task fails, the others still queued
    are cancelled and the error is raised.
    """
    with one_thread(), ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(_on_one_thread, task) for task in tasks]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def _on_one_thread(task):
    # OpenMP, under torch.set_num_threads, may keep the setting per thread: set it in each worker too.
    torch.set_num_threads(1)
    return task()


def grading():
    """True while nbgrader executes the notebook: train only as much as the tests need."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def progress(iterable=None, **kwargs):
    """tqdm's bar: a notebook widget in JupyterLab, plain text in a terminal or under nbval."""
    kwargs.setdefault("leave", False)
    kwargs.setdefault("mininterval", 0.5)
    return tqdm(iterable, **kwargs)


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
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
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
