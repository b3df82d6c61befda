"""Shared code of the course *Attention, from RNNs to Vision Transformers*.

Layers, one topic module each:
  reference/  instructor-only ground truth and mistake catalogues (never shipped to students)
  grading/    student-safe checks that every test cell calls
  widgets/    pure compute functions behind the notebooks' interactive demos
  plots.py    shared figures
  data/       toy data sets generated on the fly
"""
