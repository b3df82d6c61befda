"""Notebook 09's figure (issue 12): the ViT trained from the student's own code.

The student's code is the solution notebook's answer cells (patchify, patch_embedding,
prepend_class_token, vit_forward), run as the notebook runs them: checked by
`vit_model.check_parts`, assembled by `vit_model.assemble`, trained with the notebook's settings
(690 steps, one thread). The library's own TinyViT is trained on the same seeds beside it.
Prints held-out accuracy per seed, mean, spread and seconds; figures, never pass/fail.

    python bench/topic_vision_transformer.py [--seeds 5] [--no-library]
"""
import argparse
import pathlib
import time

import nbformat
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course_utils.data import digits
from course_utils.models import vit_model

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "solutions" / "09_vision_transformer" / "vision_transformer.ipynb"
GOAL = 0.98  # issue 12: the ViT from the student's code reaches >= 0.98 held-out accuracy


def solution_functions():
    """The four answer cells of the solution notebook, run in a fresh namespace like a notebook's."""
    wanted = {f"vision_transformer_{name}" for name in ("patchify", "patch_embedding", "class_token", "forward")}
    namespace = {"__name__": "__main__", "torch": torch, "nn": nn, "F": F, "np": np}
    for cell in nbformat.read(NOTEBOOK, as_version=4).cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in wanted:
            exec(compile(cell.source, f"{NOTEBOOK.name}:{cell.metadata.nbgrader.grade_id}", "exec"), namespace)
    return {name: namespace.get(name) for name in vit_model.PARTS}


def train(seeds, data, checks=None, functions=None):
    """Held-out accuracy and training seconds per seed of the assembled ViT (library's if no functions)."""
    x_train, y_train, x_test, y_test = data
    rows = []
    for seed in seeds:
        if functions is None:
            model = vit_model.make_model("ViT", seed=seed)
        else:
            model, _ = vit_model.assemble(seed=seed, checks=checks, **functions)
        run = vit_model.train_classifier(model, x_train, y_train, seed=seed, show_progress=False,
                                         **vit_model.SETTINGS["ViT"])
        rows.append((seed, vit_model.accuracy(model, x_test, y_test), run["seconds"], run["steps"]))
        print(f"  seed {seed}: held-out accuracy {rows[-1][1]:.4f}, {run['seconds']:.1f} s ({run['steps']} steps)",
              flush=True)
    accuracies, seconds = np.array([r[1] for r in rows]), np.array([r[2] for r in rows])
    print(f"  mean {accuracies.mean():.4f}, standard deviation {accuracies.std(ddof=1):.4f}, "
          f"from {accuracies.min():.4f} to {accuracies.max():.4f}; "
          f"training {seconds.mean():.1f} s per seed ({seconds.min():.1f} to {seconds.max():.1f} s, one thread)")
    return accuracies


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--no-library", action="store_true", help="skip the library's TinyViT")
    args = parser.parse_args()
    seeds = range(args.seeds)
    data = digits.load_digits(upsample=2)
    functions = solution_functions()
    start = time.perf_counter()
    checks = vit_model.check_parts(**functions)
    print(f"checking the four functions: {time.perf_counter() - start:.2f} s")
    print(vit_model.describe_parts(checks, functions))
    print(f"the ViT from the solution's code, {args.seeds} seeds:")
    ours = train(seeds, data, checks, functions)
    print(f"  goal >= {GOAL}: mean {'meets' if ours.mean() >= GOAL else 'misses'} it; "
          f"{int((ours >= GOAL).sum())} of {len(ours)} seeds reach it")
    if not args.no_library:
        print(f"the library's TinyViT (conv patch embedding, run_vit), the same {args.seeds} seeds:")
        library = train(seeds, data)
        print(f"  largest difference between the two on one seed: {np.abs(ours - library).max():.4f}")


if __name__ == "__main__":
    main()
