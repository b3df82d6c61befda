# nbgrader reads this file from the folder it runs in; the course's real configuration
# lives with the grading code.
c = get_config()  # noqa: F821
load_subconfig("autograder/nbgrader_config.py")  # noqa: F821

# What Validate shows a student: one line per exercise, its whole sentence (course_utils/validation.py).
from course_utils import validation  # noqa: E402

validation.install()
