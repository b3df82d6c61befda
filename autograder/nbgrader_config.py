"""nbgrader configuration of the course (instructor side).

The course root holds `solutions/` (nbgrader's source folder) and `notebooks/` (its release
folder); the gradebook and nbgrader's step folders (`submitted/`, `autograded/`, `feedback/`)
are working state, ignored by git.
"""
import os

c = get_config()  # noqa: F821  (injected by traitlets)

COURSE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

c.CourseDirectory.root = COURSE_ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(COURSE_ROOT, "gradebook.db")

# Releases are regenerated from solutions/: the copy in notebooks/ is never edited by hand.
c.GenerateAssignment.force = True
# Students should not see stale outputs of the solutions, and the release must be byte-stable.
c.ClearOutput.enabled = True

# LMS zips whose files are not laid out <student>/<assignment>/<notebook>.ipynb are parsed with
# nbgrader's zip-collect plugin; its regular expression must capture student_id and file_id and
# may capture assignment_id (default and examples: autograder/README.md). For example:
# c.FileNameCollectorPlugin.named_regexp = r"^(?P<student_id>[^_/]+)_(?:\d+_)*(?P<file_id>[^/]+\.ipynb)$"
