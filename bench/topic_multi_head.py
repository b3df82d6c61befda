"""Notebook 07's comparison, trained longer than fits the notebook: is one head merely slower?

The notebook trains one head and three heads of the same width for 500 steps on three seeds.
Here the single head trains ten times longer on the same seeds, and its held-out accuracy per
relation is printed every 500 steps, with the CPU time it took. Figures only, never pass/fail.
"""
import time

from course_utils.data import relations
from course_utils.widgets import multi_head as demo

STEPS, EVERY, SEEDS = 5000, 500, (0, 1, 2)


def main():
    print(f"07 multi_head: one head (d_k = 48) trained {STEPS} steps, accuracy on 1000 new sequences")
    print("  seed   step   " + "  ".join(f"{r:>8s}" for r in relations.RELATIONS))
    for seed in SEEDS:
        start = time.process_time()
        _, _, curve = demo.train_relation_model(steps=STEPS, num_heads=1, d_model=48, seed=seed, eval_every=EVERY)
        for step, accuracy in curve:
            if step == 1:
                continue
            print(f"  {seed:4d}  {step:5d}   " + "  ".join(f"{accuracy[r]:8.3f}" for r in relations.RELATIONS))
        reached = demo.first_step_reaching(curve, 0.99)
        print(f"  seed {seed}: every relation >= 99 % at some step measured: {reached is not None}; "
              f"CPU time {time.process_time() - start:.1f} s")


if __name__ == "__main__":
    main()
