#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image (Ubuntu), with the
# autograder zip unpacked in /autograder/source. It installs the course there: Python 3.11, the
# grading sandbox (bubblewrap; setpriv, prlimit and timeout come with util-linux and coreutils),
# and a virtual environment with the course (`pip install -e .`) and PyTorch's CPU build.
# Any other image (a PrairieLearn grader image, say) runs it the same way:
#   COURSE=/course bash /course/setup.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
COURSE="${COURSE:-$here}"
if [ ! -f "$COURSE/pyproject.toml" ]; then COURSE=/autograder/source; fi
if [ ! -f "$COURSE/pyproject.toml" ]; then
    echo "setup.sh: no pyproject.toml in $here or /autograder/source: is this the course's autograder zip?" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive

apt-get update
apt-get install -y --no-install-recommends bubblewrap util-linux coreutils ca-certificates

# Python 3.11 (the course pins it): the image's own if it has one, else Ubuntu's package
# (22.04 has python3.11 in universe), else the deadsnakes PPA (24.04 and later).
if ! command -v python3.11 >/dev/null 2>&1 || ! python3.11 -c "import ensurepip, venv" >/dev/null 2>&1; then
    if ! apt-get install -y --no-install-recommends python3.11 python3.11-venv; then
        apt-get install -y --no-install-recommends software-properties-common gpg-agent
        add-apt-repository -y universe || true
        add-apt-repository -y ppa:deadsnakes/ppa
        apt-get update
        apt-get install -y --no-install-recommends python3.11 python3.11-venv
    fi
fi

python3.11 -m venv "$COURSE/.venv"
pip="$COURSE/.venv/bin/pip"
"$pip" install --no-cache-dir --upgrade pip
# PyPI's torch for Linux is the CUDA build (gigabytes of nvidia-* wheels a grader never uses):
# the CPU build first, from PyTorch's own index, at the course's pin, without its dependencies:
# those come next from PyPI at the tested versions, with everything else (constraints.txt, the
# full `pip freeze` of the environment the course was tested in), so an image built months
# later holds what was tested.
"$pip" install --no-cache-dir --no-deps torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
"$pip" install --no-cache-dir -c "$COURSE/constraints.txt" -e "$COURSE"

# Fail the image build now rather than every submission later.
"$COURSE/.venv/bin/python" -c "import torch, nbgrader, course_utils.reference, autograder.platforms; print('course installed: torch', torch.__version__)"
"$COURSE/.venv/bin/python" -c "
from autograder import sandbox
why = sandbox.why_unavailable()
print('bubblewrap sandbox:', 'available' if why is None else 'NOT available here (' + why + '); '
      'run_autograder grades with --container-fallback, relying on the container (autograder/README.md)')"

# Warm the grader's cache while the image is built (autograder/README.md): grade the solution of
# the configured assignment (or of every assignment) once, so that each submission costs one
# grading, not two. A failure here is printed and does not stop the build: the first submission
# then pays for the check instead.
# The limits are part of the cached verdict's key: warm with the same ones run_autograder passes.
# So are PyTorch's kernel family on this CPU (AVX2, AVX512) and whether bubblewrap can start: a grading machine unlike this one
# checks the solution again for each submission (autograder/README.md).
assignment="" limits=()
if [ -f "$COURSE/gradescope.conf" ]; then
    assignment="$(sed -n 's/^assignment=//p' "$COURSE/gradescope.conf" | head -n 1)"
    timeout="$(sed -n 's/^timeout=//p' "$COURSE/gradescope.conf" | head -n 1)"
    memory="$(sed -n 's/^memory=//p' "$COURSE/gradescope.conf" | head -n 1)"
    if [ -n "$timeout" ]; then limits+=(--timeout "$timeout"); fi
    if [ -n "$memory" ]; then limits+=(--memory "$memory"); fi
fi
for folder in "$COURSE"/solutions/[0-9][0-9]_*/; do
    a="$(basename "$folder")"
    if [ -n "$assignment" ] && [ "$a" != "$assignment" ]; then continue; fi
    (cd "$COURSE" && "$COURSE/.venv/bin/python" -m autograder gradescope "$folder" /tmp/warm-"$a".json \
        --assignment "$a" --container-fallback ${limits[@]+"${limits[@]}"} >/dev/null) \
        && echo "cache warmed: $a" || echo "cache not warmed for $a (the first submission checks the solution)"
done
