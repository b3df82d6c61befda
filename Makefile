# Attention, from RNNs to Vision Transformers: the course's commands.
# Every target creates .venv on first use, so a newcomer needs only `make lab` or `make test`.

PYTHON  ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
READY   := $(VENV)/.ready
ASSIGNMENTS := $(notdir $(wildcard solutions/[0-9][0-9]_*))
PYTEST_ARGS ?=
# nbgrader runs alembic (and the tests run jupyter) as commands: the environment comes first.
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: lab release test grade bench bundle setup clean execute

setup: $(READY)

# One stamp for the whole environment: rebuilt when the pinned dependencies change.
$(READY): pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "the course needs Python 3.11 (set PYTHON=...)"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@# pip installs and enables the nbgrader and widget extensions; prove it rather than trust it.
	$(BIN)/jupyter server extension list 2>&1 | grep -q "nbgrader.server_extensions.validate_assignment.*enabled"
	$(BIN)/jupyter labextension list 2>&1 | grep -q "@jupyter/nbgrader.*enabled"
	$(BIN)/jupyter labextension list 2>&1 | grep -q "@jupyter-widgets/jupyterlab-manager.*enabled"
	$(BIN)/python scripts/setup_lab.py
	touch $@

lab: $(READY)
	$(BIN)/jupyter lab notebooks/ $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

release: $(READY)
	@for a in $(ASSIGNMENTS); do \
	  $(BIN)/nbgrader generate_assignment "$$a" --force --log-level=WARN || exit 1; \
	done
	@echo "released: $(ASSIGNMENTS)"

# Two workers for everything but the sandboxed grading suite (loadscope keeps a notebook's nbval
# cells in one kernel). That suite runs alone afterwards: it asserts that no sandbox process
# outlives a batch, and its endless-loop students must not slow other tests down.
test: $(READY)
	$(BIN)/python -m pytest -n 2 --dist loadscope --ignore=tests/grading $(PYTEST_ARGS)
	$(BIN)/python -m pytest tests/grading $(PYTEST_ARGS)

# make grade SUBMISSIONS=path/to/folder-or.zip [OUT=grades] [ARGS="--jobs 2"]
OUT ?= grading-results
grade: $(READY)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder-or-zip [OUT=dir]"; exit 2; }
	$(BIN)/python -m autograder grade "$(SUBMISSIONS)" --out "$(OUT)" $(ARGS)

bench: $(READY)
	$(BIN)/python bench/run.py

bundle: $(READY)
	$(BIN)/python scripts/bundle.py dist/student-bundle.zip

clean:
	rm -rf $(VENV) dist .pytest_cache

# Re-run a source notebook and store its outputs: make execute NB=solutions/05_self_attention/self_attention.ipynb
execute: $(READY)
	@test -n "$(NB)" || { echo "usage: make execute NB=solutions/NN_topic/topic.ipynb"; exit 2; }
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace "$(NB)"
	$(BIN)/python scripts/strip_widget_state.py "$(NB)"
