"""The catalogue registry (course_utils/reference/mistakes/registry.py): every catalogue is found
by listing the package, each exercise is found in the catalogue that holds it, whatever the
number of words in its topic's name."""
import pathlib

import pytest

from course_utils.reference.mistakes import registry

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_catalogue_is_a_notebooks_topic_and_helpers_are_not_catalogues():
    topics = set(registry.catalogues())
    folders = {p.name.split("_", 1)[1] for p in (ROOT / "solutions").iterdir() if p.is_dir() and "_" in p.name}
    on_disk = {p.stem for p in (ROOT / "course_utils/reference/mistakes").glob("*.py")} - {"__init__", "registry", "gradients"}
    assert topics == on_disk and topics <= folders, (topics ^ on_disk, topics - folders)


def test_each_exercise_is_found_in_its_own_catalogue():
    for topic, exercises in registry.catalogues().items():
        for grade_id, exercise in exercises.items():
            assert registry.topic_of(grade_id) == topic
            assert registry.exercise(grade_id) is exercise


def test_an_id_no_catalogue_holds_is_a_key_error():
    with pytest.raises(KeyError, match="self_attention_no_such_thing"):
        registry.exercise("self_attention_no_such_thing")
