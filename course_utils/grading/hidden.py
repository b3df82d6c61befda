"""The hidden tests' entry point: `hidden.catalogue(topic).check(grade_id, answer)`.

Every graded test cell ends its hidden block with these calls, and this module decides where
the answer is judged:

* In the course's own tests and in the solution notebooks (the reference is installed and no
  grading session is running) the topic's mistake catalogue judges the answer here and now,
  through the same serialise-then-judge round trip the grader uses.
* Under the autograder the reference is not in the student's sandbox at all. The answer is
  run on the cases the grader wrote, its results are sent out as plain data, and the grader
  judges them outside the student's process (see `probe` and autograder/judge.py).

Nothing in this module knows an answer.
"""
import importlib

from . import probe

__all__ = ["catalogue", "Catalogue"]


class Catalogue:
    """The hidden checks of one topic (a notebook), named as course_utils.reference.mistakes.<topic>."""

    def __init__(self, topic):
        if not isinstance(topic, str) or not topic.isidentifier():
            raise ValueError(f"a catalogue topic is a module name, not {topic!r}")
        self.topic = topic

    def __repr__(self):
        return f"hidden.catalogue({self.topic!r})"

    def _judge_here(self, grade_id, answer, generic):
        module = importlib.import_module(f"course_utils.reference.mistakes.{self.topic}")
        exercise = module.EXERCISES[grade_id]
        return exercise.check(answer, generic=generic)

    def diagnose(self, grade_id, answer):
        """Fail with the catalogued mistake's message if `answer` makes one (or crashes, or uses
        what the exercise forbids); an uncatalogued wrong answer passes here, so the visible
        tests after this line can say something more specific. `check` fails it later."""
        if probe.session() is not None:
            return probe.record(self.topic, grade_id, answer, probe.DIAGNOSE)
        return self._judge_here(grade_id, answer, generic=False)

    def check(self, grade_id, answer):
        """Fail if `answer` is wrong in any way, naming the mistake when it is catalogued."""
        if probe.session() is not None:
            return probe.record(self.topic, grade_id, answer, probe.CHECK)
        return self._judge_here(grade_id, answer, generic=True)


def catalogue(topic):
    return Catalogue(topic)
