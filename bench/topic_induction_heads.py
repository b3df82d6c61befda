"""Notebook 14's figures, measured outside the notebook (figures only, never pass/fail).

The notebook's configuration (`course_utils.induction.Config()`), trained over five seeds with two
layers and, the same way, with one layer:

* the phase change of the two-layer model: per seed, the step at which its loss on the repeated
  copy falls below half of ln V, and how many steps the fall from 3/4 to 1/4 of ln V took;
* the one-layer contrast: its lowest in-context loss over the whole training, per seed;
* every head's previous-token and induction score, and the in-context loss with each head
  ablated, on clean repeated sequences (max_span random tokens, then the same again);
* the claims the notebook makes, each with its smallest margin over the seeds, and the CPU
  seconds of the training.

`--seeds N` measures seeds 0 ... N - 1 instead of five. `--every-capability` runs the whole
measurement again in fresh processes on PyTorch's kernels for other CPUs
(ATEN_CPU_CAPABILITY=default, avx2, and this machine's own) and prints their margins side by
side: the notebook's claims must hold on every CPU, not only this one.
"""
import json
import sys

import torch

from kernel_families import results_on_each_family  # bench/ is on the path: run as a script
from course_utils import induction
from course_utils.reference import induction_heads as ref

CONFIG = induction.Config()
SEEDS = (0, 1, 2, 3, 4)
CLEAN_SEQUENCES = 64


def clean_batch(config, seed=20_000):
    """CLEAN_SEQUENCES repeated sequences [span, span], span = max_span, for scores and ablation."""
    g = torch.Generator().manual_seed(seed)
    return induction.repeat_of(torch.randint(config.vocab, (CLEAN_SEQUENCES, config.max_span), generator=g))


def head_scores(model, tokens, span):
    """(previous-token, induction) scores, each (layers, heads), averaged over the sequences."""
    with torch.no_grad():
        patterns = torch.stack(model.trace(tokens).patterns)  # (layers, B, H, T, T)
    return ref.previous_token_score(patterns).mean(1), ref.induction_score(patterns, span).mean(1)


def crossing(run, seed_index, level):
    return induction.phase_change_step(run.steps, run.repeated_loss[seed_index], level)


def measure(config=CONFIG, seeds=None):
    """Train both depths (on one thread: `induction.train_seeds`) and return every number this
    script prints, as plain data."""
    seeds = SEEDS if seeds is None else seeds
    two = induction.train_seeds(config, seeds, num_layers=2)
    one = induction.train_seeds(config, seeds, num_layers=1)
    level, log_v = induction.phase_change_level(config), torch.log(torch.tensor(float(config.vocab))).item()
    tokens, span = clean_batch(config), config.max_span
    per_seed = []
    for i, seed in enumerate(seeds):
        model = two.models[i]
        previous, induct = head_scores(model, tokens, span)
        with torch.no_grad():
            baseline = ref.in_context_loss(model(tokens), tokens, span).item()
        start, end = crossing(two, i, 0.75 * log_v), crossing(two, i, 0.25 * log_v)
        per_seed.append({
            "seed": seed,
            "phase_change_step": crossing(two, i, level),
            "drop_steps": None if start is None or end is None else end - start,
            "final_repeated_loss": two.repeated_loss[i, -1].item(),
            "final_first_loss": two.first_loss[i, -1].item(),
            "one_layer_lowest_repeated_loss": one.repeated_loss[i].min().item(),
            "one_layer_final_repeated_loss": one.repeated_loss[i, -1].item(),
            "previous_token": previous.tolist(),
            "induction": induct.tolist(),
            "clean_loss": baseline,
            "ablated": ref.ablation_table(model, tokens, span).tolist(),
        })
    return {"capability": torch.backends.cpu.get_cpu_capability(), "level": level, "log_v": log_v,
            "seeds": per_seed, "cpu_seconds": {"two_layers": two.cpu_seconds, "one_layer": one.cpu_seconds},
            "wall_seconds": {"two_layers": two.wall_seconds, "one_layer": one.wall_seconds}}


def _best_and_rest(table, layer):
    """(layer's best head, its value, the best value of every other head) of a (layers, heads) table."""
    head = int(table[layer].argmax())
    rest = table.clone()
    rest[layer, head] = float("-inf")
    return head, table[layer, head].item(), rest.max().item()


