# Attention, from RNNs to Vision Transformers: the course's commands.
# Every target creates .venv on first use, so a newcomer needs only `make lab` or `make test`.

PYTHON  ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
READY   := $(VENV)/.ready
# The lab's settings and nbgrader's Validate hook in the environment (scripts/setup_lab.py).
LAB_CONFIG := $(VENV)/etc/jupyter/nbgrader_config.py
ASSIGNMENTS := $(notdir $(wildcard solutions/[0-9][0-9]_*))
PYTEST_ARGS ?=
# nbgrader runs alembic (and the tests run jupyter) as commands: the environment comes first.
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: lab lab-instructor release test test-cpus test-tools grade bench bundle gradescope setup clean execute

setup: $(READY) $(LAB_CONFIG)

# One stamp for the whole environment: rebuilt when the pinned dependencies change.
$(READY): pyproject.toml constraints.txt scripts/student_lab/overrides.json
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "the course needs Python 3.11 (set PYTHON=...)"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
	@# pip installs and enables the nbgrader and widget extensions; prove it rather than trust it.
	$(BIN)/jupyter server extension list 2>&1 | grep -q "nbgrader.server_extensions.validate_assignment.*enabled"
	$(BIN)/jupyter labextension list 2>&1 | grep -q "@jupyter/nbgrader.*enabled"
	$(BIN)/jupyter labextension list 2>&1 | grep -q "@jupyter-widgets/jupyterlab-manager.*enabled"
	$(BIN)/python scripts/setup_lab.py
	touch $@

# Also on its own, so that an environment set up before a change of these files gets it at the
# next make setup / make lab without reinstalling anything. nbgrader reads this file wherever it
# runs: Validate prints one line per exercise even in a lab started from workspace/ itself.
$(LAB_CONFIG): scripts/setup_lab.py scripts/student_lab/nbgrader_config.py scripts/student_lab/overrides.json | $(READY)
	$(BIN)/python scripts/setup_lab.py
	touch $@

# Students work in workspace/ (git-ignored), seeded from the release and never overwritten: the
# release in notebooks/ is generated, so work done there could be lost or shipped. The student lab
# leaves out the instructor's nbgrader tools (scripts/student_lab/); `make lab-instructor` has them.
lab: $(READY) $(LAB_CONFIG)
	STUDENT="$(STUDENT)" $(BIN)/python scripts/workspace.py notebooks workspace
	JUPYTER_CONFIG_PATH=$(CURDIR)/scripts/student_lab $(BIN)/jupyter lab workspace/ $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

lab-instructor: $(READY)
	$(BIN)/jupyter lab $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

# One nbgrader process for every assignment (nbgrader globs the id): its start-up is paid once.
release: $(READY)
	$(BIN)/nbgrader generate_assignment "[0-9][0-9]_*" --force --log-level=WARN
	@for a in $(ASSIGNMENTS); do test -d "notebooks/$$a" || { echo "not released: $$a"; exit 1; }; done
	@echo "released: $(ASSIGNMENTS)"

# Three kinds of pytest run; each runs even when another failed, and `make test` fails if any
# did. The time of each is printed at the end.
# 1. Two workers for everything but the sandboxed grading suite (loadscope keeps a notebook's
#    nbval cells in one kernel), on this CPU's best kernels with one thread per kernel.
# 2. The stored notebook outputs again, as other CPUs would compute them: PyTorch's portable
#    kernels (ATEN_CPU_CAPABILITY=default) with two threads per kernel, after run 1, and its AVX2
#    kernels (the commonest laptop's; on an AVX2 machine that is run 1's) with one, after run 3,
#    each in two workers (four threads on two cores change how fast, not what a kernel
#    computes). With run 1's own kernels (AVX-512 where the CPU has it) every x86 capability
#    PyTorch ships is covered.
# 3. Alongside, the grading suite in a process of its own (it asserts that no sandbox process
#    outlives a batch, so it never shares its pytest run; its students mostly wait on timeouts,
#    which leaves the CPU to the other runs). Its log, and the AVX2 run's, are printed at the end.
#    The first lane (run 1, then the portable kernels) ends about 110 s before the second (run 3,
#    then AVX2), whose AVX2 workers then have both cores: the machine stays busy to the end.
# `make test-cpus` validates the outputs on every capability and thread count (slower).
OTHER_CPU := ATEN_CPU_CAPABILITY=default COURSE_TEST_THREADS=2
AVX2_CPU := ATEN_CPU_CAPABILITY=avx2 COURSE_TEST_THREADS=1
# What make test needs beyond Python (bubblewrap, chromium, node, the hub proxy): installed with
# apt when run as root on Debian/Ubuntu, otherwise it stops at once with the command to run.
test-tools: $(READY)
	@VENV=$(VENV) bash scripts/test_tools.sh

