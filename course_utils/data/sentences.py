"""A few short sentences with a tiny vocabulary and seeded toy embeddings.

Made for the self-attention demos (notebook 05): small enough to read every number, with
embeddings built from a handful of named features ("animate", "place", "action", ...) plus a
little seeded noise, so that hand-made query and key projections give attention patterns a
person can check ("it" looks for an animate noun, a verb for nouns, ...).

Everything is deterministic: the same seed gives the same arrays on every machine.
"""
import numpy as np

__all__ = [
    "SENTENCES", "FEATURES", "VOCABULARY", "tokenize", "features_of", "embedding_table",
    "embed", "D_MODEL",
]

# The lecture's example, the classic "cat sat on the mat", and two more, all lower case.
SENTENCES = {
    "animal": "the animal didn't cross the street because it was too tired",
    "cat": "the cat sat on the mat",
    "dog": "the hungry dog chased a ball in the park",
    "machines": "thinking machines",
}

# The named features that make up the first dimensions of every embedding.
FEATURES = ("thing", "animate", "place", "action", "refers-back", "describes", "function")

# Each word: the features it has (1.0 each). Words not listed are function words.
_WORD_FEATURES = {
    "animal": ("thing", "animate"),
    "cat": ("thing", "animate"),
    "dog": ("thing", "animate"),
    "machines": ("thing",),
    "ball": ("thing",),
    "street": ("thing", "place"),
    "mat": ("thing", "place"),
    "park": ("thing", "place"),
    "cross": ("action",),
    "sat": ("action",),
    "chased": ("action",),
    "was": ("action",),
    "didn't": ("action",),
    "thinking": ("action", "describes"),
    "it": ("refers-back",),
    "tired": ("describes",),
    "hungry": ("describes",),
    "too": ("function",),
}

VOCABULARY = tuple(sorted({word for sentence in SENTENCES.values() for word in sentence.split()}))
D_MODEL = 16  # len(FEATURES) named dimensions, then noise dimensions


def tokenize(sentence):
    """Split a sentence (or a key of SENTENCES) into its words."""
    return SENTENCES.get(sentence, sentence).split()


def features_of(word):
    """A (len(FEATURES),) vector with 1.0 for each feature the word has."""
    names = _WORD_FEATURES.get(word, ("function",))
    return np.array([1.0 if f in names else 0.0 for f in FEATURES])


def embedding_table(d_model=D_MODEL, noise=0.3, seed=0):
    """The embedding of every vocabulary word: a dict word -> (d_model,) float64 array.

    The first len(FEATURES) entries are the word's features; every entry gets seeded Gaussian
    noise of standard deviation `noise`, so no two words are identical.
    """
    if d_model < len(FEATURES):
        raise ValueError(f"d_model must be at least {len(FEATURES)}, got {d_model}")
    rng = np.random.default_rng(seed)
    table = {}
    for word in VOCABULARY:
        vector = np.zeros(d_model)
        vector[: len(FEATURES)] = features_of(word)
        table[word] = vector + noise * rng.standard_normal(d_model)
    return table


def embed(sentence, d_model=D_MODEL, noise=0.3, seed=0):
    """The words of a sentence and their embeddings X, shape (T, d_model): row t is word t."""
    words = tokenize(sentence)
    table = embedding_table(d_model, noise, seed)
    return words, np.stack([table[w] for w in words])
