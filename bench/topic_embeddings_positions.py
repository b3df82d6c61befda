"""Notebook 03's extrapolation experiment, trained longer than the notebook does: does more
training bring the trained A closer to the rotation R_-1 and the unseen positions with it?

The notebook trains 300 steps on ten seeds; here 300, 1000 and 3000 steps on the same seeds.
Figures only, never pass/fail.
"""
import time

import numpy as np

from course_utils.widgets import embeddings_positions as demo

SEEDS = range(10)


def main():
    print("03 embeddings_positions: previous-position task, trained on 1-31, tested on 32-63 (of 64 candidates)")
    for steps in (300, 1000, 3000):
        start = time.process_time()
        runs = demo.extrapolation_runs(("learned", "sinusoidal"), seeds=SEEDS, d_model=16, train_len=32,
                                       total_len=64, steps=steps)
        for kind, results in runs.items():
            right = [sum(r["test_correct"]) for r in results]
            off = [r["off_block_share"] for r in results]
            print(f"  {steps:5d} steps, {kind:10s}: unseen right of 32 per seed {right}; mean {np.mean(right) / 32:.1%}"
                  f" [{min(right) / 32:.1%}, {max(right) / 32:.1%}]; A's weight off R_-1's blocks {np.mean(off):.0%}")
        print(f"  ({steps} steps: CPU time {time.process_time() - start:.1f} s)")


if __name__ == "__main__":
    main()
