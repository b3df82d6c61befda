"""A small training loop with a progress bar, shared by the notebooks that train a model."""
import contextlib
import os

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
