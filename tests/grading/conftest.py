# The fixture notebook is nbgrader source for the grading tests, not a course notebook to run.
collect_ignore_glob = ["fixtures/*"]
