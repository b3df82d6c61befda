"""Pure compute functions behind the demos of notebook 10 (the encoder–decoder Transformer).

They take trained models (`course_utils.models.transformer_seq2seq.TransformerSeq2Seq`, and
notebook 04's `course_utils.models.seq2seq.Seq2Seq` for the comparison) and return plain numbers,
strings and NumPy arrays; the notebook draws them and wires them to widgets. Nothing here
needs the student's answers.
"""
import inspect
import time

import numpy as np
import torch
import torch.nn.functional as F

from course_utils.data import dates
from course_utils.models import seq2seq
from course_utils.models import transformer_seq2seq as ts
from course_utils.stacked import Stack, adam_step, pad_stack
from course_utils.training import in_parallel, one_thread
from course_utils.widgets.bahdanau_attention import EXAMPLES  # notebook 04's dates, to compare the two

__all__ = ["EXAMPLES", "MODEL_CONFIG", "TRAINING", "GRU_LR", "STEPS", "WARMUP", "LEARNED", "WARMUP_GAINS", "ARMS", "attention_view", "head_map", "bahdanau_alignment",
           "train_transformer", "train_bahdanau", "train_side_by_side", "reached", "warmup_runs", "warmup_summary"]


# The notebook's model: one encoder layer, two decoder layers of 4 heads, d_model 32, the source's
# positions counted from its end.
MODEL_CONFIG = dict(d_model=32, num_heads=4, num_layers=2, encoder_layers=1, d_ff=64, positions_from_end=True)
TRAINING = dict(lr=2e-2, warmup=30, final=0.02, batch_size=64)
GRU_LR = 0.01  # notebook 04's GRU with Bahdanau attention trains at its own learning rate (seq2seq.fit's)
STEPS = 400  # the notebook's budget for this model: >= 0.995 held-out exact match on every seed tried
# Section 8's runs: four arms, five seeds each, at the learning rate 0.03 (`warmup_runs`' default), 80
# steps with a 20-step ramp, the notebook's layout (one encoder layer, two decoder layers) at two heads.
# The seeds of an arm train as one stacked model (`course_utils.stacked`): 12 to 17 s of CPU for the
# twenty runs (AVX2 to default kernels), against 33 to 40 s for the 150-step, two-encoder-layer runs
# done one by one before. `bench/topic_encoder_decoder.py`
# repeats the runs with a 10-step ramp and on more seeds.
WARMUP = dict(seeds=(0, 1, 2, 3, 4), steps=80, lr=3e-2, warmup=20, batch_size=32, last=10, encoder_layers=1)
# A run "learned" when the mean loss of its last steps is below this (nats per token): post-norm runs without
# a warm-up stay above 0.71 on every CPU tried, every other run ends below 0.5 and is still going down.
LEARNED = 0.6
# The least differences of means (nats per token) that section 8's facts claim: the warm-up's gain for
# post-norm and for pre-norm. Measured with the notebook's five runs per arm on default, AVX2 and AVX-512
# kernels: 0.403 to 0.428 and 0.097 to 0.104 (an arm's mean moves by up to 0.025 between them). The
# smallest single-run margins to LEARNED: post-norm without a warm-up 0.116 above it, every other run
# 0.106 below.
WARMUP_GAINS = (0.3, 0.05)
ARMS = ("post-norm, no warm-up", "post-norm, warm-up", "pre-norm, no warm-up", "pre-norm, warm-up")


def attention_view(model, text):
    """Greedy translation of `text` and the cross-attention of every decoder layer and head.

    Returns a dict: "source" (the lower-cased characters), "output" (the ISO characters, then
    "<eos>"), "iso" (the translation), "weights" (a float NumPy array (layers, heads,
    len(output), len(source))). Raises ValueError for characters the model does not know."""
    if not text.strip():
        raise ValueError("type a date")
    dates.encode_source(text)  # ValueError with a readable message for unknown characters
    source, output, weights = ts.cross_attention_maps(model, text)
    return {"source": source, "output": output, "iso": "".join(output[:-1]),
            "weights": weights.double().numpy()}


def head_map(view, layer, head=None):
    """One map of an `attention_view`: (len(output), len(source)) for a layer and a head, or the
    average over the layer's heads when head is None. Rows still sum to one."""
    weights = view["weights"]
    if not 0 <= layer < weights.shape[0]:
        raise ValueError(f"layer must be 0..{weights.shape[0] - 1}, got {layer}")
    if head is None:
        return weights[layer].mean(axis=0)
    if not 0 <= head < weights.shape[1]:
        raise ValueError(f"head must be 0..{weights.shape[1] - 1}, got {head}")
    return weights[layer, head]


def bahdanau_alignment(model, text):
    """Notebook 04's alignment for `text`: (source characters, output characters, weights
    (len(output), len(source))), the output ending with "<eos>"."""
    (iso,), weights = seq2seq.greedy_translate(model, [text])
    output = list(iso) + ["<eos>"]
    rows = min(len(output), weights.shape[1])
    return list(text.lower()), output[:rows], weights[0, :rows, :len(text)].double().numpy()


