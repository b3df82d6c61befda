"""Pure compute functions behind the demos of notebook 04 (Bahdanau attention).

They take a trained `course_utils.models.seq2seq.Seq2Seq` and return plain numbers and strings; the
notebook draws them with `course_utils.plots` and wires them to widgets. Nothing here needs
the student's answers: decoding uses `course_utils.models.seq2seq`'s own implementations.
"""
import numpy as np
import torch

from course_utils.models import seq2seq
from course_utils.training import in_parallel
from course_utils.data import dates

__all__ = ["EXAMPLES", "alignment", "candidates", "beam_vs_greedy", "train_to", "train_many_to", "compare_speed"]

EXAMPLES = (
    "22 November 2026",
    "Sunday, 22 November 2026",
    "the 3rd of March, 1999",
    "wednesday, september 30, 2048",
    "nov 22, 2026",
    "2026/11/22",
    "22.11.2026",
    "sat 1 jan 1955",
)

def alignment(model, text):
    """Greedy translation of `text` with its attention weights.

    Returns (source characters, output characters, weights) where weights is a float NumPy
    array (len(output), len(source)): row t = where the decoder looked while writing output
    character t. The output ends with "<eos>" when the model emitted it.
    """
    (iso,), weights = seq2seq.greedy_translate(model, [text])
    source = list(text.lower())
    output = list(iso) + ["<eos>"]
    if weights is None:
        raise ValueError("this model has no attention: build it with Seq2Seq(attention=True)")
    rows = min(len(output), weights.shape[1])
    return source, output[:rows], weights[0, :rows, : len(source)].numpy().astype(float)


def candidates(model, text, beam_width=3):
    """Beam search candidates for `text`, best first by log-probability per output token.

    Returns a list of (ISO string, log-probability, log-probability per token) tuples.
    """
    out = []
    for iso, score, ids in seq2seq.beam_translate(model, text, beam_width=beam_width):
        out.append((iso, score, score / len(ids)))
    return out


def beam_vs_greedy(model, texts, beam_width=3):
    """Per text: the per-token log-probability of the greedy output and of beam search's best.

    Greedy decoding is beam search with a beam of one (decoded here a whole length of texts at once).
    Returns two float NumPy arrays.
    """
    greedy = seq2seq.greedy_log_probs(model, list(texts))
    beam = [candidates(model, text, beam_width=beam_width)[0][2] for text in texts]
    return np.array(greedy), np.array(beam)


def train_to(attention, seed, eval_pairs, target=0.99, max_steps=1200, eval_every=25, description=None):
    """A fresh `Seq2Seq` (with or without attention) trained with `seed` until its greedy exact match
    on `eval_pairs`, measured every `eval_every` steps, reaches `target`, or for `max_steps`
    (target=None: always `max_steps`, a model whose later outputs do not hang on when it stopped).
    Returns (model, history); `seq2seq.steps_to(history, x)` is None if it never reached x."""
    model = _new_model(attention, seed)
    return model, _train(model, attention, seed, eval_pairs, target, max_steps, eval_every, description)


def train_many_to(runs, eval_pairs, workers=2):
    """`train_to` for several runs, `workers` at a time (one thread each): runs is a list of
    (attention, seed, max_steps, eval_every, target). The models are built one after the other
    first, so every run gives what `train_to` alone gives. Returns the list of (model, history)."""
    models = [_new_model(attention, seed) for attention, seed, *_ in runs]
    # The runs with the most steps allowed start first, so that no long run is left for the end alone.
    order = sorted(range(len(runs)), key=lambda i: -runs[i][2])

    def task(i):
        attention, seed, max_steps, eval_every, target = runs[i]
        return lambda: _train(models[i], attention, seed, eval_pairs, target, max_steps, eval_every, None)

    histories = dict(zip(order, in_parallel([task(i) for i in order], workers=workers,
                                             models=[models[i] for i in order], description="runs")))
    return [(models[i], histories[i]) for i in range(len(runs))]


def _new_model(attention, seed):
    torch.manual_seed(seed)
    return seq2seq.Seq2Seq(attention=attention)


def _train(model, attention, seed, eval_pairs, target, max_steps, eval_every, description):
    name = description or f"{'with' if attention else 'without'} attention, seed {seed}"
    return seq2seq.fit(model, max_steps, seed=seed, eval_pairs=eval_pairs, eval_every=eval_every,
                       stop_at=target, description=name)


def compare_speed(histories, target=0.99):
    """{name: {seed: history}} -> {name: {"steps": [...], "seconds": [...]}} to reach `target`
    (steps at the first evaluation that reached it; None where a run never did)."""
    summary = {}
    for name, runs in histories.items():
        steps, seconds = [], []
        for history in runs.values():
            reached = seq2seq.steps_to(history, target)
            steps.append(reached)
            seconds.append(None if reached is None else history["seconds"][history["step"].index(reached)])
        summary[name] = {"steps": steps, "seconds": seconds}
    return summary
