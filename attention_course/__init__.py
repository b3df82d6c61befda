"""The student's side of the course outside a clone: `pip install` the course's wheel, then
`attention-course init DIR` (attention_course/cli.py) gives a folder of notebooks to open in any
Jupyter. The clone's `make lab` uses the same two steps (workspace.py, jupyter_setup.py), so a
student who installs the wheel and one who clones the repository get the same lab."""