def train_transformer(steps, seed=0, eval_pairs=(), eval_every=50, cross_attention=None, block=None,
                      description=None, **changes):
    """A fresh notebook model (MODEL_CONFIG, with `changes` to the model or the training) built
    from the student's parts where they agree with the course's (`ts.assemble`), trained for
    `steps` with `seed`. Returns (model, history, used) with used = {"cross_attention": bool,
    "block": bool}, which parts are the student's."""
    model, used, training = _new_transformer(seed, cross_attention, block, changes)
    return model, _fit_transformer(model, steps, seed, eval_pairs, eval_every, description, training), used


def train_bahdanau(steps, seed=0, eval_pairs=(), eval_every=10, description=None):
    """Notebook 04's GRU encoder–decoder with Bahdanau attention, its settings, `steps` steps."""
    model = _new_bahdanau(seed)
    return model, _fit_bahdanau(model, steps, seed, eval_pairs, eval_every, description)


def train_side_by_side(steps, gru_steps, seed=0, eval_pairs=(), eval_every=50, gru_eval_every=10,
                       cross_attention=None, block=None, warmup_experiment=None):
    """`train_transformer` and `train_bahdanau` at once, one per core (`in_parallel`). The two models
    are built first, one after the other, so each run gives exactly what it gives alone.
    Returns ((model, history, used), (gru, gru_history)).

    `warmup_experiment`, a dict of `warmup_runs` keyword arguments (`workers` aside): its runs are
    queued behind the two trainings and go to whichever core is free first (the GRU's, which
    finishes first); what `warmup_runs` would return comes back as a third item."""
    model, used, training = _new_transformer(seed, cross_attention, block, {})
    gru = _new_bahdanau(seed)
    tasks = [lambda: _fit_transformer(model, steps, seed, eval_pairs, eval_every, None, training),
             lambda: _fit_bahdanau(gru, gru_steps, seed, eval_pairs, gru_eval_every, None)]
    models = [model, gru]
    description = "Transformer and GRU"
    if warmup_experiment is not None:
        settings = inspect.signature(warmup_runs).bind(**warmup_experiment)
        settings.apply_defaults()
        settings.arguments.pop("workers")
        warm_tasks, summarise = _warmup_tasks(**settings.arguments)
        tasks += warm_tasks
        models += [None] * len(warm_tasks)  # their losses only
        description = "Transformer, GRU and warm-up runs"
    results = in_parallel(tasks, models=models, description=description)
    trained = (model, results[0], used), (gru, results[1])
    return trained if warmup_experiment is None else trained + (summarise(results[2:]),)


def _new_transformer(seed, cross_attention, block, changes):
    config, training = dict(MODEL_CONFIG), dict(TRAINING)
    for key, value in changes.items():
        (training if key in training else config)[key] = value
    model, used = ts.assemble(cross_attention, block, seed=seed, **config)
    return model, used, training


def _fit_transformer(model, steps, seed, eval_pairs, eval_every, description, training):
    return ts.fit(model, steps, seed=seed, eval_pairs=eval_pairs, eval_every=eval_every,
                  description=description or f"Transformer, seed {seed}", **training)


def _new_bahdanau(seed):
    torch.manual_seed(seed)
    return seq2seq.Seq2Seq(attention=True)


def _fit_bahdanau(model, steps, seed, eval_pairs, eval_every, description):
    return seq2seq.fit(model, steps, lr=GRU_LR, seed=seed, eval_pairs=eval_pairs, eval_every=eval_every,
                       description=description or f"GRU + Bahdanau, seed {seed}")


def reached(history, target):
    """(steps, seconds) at the first evaluation where the exact match reached `target`, or
    (None, None)."""
    for step, seconds, value in zip(history["step"], history["seconds"], history["accuracy"]):
        if value >= target:
            return step, seconds
    return None, None


def warmup_runs(seeds=(0, 1, 2), steps=80, lr=3e-2, warmup=20, batch_size=32, last=10,
                d_model=32, num_heads=2, num_layers=2, encoder_layers=1, d_ff=64, workers=2):
    """Post-norm and pre-norm, each with and without a learning-rate warm-up (`ARMS`), at a learning
    rate high enough to matter. A small model (`encoder_layers` encoder and `num_layers` decoder
    layers), `steps` steps per run (a ramp over `warmup` steps, or none, then the linear decay of
    `ts.fit`), one run per arm and seed. The seeds of an arm train together as one stacked model
    (`course_utils.stacked`: each its own weights, batches and Adam, on one thread), and the arms
    `workers` at a time.

    Returns {name: {"loss": array (seeds,), the mean training loss over the `last` steps,
    "curves": array (seeds, steps)}} for each name of `ARMS`, "seeds": the seeds, and "seconds":
    the training time of all the runs added up (each arm's thread's CPU time)."""
    tasks, summarise = _warmup_tasks(seeds, steps, lr, warmup, batch_size, last, d_model, num_heads, num_layers,
                                     encoder_layers, d_ff)
    return summarise(in_parallel(tasks, workers=workers, models=[None] * len(tasks),  # losses only
                                 description="warm-up runs"))