def margins(result):
    """The notebook's claims, each as its smallest margin over the seeds (positive: it holds).

    (i) every two-layer seed crosses the level before training ends (steps to spare, latest seed);
    (ii) no one-layer seed ever gets below the level: its lowest loss minus the level;
    (iii) layer 1's best induction score minus the best induction score in layer 0 (which cannot
         do induction), and layer 0's best previous-token score minus that of every other head;
    (iv) ablating layer 0's previous-token head hurts the in-context loss most: its ablated loss
         minus the next worst ablation."""
    steps = [s["phase_change_step"] for s in result["seeds"]]
    crossed = all(s is not None for s in steps)
    out = {"two_layer_crosses_before_end": (CONFIG.steps - max(steps)) if crossed else -1,
           "one_layer_stays_above": min(s["one_layer_lowest_repeated_loss"] for s in result["seeds"]) - result["level"]}
    induction_top, induction_gap, previous_top, previous_gap, ablation_gap = [], [], [], [], []
    for s in result["seeds"]:
        induct, previous, ablated = (torch.tensor(s[k]) for k in ("induction", "previous_token", "ablated"))
        induction_top.append(induct[1].max().item())
        induction_gap.append(induct[1].max().item() - induct[0].max().item())
        head, best, rest = _best_and_rest(previous, 0)
        previous_top.append(best)
        previous_gap.append(best - rest)
        others = ablated.clone()
        others[0, head] = float("-inf")
        ablation_gap.append(ablated[0, head].item() - others.max().item())
    out.update(induction_score=min(induction_top), induction_over_layer_0=min(induction_gap),
               previous_token_score=min(previous_top), previous_token_over_other_heads=min(previous_gap),
               previous_token_ablation_hurts_most_by=min(ablation_gap))
    return out


def report(result):
    heads = CONFIG.num_heads
    print(f"14 induction_heads: {CONFIG}")
    print(f"  kernels: {result['capability']}; seeds {SEEDS}; level = ln V / 2 = {result['level']:.2f} (ln V = "
          f"{result['log_v']:.2f}); scores and ablations on {CLEAN_SEQUENCES} sequences of {CONFIG.max_span} "
          f"random tokens repeated once")
    print(f"  {'seed':>4} {'phase step':>10} {'3/4->1/4 lnV':>12} {'2L final rep/first':>18} "
          f"{'1L lowest/final rep':>19}")
    for s in result["seeds"]:
        drop = "-" if s["drop_steps"] is None else s["drop_steps"]
        print(f"  {s['seed']:>4} {str(s['phase_change_step']):>10} {drop:>12} "
              f"{s['final_repeated_loss']:>9.2f}/{s['final_first_loss']:<8.2f} "
              f"{s['one_layer_lowest_repeated_loss']:>9.2f}/{s['one_layer_final_repeated_loss']:<9.2f}")
    steps = [s["phase_change_step"] for s in result["seeds"] if s["phase_change_step"] is not None]
    if steps:
        mean = sum(steps) / len(steps)
        std = (sum((x - mean) ** 2 for x in steps) / max(len(steps) - 1, 1)) ** 0.5
        print(f"  phase change: mean step {mean:.0f}, standard deviation {std:.0f}, range {min(steps)}-{max(steps)}")
    print("  per head (layer.head): previous-token score / induction score / in-context loss with it ablated")
    for s in result["seeds"]:
        cells = [f"{layer}.{h}: {s['previous_token'][layer][h]:.2f}/{s['induction'][layer][h]:.2f}/"
                 f"{s['ablated'][layer][h]:.2f}" for layer in range(len(s["induction"])) for h in range(heads)]
        print(f"  seed {s['seed']}: clean {s['clean_loss']:.2f} | " + "  ".join(cells))
    cpu, wall = result["cpu_seconds"], result["wall_seconds"]
    print(f"  training cost (one thread): two layers {cpu['two_layers']:.1f} s CPU ({wall['two_layers']:.1f} s wall), "
          f"one layer {cpu['one_layer']:.1f} s CPU ({wall['one_layer']:.1f} s wall), "
          f"together {cpu['two_layers'] + cpu['one_layer']:.1f} s CPU")
    print("  margins (smallest over the seeds; positive = the claim holds): "
          + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in margins(result).items()))


def every_capability():
    """The measurement on each kernel family, each in a fresh process (the capability is chosen
    when PyTorch loads)."""
    rows = {c: (r, margins(r)) for c, r in results_on_each_family(__file__, len(SEEDS)).items()}
    print("14 induction_heads on each kernel family: phase-change steps per seed, then the margins")
    for capability, (result, margin) in rows.items():
        print(f"  {capability:>8}: steps {[s['phase_change_step'] for s in result['seeds']]}, "
              + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in margin.items()))


def main(argv):
    global SEEDS
    if "--seeds" in argv:  # more seeds than the notebook trains, to see how far the claims carry
        SEEDS = tuple(range(int(argv[argv.index("--seeds") + 1])))
    if "--json" in argv:
        print(json.dumps(measure()))
    elif "--every-capability" in argv:
        every_capability()
    else:
        report(measure())


if __name__ == "__main__":
    main(sys.argv[1:])
