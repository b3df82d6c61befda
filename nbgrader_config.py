# nbgrader reads this file from the folder it runs in; the course's real configuration
# lives with the grading code.
c = get_config()  # noqa: F821
load_subconfig("autograder/nbgrader_config.py")  # noqa: F821

# What Validate shows a student: one line per exercise, its whole sentence (course_utils/validation.py).
# The same hook the environment's own nbgrader_config.py holds (scripts/setup_lab.py), for an
# environment set up without it; it imports the course only when a notebook is validated.
load_subconfig("scripts/student_lab/nbgrader_config.py")  # noqa: F821
