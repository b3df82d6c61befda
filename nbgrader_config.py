# nbgrader reads this file from the folder it runs in; the course's real configuration
# lives with the grading code.
c = get_config()  # noqa: F821
load_subconfig("autograder/nbgrader_config.py")  # noqa: F821
