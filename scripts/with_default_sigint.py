"""Run a command with SIGINT at its default action.

A shell without job control starts background commands with SIGINT ignored, and every process
they start inherits that. `make test` runs the grading suite in the background, beside the main
run; without this, Ctrl-C would not stop it, and its test that a batch stops on Ctrl-C would
wait for nothing. Usage: python scripts/with_default_sigint.py COMMAND [ARGS...]
"""
import os
import signal
import sys

if len(sys.argv) < 2:
    sys.exit(__doc__)
signal.signal(signal.SIGINT, signal.SIG_DFL)  # kept across exec; an ignored signal would be too
os.execvp(sys.argv[1], sys.argv[1:])