test: $(READY) test-tools
	@status=0; log=$$(mktemp); t0=$$(date +%s); \
	( $(BIN)/python scripts/with_default_sigint.py $(BIN)/python -m pytest tests/grading $(PYTEST_ARGS) > $$log 2>&1; echo $$? > $$log.rc; echo $$(( $$(date +%s) - t0 )) > $$log.s; \
	  $(AVX2_CPU) $(BIN)/python -m pytest -n 2 --dist loadscope solutions $(PYTEST_ARGS) > $$log.avx2 2>&1; echo $$? > $$log.avx2rc; echo $$(( $$(date +%s) - t0 )) > $$log.avx2s ) & lane=$$!; \
	$(BIN)/python -m pytest -n 2 --dist loadscope --ignore=tests/grading $(PYTEST_ARGS) || status=1; t1=$$(date +%s); \
	$(OTHER_CPU) $(BIN)/python -m pytest -n 2 --dist loadscope solutions $(PYTEST_ARGS) || status=1; t2=$$(date +%s); \
	wait $$lane; echo "== the grading suite (tests/grading), which ran alongside:"; cat $$log; \
	echo "== then, in its lane, the stored outputs on AVX2 kernels:"; cat $$log.avx2; \
	[ "$$(cat $$log.rc 2>/dev/null)" = 0 ] || status=1; [ "$$(cat $$log.avx2rc 2>/dev/null)" = 0 ] || status=1; \
	echo "make test times: run 1 (everything but grading) $$(( t1 - t0 )) s, then run 2 on portable kernels $$(( t2 - t1 )) s; alongside, run 3 (grading suite) $$(cat $$log.s 2>/dev/null) s, then run 2 on AVX2 kernels $$(( $$(cat $$log.avx2s 2>/dev/null || echo 0) - $$(cat $$log.s 2>/dev/null || echo 0) )) s; in all $$(( $$(date +%s) - t0 )) s"; \
	rm -f $$log $$log.rc $$log.s $$log.avx2 $$log.avx2rc $$log.avx2s; \
	[ $$status -eq 0 ] || echo "make test: at least one of the pytest runs failed (see above)"; \
	exit $$status

CAPABILITIES ?= default avx2 native
test-cpus: $(READY)
	@status=0; \
	for cap in $(CAPABILITIES); do for threads in 1 2; do \
	  echo "== nbval with ATEN_CPU_CAPABILITY=$$cap, $$threads thread(s)"; \
	  if [ $$cap = native ]; then unset ATEN_CPU_CAPABILITY; else export ATEN_CPU_CAPABILITY=$$cap; fi; \
	  COURSE_TEST_THREADS=$$threads $(BIN)/python -m pytest solutions -q $(PYTEST_ARGS) || status=1; \
	done; done; \
	exit $$status

# make grade SUBMISSIONS=path/to/folder-or.zip [OUT=grades] [ARGS="--jobs 2"]
OUT ?= grading-results
grade: $(READY)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder-or-zip [OUT=dir]"; exit 2; }
	$(BIN)/python -m autograder grade "$(SUBMISSIONS)" --out "$(OUT)" $(ARGS)

bench: $(READY)
	$(BIN)/python bench/run.py

# The zip and, beside it, the student wheel (pip install it; attention-course init DIR).
bundle: $(READY)
	$(BIN)/python scripts/bundle.py dist/student-bundle.zip

# The Gradescope autograder zip, from the last commit:
# make gradescope [ASSIGNMENT=05_self_attention] [VISIBILITY=visible] [TIMEOUT=60] [MEMORY=4]
gradescope: $(READY)
	$(BIN)/python scripts/build_gradescope_zip.py $(if $(ASSIGNMENT),--assignment $(ASSIGNMENT)) \
	  $(if $(VISIBILITY),--visibility $(VISIBILITY)) $(if $(TIMEOUT),--timeout $(TIMEOUT)) $(if $(MEMORY),--memory $(MEMORY))

clean:
	rm -rf $(VENV) dist .pytest_cache

# Re-run a source notebook and store its outputs: make execute NB=solutions/05_self_attention/self_attention.ipynb
# A cell that displays widgets sometimes never gets its reply (nbclient issue #312, seen here on loaded
# machines): after 180 s the run fails instead of hanging; run it again.
execute: $(READY)
	@test -n "$(NB)" || { echo "usage: make execute NB=solutions/NN_topic/topic.ipynb"; exit 2; }
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=180 "$(NB)"
	$(BIN)/python scripts/strip_widget_state.py "$(NB)"
