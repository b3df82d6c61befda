"""Grading a class with nbgrader: intake, isolated autograding, feedback, export."""
