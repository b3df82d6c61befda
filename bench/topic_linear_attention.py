"""Notebook 15's figures, measured outside the notebook (figures only, never pass/fail).

The notebook's configuration (`course_utils.linear_attention.Config()`), each mixer (softmax,
linear attention, delta rule) trained over three seeds on the same data and budget:

* the recall table: accuracy on held-out sequences, mixer x number of pairs, mean [min, max]
  over the seeds;
* the claims the notebook makes, each with its smallest margin over seeds and pair counts:
  softmax recalls (nearly) everything; linear attention falls well below it at the largest
  count; the delta rule recalls more than linear attention at every count past the smallest;
* the memory a generating model keeps, measured by running a trained model token by token
  (`RecallModel.generate`) at several lengths, next to the formula;
* the CPU seconds of the training.

`--seeds N` measures seeds 0 ... N - 1. `--every-capability` runs the measurement again in fresh
processes on PyTorch's kernels for other CPUs (ATEN_CPU_CAPABILITY=default, avx2, and this
machine's own) and prints their margins side by side.
"""
import json
import sys

import torch

from kernel_families import results_on_each_family  # bench/ is on the path: run as a script
from course_utils import linear_attention as la

CONFIG = la.Config()
SEEDS = (0, 1, 2)
LENGTHS = (16, 64, 256)
SOFTMAX_FLOOR = 0.95  # what "recalls (nearly) everything" means here


def measure(config=CONFIG, seeds=None):
    """Train every mixer (on one thread) and return every number this script prints, as plain data."""
    seeds = SEEDS if seeds is None else seeds
    runs = {mixer: la.train_seeds(mixer, config, seeds) for mixer in la.MIXERS}
    tokens = la.mqar(1, max(config.pair_counts), config, torch.Generator().manual_seed(7)).tokens[0]
    memory = {}
    for mixer, run in runs.items():
        long = tokens.repeat(max(LENGTHS) // len(tokens) + 1)[:max(LENGTHS)]
        logits, kept = run.models[0].generate(long)
        with torch.no_grad():
            gap = (logits - run.models[0](long[None])[0]).abs().max().item()
        memory[mixer] = {"kept": {T: kept[T - 1] for T in LENGTHS},
                         "formula": {T: la.memory_bytes(mixer, T, config) for T in LENGTHS},
                         "generate_vs_parallel": gap}
    return {"capability": torch.backends.cpu.get_cpu_capability(), "seeds": list(seeds),
            "pair_counts": list(config.pair_counts),
            "accuracy": {m: r.accuracy.tolist() for m, r in runs.items()},
            "cpu_seconds": {m: r.cpu_seconds for m, r in runs.items()},
            "wall_seconds": {m: r.wall_seconds for m, r in runs.items()},
            "memory": memory}


def margins(result):
    """The notebook's claims, each as its smallest margin over seeds (positive: it holds).

    (i) softmax at every pair count above SOFTMAX_FLOOR: its lowest accuracy minus the floor;
    (ii) softmax over linear attention at the largest count: worst seed's gap;
    (iii) the delta rule over linear attention at every count past the smallest: the smallest
         per-seed gap (seed i's delta model against seed i's linear model)."""
    acc = {m: torch.tensor(a) for m, a in result["accuracy"].items()}
    return {"softmax_above_floor": (acc["softmax"].min() - SOFTMAX_FLOOR).item(),
            "softmax_over_linear_at_most_pairs": (acc["softmax"][:, -1] - acc["linear"][:, -1]).min().item(),
            "delta_over_linear_past_smallest": (acc["delta"][:, 1:] - acc["linear"][:, 1:]).min().item()}


def report(result):
    print(f"15 linear_attention: {CONFIG}")
    print(f"  kernels: {result['capability']}; seeds {result['seeds']}; recall on {CONFIG.eval_size} held-out "
          f"sequences per pair count; state {CONFIG.d_state} x {CONFIG.d_state}")
    print("  recall accuracy, mean [min, max] over seeds")
    print(f"  {'pairs':>8} " + "".join(f"{n:>19}" for n in result["pair_counts"]))
    for mixer, table in result["accuracy"].items():
        table = torch.tensor(table)
        print(f"  {mixer:>8} " + "".join(f"{table[:, i].mean():>7.3f} [{table[:, i].min():.2f},{table[:, i].max():.2f}]"
                                         for i in range(table.shape[1])))
    print("  memory kept while generating (bytes, float32), measured / formula, at T = " + ", ".join(map(str, LENGTHS)))
    for mixer, m in result["memory"].items():
        print(f"  {mixer:>8} " + "  ".join(f"{m['kept'][T]}/{m['formula'][T]}" for T in LENGTHS)
              + f"   (token by token vs all at once: max |logit gap| {m['generate_vs_parallel']:.1e})")
    cpu, wall = result["cpu_seconds"], result["wall_seconds"]
    print("  training cost (one thread): " + ", ".join(f"{m} {cpu[m]:.1f} s CPU ({wall[m]:.1f} s wall)" for m in cpu)
          + f"; together {sum(cpu.values()):.1f} s CPU")
    print("  margins (smallest over the seeds; positive = the claim holds): "
          + ", ".join(f"{k} {v:.3f}" for k, v in margins(result).items()))


def every_capability():
    """The measurement on each kernel family, each in a fresh process (the capability is chosen
    when PyTorch loads)."""
    rows = results_on_each_family(__file__, len(SEEDS))
    print("15 linear_attention on each kernel family: mean recall per mixer at each pair count, then the margins")
    for capability, result in rows.items():
        means = {m: [round(sum(col) / len(col), 3) for col in zip(*a)] for m, a in result["accuracy"].items()}
        print(f"  {capability:>8}: {means}; CPU {sum(result['cpu_seconds'].values()):.1f} s; "
              + ", ".join(f"{k} {v:.3f}" for k, v in margins(result).items()))


def main(argv):
    global SEEDS
    if "--seeds" in argv:
        SEEDS = tuple(range(int(argv[argv.index("--seeds") + 1])))
    if "--json" in argv:
        print(json.dumps(measure()))
    elif "--every-capability" in argv:
        every_capability()
    else:
        report(measure())


if __name__ == "__main__":
    main(sys.argv[1:])
