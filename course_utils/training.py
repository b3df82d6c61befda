"""A small training loop with a progress bar, shared by the notebooks that train a model."""
import os

from tqdm.auto import tqdm


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
