"""Notebook 08's figure (issue 12): the character LM built from the student's block (here the
solution's: the notebook's own answer cells, run as a student's would be) against the same LM
built from PyTorch's `nn.TransformerEncoderLayer`, for the same number of steps, on several seeds.

The goal: the same held-out loss, within 0.05 nats per character. With one seed both start from the
same weights and see the same batches, so the gap is down to the two implementations' arithmetic.
Prints the losses per seed, their mean and spread, and the training seconds (figures, never a
pass/fail: timings depend on the machine and its load).

    .venv/bin/python bench/topic_masking_transformer.py [--seeds 5] [--steps 200]
"""
import argparse
import pathlib
import time

import nbformat
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "solutions" / "08_masking_transformer" / "masking_transformer.ipynb"
# The notebook's settings (its training cell).
SETTINGS = dict(context=32, batch_size=16, d_model=32, num_heads=2, num_layers=2, d_ff=64, lr=5e-3)


def solution_answers(path=NOTEBOOK):
    """The notebook's setup cell and answer cells, run in a fresh namespace named __main__ (as in a
    kernel): the student's functions as the solution writes them."""
    namespace = {"__name__": "__main__"}
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("grade_id", "").endswith("_setup") or meta.get("solution")):
            exec(compile(cell.source, f"{path.name}:{meta['grade_id']}", "exec"), namespace)
    return namespace


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    from course_utils.models.tiny_lm import choose_parts
    from course_utils.widgets import masking_transformer as demo

    answers = solution_answers()
    parts = choose_parts(causal_mask=answers["causal_mask"], masked_softmax=answers["masked_softmax"],
                         block=answers["TransformerBlock"])
    print(parts.sentence)
    if len(parts.yours) != 3:
        print("the solution's parts do not all pass their checks: nothing to compare")
        return
    rows = []
    for seed in range(args.seeds):
        row = []
        for chosen in (parts, None):
            start = time.perf_counter()
            run = demo.train_char_lm(steps=args.steps, seed=seed, parts=chosen, **SETTINGS)
            row += [demo.held_out_loss(run), time.perf_counter() - start]
        rows.append(row)
    rows = np.array(rows)
    print(f"held-out loss after {args.steps} steps (nats per character), {args.seeds} seeds; one seed = the same "
          "start and batches for both")
    print("seed   solution's block   seconds   nn.TransformerEncoderLayer   seconds   gap")
    for seed, (yours, yours_s, library, library_s) in enumerate(rows):
        gap = round(yours - library, 4) + 0.0  # + 0.0: no "-0.0000"
        print(f"{seed:4d}   {yours:16.4f}   {yours_s:7.2f}   {library:26.4f}   {library_s:7.2f}   {gap:+.4f}")
    yours, library = rows[:, 0], rows[:, 2]
    print(f"mean   {yours.mean():16.4f}   {rows[:, 1].mean():7.2f}   {library.mean():26.4f}   "
          f"{rows[:, 3].mean():7.2f}   {round(yours.mean() - library.mean(), 4) + 0.0:+.4f}")
    print(f"spread over the seeds (max - min): solution's {np.ptp(yours):.4f}, PyTorch's {np.ptp(library):.4f}; "
          f"standard deviation: {yours.std(ddof=1):.4f}, {library.std(ddof=1):.4f}")
    gap = np.abs(yours - library).max()
    print(f"largest gap on one seed: {gap:.4f} nats per character "
          f"(goal: <= 0.05: {'met' if gap <= 0.05 else 'NOT met'}); "
          f"gap of the means: {abs(yours.mean() - library.mean()):.4f}")


if __name__ == "__main__":
    main()
