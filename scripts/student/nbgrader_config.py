# nbgrader reads this file from the folder it runs in (the bundle's root, where `make lab` and
# `make validate` start). What Validate shows: one line per exercise, its whole sentence.
from course_utils import validation

validation.install()
