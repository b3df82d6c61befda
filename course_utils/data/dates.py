"""Human-written dates and their ISO form: the toy translation task of notebook 04.

Everything is made on the fly and seeded: no download, the same data on every machine.

* Dates run from 1 January 1950 to 31 December 2049 (36,525 days).
* `HELD_OUT_DAYS` fixes 1,000 of those days for evaluation. Training never sees them, in any
  format: `training_batches` draws only from the other days.
* Each date is written in one of `FORMATS`, all unambiguous: month names, or numbers in an
  order that has only one reading (year/month/day, or day.month.year with dots, the European
  convention that is never month-first). No two-digit years.
* The source is lower-cased character by character; the target is the ten characters of
  `YYYY-MM-DD`.
"""
import datetime
import functools

import numpy as np
import torch

__all__ = [
    "FIRST_DAY", "LAST_DAY", "FORMATS", "MONTHS", "WEEKDAYS", "SOURCE_CHARS", "TARGET_CHARS",
    "PAD", "BOS", "EOS", "SOURCE_VOCAB", "TARGET_VOCAB", "TARGET_LENGTH", "HELD_OUT_DAYS",
    "all_days", "held_out_days", "training_days", "write", "random_example", "held_out_set",
    "encode_source", "encode_target", "decode_target", "pad_sources", "training_batches",
]

FIRST_DAY = datetime.date(1950, 1, 1)
LAST_DAY = datetime.date(2049, 12, 31)
HELD_OUT_DAYS = 1000
HELD_OUT_SEED = 2026

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _ordinal(n):
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# Each format turns a datetime.date into a string. Capitals are there for the reader: the
# model sees the lower-cased string.
FORMATS = {
    "22 November 2026": lambda d: f"{d.day} {MONTHS[d.month - 1].title()} {d.year}",
    "22 nov 2026": lambda d: f"{d.day} {MONTHS[d.month - 1][:3]} {d.year}",
    "November 22, 2026": lambda d: f"{MONTHS[d.month - 1].title()} {d.day}, {d.year}",
    "nov 22, 2026": lambda d: f"{MONTHS[d.month - 1][:3]} {d.day}, {d.year}",
    "NOV 22 2026": lambda d: f"{MONTHS[d.month - 1][:3].upper()} {d.day:02d} {d.year}",
    "Sunday, 22 November 2026": lambda d: (f"{WEEKDAYS[d.weekday()].title()}, {d.day} "
                                           f"{MONTHS[d.month - 1].title()} {d.year}"),
    "sun 22 nov 2026": lambda d: f"{WEEKDAYS[d.weekday()][:3]} {d.day} {MONTHS[d.month - 1][:3]} {d.year}",
    "sunday, november 22, 2026": lambda d: (f"{WEEKDAYS[d.weekday()]}, {MONTHS[d.month - 1]} "
                                            f"{d.day}, {d.year}"),
    "the 22nd of November, 2026": lambda d: f"the {_ordinal(d.day)} of {MONTHS[d.month - 1].title()}, {d.year}",
    "22nd nov 2026": lambda d: f"{_ordinal(d.day)} {MONTHS[d.month - 1][:3]} {d.year}",
    "2026/11/22": lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",
    "22.11.2026": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
}

SOURCE_CHARS = " ,./0123456789abcdefghijklmnopqrstuvwxyz"
TARGET_CHARS = "-0123456789"
PAD, BOS, EOS = 0, 1, 2
# Index 0 is padding in both vocabularies; the target vocabulary adds begin and end markers.
SOURCE_VOCAB = ("<pad>",) + tuple(SOURCE_CHARS)
TARGET_VOCAB = ("<pad>", "<bos>", "<eos>") + tuple(TARGET_CHARS)
TARGET_LENGTH = 10  # YYYY-MM-DD
_SOURCE_INDEX = {c: i for i, c in enumerate(SOURCE_VOCAB) if i > 0}
_TARGET_INDEX = {c: i for i, c in enumerate(TARGET_VOCAB) if i > 2}


@functools.lru_cache(maxsize=None)
def all_days():
    """Every date of the range, as a tuple of datetime.date."""
    n = (LAST_DAY - FIRST_DAY).days + 1
    return tuple(FIRST_DAY + datetime.timedelta(days=i) for i in range(n))


@functools.lru_cache(maxsize=None)
def _held_out_mask():
    rng = np.random.default_rng(HELD_OUT_SEED)
    n = len(all_days())
    mask = np.zeros(n, dtype=bool)
    mask[rng.choice(n, size=HELD_OUT_DAYS, replace=False)] = True
    return mask


@functools.lru_cache(maxsize=None)
def held_out_days():
    """The 1,000 evaluation days, fixed forever (their own seed), in calendar order."""
    return tuple(d for d, held in zip(all_days(), _held_out_mask()) if held)


@functools.lru_cache(maxsize=None)
def training_days():
    """Every other day of the range: what training draws from."""
    return tuple(d for d, held in zip(all_days(), _held_out_mask()) if not held)


def write(day, fmt):
    """`day` (datetime.date) written in format `fmt` (a key of FORMATS)."""
    return FORMATS[fmt](day)


def random_example(rng, days=None):
    """(human-written string, ISO string) for a random day and format, drawn with `rng`."""
    days = training_days() if days is None else days
    day = days[int(rng.integers(len(days)))]
    fmt = list(FORMATS)[int(rng.integers(len(FORMATS)))]
    return write(day, fmt), day.isoformat()


def held_out_set():
    """The 1,000 held-out (source, target) pairs: each held-out day in one format, fixed."""
    rng = np.random.default_rng(HELD_OUT_SEED + 1)
    names = list(FORMATS)
    return [(write(day, names[int(rng.integers(len(names)))]), day.isoformat()) for day in held_out_days()]


def encode_source(text):
    """Character ids of a human-written date (lower-cased). Unknown characters raise ValueError."""
    text = text.lower()
    unknown = sorted({c for c in text if c not in _SOURCE_INDEX})
    if unknown:
        raise ValueError(f"characters the model does not know: {unknown}; use letters, digits, ' ,./'")
    return [_SOURCE_INDEX[c] for c in text]


def encode_target(iso):
    """Target ids of an ISO date: the ten characters, then EOS (no BOS)."""
    return [_TARGET_INDEX[c] for c in iso] + [EOS]


def decode_target(ids):
    """Target ids back to a string, stopping at the first EOS; markers other than EOS are skipped."""
    out = []
    for i in ids:
        i = int(i)
        if i == EOS:
            break
        if i > 2:
            out.append(TARGET_VOCAB[i])
    return "".join(out)


def pad_sources(texts):
    """A batch of strings -> (ids (B, T) long, mask (B, T) bool, True = a real character)."""
    encoded = [encode_source(t) for t in texts]
    T = max(len(e) for e in encoded)
    # One tensor from padded lists: filling row by row cost 4x as much, ~4 % of a training step.
    ids = torch.tensor([e + [PAD] * (T - len(e)) for e in encoded], dtype=torch.long)
    return ids, ids != PAD


def training_batches(batch_size=64, seed=0):
    """An endless iterator of training batches (src ids, src mask, target ids (B, 11)), seeded."""
    rng = np.random.default_rng(seed)
    days = training_days()
    while True:
        pairs = [random_example(rng, days) for _ in range(batch_size)]
        src, mask = pad_sources([s for s, _ in pairs])
        tgt = torch.tensor([encode_target(t) for _, t in pairs], dtype=torch.long)
        yield src, mask, tgt
