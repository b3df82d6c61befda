"""A tiny generated corpus for the word-embedding demo of notebook 03.

Sentences are filled from templates whose slots take words of one category each (animals,
food, places, people), so words of the same category occur in the same contexts: exactly the
situation in which skip-gram training pulls their vectors together ("a word is known by the
company it keeps"). It is a toy, and the notebook says so: a real corpus has millions of
sentences and far less tidy statistics.

Deterministic: the same seed gives the same sentences.
"""
import numpy as np

__all__ = ["CATEGORIES", "TEMPLATES", "make_corpus", "build_vocabulary", "skipgram_pairs"]

CATEGORIES = {
    "animal": ("cat", "dog", "horse", "cow", "sheep"),
    "food": ("bread", "cheese", "apple", "soup", "rice"),
    "place": ("park", "garden", "field", "house", "kitchen"),
    "person": ("king", "queen", "man", "woman", "child"),
}

# {category} marks a slot; every other word is fixed.
TEMPLATES = (
    "the {animal} runs in the {place}",
    "the {animal} sleeps in the {place}",
    "a {animal} eats grass",
    "the {person} feeds the {animal}",
    "the {person} eats {food}",
    "the {person} cooks {food} in the {place}",
    "fresh {food} tastes good",
    "the {person} walks to the {place}",
    "the {person} talks to the {person}",
    "the {animal} chases the {animal}",
    "we buy {food} and {food}",
    "the {place} is quiet",
)


def make_corpus(n_sentences=600, seed=0):
    """A list of n_sentences lower-case sentences (strings), drawn from TEMPLATES."""
    rng = np.random.default_rng(seed)
    sentences = []
    for _ in range(n_sentences):
        template = TEMPLATES[rng.integers(len(TEMPLATES))]
        words = []
        for word in template.split():
            if word.startswith("{"):
                options = CATEGORIES[word.strip("{}")]
                word = options[rng.integers(len(options))]
            words.append(word)
        sentences.append(" ".join(words))
    return sentences


def build_vocabulary(sentences):
    """Sorted list of the distinct words, and the dict word -> index."""
    words = sorted({word for sentence in sentences for word in sentence.split()})
    return words, {word: i for i, word in enumerate(words)}


def skipgram_pairs(sentences, index, window=2):
    """(center, context) index pairs: every word with each word at most `window` steps away.

    Returns two int64 NumPy arrays of equal length.
    """
    centers, contexts = [], []
    for sentence in sentences:
        ids = [index[word] for word in sentence.split()]
        for i, center in enumerate(ids):
            for j in range(max(0, i - window), min(len(ids), i + window + 1)):
                if j != i:
                    centers.append(center)
                    contexts.append(ids[j])
    return np.array(centers, dtype=np.int64), np.array(contexts, dtype=np.int64)
