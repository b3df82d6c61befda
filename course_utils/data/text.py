"""A small text for the character-level language model of notebook 08, made on the fly.

Sentences from a tiny grammar ("the small cat sat on the red mat.", "a dog ran to the old
park.", ...), chosen by a seeded generator: the same arguments always give the same text. The
patterns are simple enough for a two-block transformer to learn spelling, word order and where
sentences end in a few seconds on a CPU, and regular enough that its samples can be judged by
eye. Nothing is downloaded.
"""
import random

__all__ = ["make_text", "Vocabulary"]

SUBJECTS = ("cat", "dog", "bird", "fox", "girl", "boy", "teacher", "robot")
ADJECTIVES = ("small", "big", "red", "old", "quiet", "happy", "green", "lazy")
VERBS = (  # (verb, preposition)
    ("sat", "on"), ("ran", "to"), ("looked", "at"), ("slept", "in"), ("jumped", "over"),
    ("walked", "to"), ("sang", "in"), ("waited", "by"),
)
PLACES = ("mat", "park", "tree", "house", "river", "hill", "garden", "box")


def _noun_phrase(rng, noun):
    article = rng.choice(("the", "the", "a"))
    if rng.random() < 0.5:
        return f"{article} {rng.choice(ADJECTIVES)} {noun}"
    return f"{article} {noun}"


def _sentence(rng):
    verb, preposition = rng.choice(VERBS)
    subject = _noun_phrase(rng, rng.choice(SUBJECTS))
    place = _noun_phrase(rng, rng.choice(PLACES))
    sentence = f"{subject} {verb} {preposition} {place}"
    if rng.random() < 0.2:
        sentence += f" and the {rng.choice(SUBJECTS)} {rng.choice(VERBS)[0]} too"
    return sentence + "."


def make_text(n_sentences=600, seed=0):
    """n_sentences sentences of the grammar, separated by spaces, lower case: a str of roughly
    30 characters per sentence. The same (n_sentences, seed) always gives the same text."""
    rng = random.Random(seed)
    return " ".join(_sentence(rng) for _ in range(n_sentences))


class Vocabulary:
    """The characters of a text, each given an integer id (sorted, so ids are repeatable)."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def __contains__(self, char):
        return char in self.index

    def encode(self, text):
        """A list of ids; raises ValueError naming a character that is not in the vocabulary."""
        unknown = sorted(set(text) - set(self.index))
        if unknown:
            raise ValueError(f"characters not in the vocabulary: {''.join(unknown)!r}")
        return [self.index[c] for c in text]

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)

    def clean(self, text):
        """text in lower case without the characters the vocabulary does not have."""
        return "".join(c for c in text.lower() if c in self.index)
