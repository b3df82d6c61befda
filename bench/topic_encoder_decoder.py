"""Notebook 10's figures, on more seeds than fit the notebook. Figures only, never pass/fail.

1. The notebook's Transformer (course_utils.widgets.encoder_decoder.MODEL_CONFIG, the course's own
   parts) on one CPU thread: held-out exact match on notebook 04's 1,000 held-out dates after its
   step budget, and the training seconds it took (goal of issue 12: >= 0.995 within 15 s).
2. The same Transformer and notebook 04's GRU with Bahdanau attention, three seeds each: steps and
   seconds of training to reach 99 % on the 200 curve dates (every 10 steps for the GRU, 50 for
   the Transformer; evaluation time excluded), and the held-out exact match at the end.
3. The warm-up experiment of section 8 (four arms: post-norm and pre-norm, each with and without a
   warm-up) on eight seeds at the notebook's learning rate 0.03 with its 20-step ramp and with a
   10-step ramp, and at 0.01 with the 20-step ramp.
"""
import numpy as np
import torch

from course_utils.data import dates
from course_utils.models import seq2seq
from course_utils.models import transformer_seq2seq as ts
from course_utils.widgets import encoder_decoder as demo

SEEDS = (0, 1, 2)
TRANSFORMER_STEPS, GRU_STEPS = demo.STEPS, 400  # the notebook's Transformer budget
WARMUP_SEEDS = tuple(range(8))  # the notebook's five and three more


def main():
    torch.set_num_threads(1)
    held_out = dates.held_out_set()
    curve = held_out[::5]

    print(f"10 encoder_decoder: the Transformer {demo.MODEL_CONFIG}, {demo.TRAINING}, one CPU thread")
    rows = []
    for seed in SEEDS:
        model, history, _ = demo.train_transformer(TRANSFORMER_STEPS, seed=seed, eval_pairs=curve, eval_every=50)
        accuracy = ts.exact_match(model, held_out)
        steps, seconds = demo.reached(history, 0.99)
        rows.append(("Transformer", seed, steps, seconds, history["total_seconds"], accuracy))
        print(f"  seed {seed}: held-out exact-match accuracy: {accuracy:.4f} after {TRANSFORMER_STEPS} steps, "
              f"{history['total_seconds']:.1f} s of training")
    for seed in SEEDS:
        torch.manual_seed(seed)
        gru = seq2seq.Seq2Seq(attention=True)
        history = seq2seq.fit(gru, GRU_STEPS, seed=seed, eval_pairs=curve, eval_every=10, stop_at=None,
                              description=f"GRU seed {seed}")
        steps, seconds = demo.reached(history, 0.99)
        rows.append(("GRU + Bahdanau", seed, steps, seconds, history["total_seconds"], seq2seq.exact_match(gru, held_out)))

    print("  model            seed  steps to 99 %  seconds to 99 %  total s  held-out exact match")
    for name, seed, steps, seconds, total, accuracy in rows:
        print(f"  {name:15s}  {seed:4d}  {str(steps):>13s}  "
              f"{'never' if seconds is None else f'{seconds:.1f}':>15s}  {total:7.1f}  {accuracy:.4f}")
    for name in ("Transformer", "GRU + Bahdanau"):
        mine = [r for r in rows if r[0] == name and r[2] is not None]
        if len(mine) == len(SEEDS):
            steps, seconds = np.array([r[2] for r in mine]), np.array([r[3] for r in mine])
            print(f"  {name}: steps to 99 % mean {steps.mean():.0f} (range {steps.min()}-{steps.max()}), "
                  f"seconds mean {seconds.mean():.1f} (range {seconds.min():.1f}-{seconds.max():.1f})")

    settings = {k: v for k, v in demo.WARMUP.items() if k not in ("seeds", "lr")}
    for lr, ramp in ((3e-2, settings["warmup"]), (3e-2, 10), (1e-2, settings["warmup"])):
        runs = demo.warmup_runs(seeds=WARMUP_SEEDS, lr=lr, **dict(settings, warmup=ramp))
        summary = demo.warmup_summary(runs)
        print(f"  warm-up experiment, learning rate {lr}, {ramp}-step ramp, {settings['steps']} steps: "
              f"mean loss of the last {settings['last']} steps per seed")
        for name in demo.ARMS:
            row = summary["table"][name]
            print(f"    {name:>22}: {np.round(runs[name]['loss'], 3).tolist()}  mean {row['mean']:.3f}, "
                  f"{row['learned']} of {row['seeds']} below {demo.LEARNED}")
        for fact, flag in list(summary.items())[1:]:
            print(f"    {fact}: {flag}")
        print(f"    {runs['seconds']:.1f} s of training in all (two runs at a time)")


if __name__ == "__main__":
    main()