def _warmup_tasks(seeds, steps, lr, warmup, batch_size, last, d_model, num_heads, num_layers, encoder_layers, d_ff):
    """`warmup_runs`' arms as `in_parallel` tasks, one per arm, their models built here, one by one,
    each from its seed; and the function that turns the tasks' results into what `warmup_runs` returns."""
    arrangements = dict(zip(ARMS, [(False, 0), (False, warmup), (True, 0), (True, warmup)]))
    arms = []  # (models, ramp), one model per seed
    for name, (norm_first, ramp) in arrangements.items():
        models = []
        for seed in seeds:
            torch.manual_seed(seed)
            models.append(ts.TransformerSeq2Seq(d_model=d_model, num_heads=num_heads, num_layers=num_layers, d_ff=d_ff,
                                                encoder_layers=encoder_layers, norm_first=norm_first,
                                                positions_from_end=True))
        arms.append((models, ramp))

    def task(models, ramp):
        return lambda: _fit_stacked(models, seeds, steps, lr, ramp, batch_size)

    def summarise(results):
        out = {name: {"curves": curves, "loss": curves[:, -last:].mean(axis=1)}
               for name, (curves, _) in zip(arrangements, results)}
        out["seeds"] = tuple(seeds)
        out["seconds"] = sum(seconds for _, seconds in results)
        return out

    return [task(*arm) for arm in arms], summarise


def _fit_stacked(models, seeds, steps, lr, warmup, batch_size):
    """Train `models` (one per seed, the same shape) as one stack, seed i's model on the batches of
    `dates.training_batches(batch_size, seed=i)` (those of `ts.fit`), with Adam (betas of `ts.fit`)
    and `ts.fit`'s learning-rate schedule. Returns (losses (models, steps), CPU seconds)."""
    with one_thread():
        start = time.thread_time()
        stack = Stack(models)
        batches = [dates.training_batches(batch_size, seed=seed) for seed in seeds]
        state, curves = {}, []
        for step in range(1, steps + 1):
            src, _, tgt = zip(*(next(b) for b in batches))
            src, tgt = pad_stack(src, dates.PAD), torch.stack(tgt)
            tgt_in = torch.cat([torch.full_like(tgt[..., :1], dates.BOS), tgt[..., :-1]], dim=-1)
            logits = stack(src, src != dates.PAD, tgt_in)  # (models, B, T, V)
            losses = F.cross_entropy(logits.permute(0, 3, 1, 2), tgt, reduction="none").mean(dim=(1, 2))
            losses.sum().backward()  # each model's gradient is that of its own loss
            rate = ts._learning_rate(step, lr, warmup, steps)
            adam_step(stack.params, state, torch.full((len(models),), rate), betas=(0.9, 0.98))
            curves.append(losses.detach())
        return torch.stack(curves, dim=1).double().numpy(), time.thread_time() - start


def warmup_summary(runs, threshold=LEARNED, gains=WARMUP_GAINS):
    """The table and the facts of section 8, from `warmup_runs`' result.

    "table": for each arm, {"mean", "min", "max"} of the runs' final losses and "learned", how many
    runs end below `threshold`, of "seeds". The facts (booleans) are about counts and means, each
    with a margin: a run's final loss moves by a few hundredths from one CPU's kernels to another's, an
    arm's mean by less, so no fact compares two single runs, and each difference of means is
    checked against the least gain (`gains`, nats per token) the measurement supports with room
    to spare on every CPU tried (default, AVX2 and AVX-512 kernels). Post-norm with a warm-up ends close to
    pre-norm without one: its mean moves between those CPUs (by up to 0.025) as much as it differs
    from that arm's, so no fact ranks those two."""
    names = [n for n in ARMS if n in runs]
    loss = {n: np.asarray(runs[n]["loss"], dtype=float) for n in names}
    table = {n: {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()),
                 "learned": int((v < threshold).sum()), "seeds": len(v)} for n, v in loss.items()}
    post, post_w, pre, pre_w = (loss[n] for n in ARMS)
    post_gain, pre_gain = gains
    return {"table": table,
            "post-norm without a warm-up: no run learns": bool((post >= threshold).all()),
            "post-norm with a warm-up: every run learns": bool((post_w < threshold).all()),
            "pre-norm, with or without a warm-up: every run learns":
                bool((pre < threshold).all() and (pre_w < threshold).all()),
            f"the warm-up lowers post-norm's mean final loss by more than {post_gain}":
                bool(post.mean() - post_w.mean() > post_gain),
            f"the warm-up lowers pre-norm's mean final loss too, by more than {pre_gain}":
                bool(pre.mean() - pre_w.mean() > pre_gain)}
