"""Every mistake catalogue, found by listing this package: which topic holds which exercise.

Why: a grade id is `<topic>_<exercise>`, and both halves may have any number of words
("llm_attention_cache_guess": topic "llm_attention"; "causal_cnn_layers_needed": "causal_cnn"),
so code that needs "the catalogue of this exercise" asks here instead of cutting the id. A topic is
a catalogue module's name (the notebook's folder without its number); a module beside it without
`EXERCISES` (shared helpers such as `gradients`) is no catalogue.
"""
import importlib
import pkgutil

from course_utils.reference import mistakes


def catalogues():
    """{topic: its EXERCISES ({grade_id: Exercise})} of every catalogue, by topic name."""
    found = {}
    for info in sorted(pkgutil.iter_modules(mistakes.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{mistakes.__name__}.{info.name}")
        exercises = getattr(module, "EXERCISES", None)
        if exercises:
            found[info.name] = exercises
    return found


def topic_of(grade_id):
    """The topic whose catalogue holds the answer cell `grade_id`; KeyError when none does."""
    for topic, exercises in catalogues().items():
        if grade_id in exercises:
            return topic
    raise KeyError(f"no mistake catalogue holds the exercise {grade_id!r}")


def exercise(grade_id):
    """The catalogued Exercise of the answer cell `grade_id`; KeyError when none holds it."""
    return catalogues()[topic_of(grade_id)][grade_id]
