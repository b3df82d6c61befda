#!/usr/bin/env bash
# What `make test` needs beyond Python: the grading sandbox (bubblewrap), a browser for the
# JupyterLab and feedback-page tests (Debian's chromium), Node for JupyterHub's proxy, openssl
# for the hub test's accounts, and the proxy itself from its lock file.
#
# Why a script of its own: a newcomer's `make test` must either set all of this up or stop in the
# first seconds with the one command to run, never spend 20 minutes and then skip or error.
# Installs with apt when it can (root on Debian/Ubuntu); otherwise prints what to run and fails.
# `make lab` never needs any of it: students need only Python.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)       # sandbox for grading students' kernels
[ -x /usr/bin/chromium ] || missing+=(chromium)            # browser tests (Playwright drives it)
command -v node >/dev/null || missing+=(nodejs)            # JupyterHub's proxy
command -v npm >/dev/null || missing+=(npm)
command -v openssl >/dev/null || missing+=(openssl)        # the hub test's account passwords

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "make test: installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "make test needs system packages that are not installed: ${missing[*]}" >&2
    if command -v apt-get >/dev/null; then
      echo "run:  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    else
      echo "they are Debian/Ubuntu packages: the grading sandbox (bubblewrap) needs Linux;" \
           "on another system run make test in a Debian container or a Linux VM" >&2
    fi
    echo "(make lab does not need them: students need only Python 3.11)" >&2
    exit 1
  fi
fi

# The sandbox must really start, not just be installed (a container may forbid user namespaces).
"$VENV/bin/python" - <<'PY'
import sys
from autograder import sandbox
reason = sandbox.why_unavailable()
if reason:
    sys.exit(f"make test: the grading sandbox cannot run on this machine: {reason}")
PY

# The grader's fallback for platform containers (no namespaces) runs student kernels as an
# unprivileged user that must be able to start the course's Python, as it can in the platforms'
# images (/usr/bin/python3.11). A Python under a private home (pyenv in /root) is not reachable:
# let others traverse (not list) the folders above it, or the fallback's tests cannot run here.
if [ "$(id -u)" = 0 ]; then
  "$VENV/bin/python" - <<'PY'
import os, stat, sys
path = os.path.dirname(os.path.realpath(sys.executable))
while path != "/":
    mode = os.stat(path).st_mode
    if not mode & stat.S_IXOTH:
        os.chmod(path, stat.S_IMODE(mode) | stat.S_IXOTH)
        print(f"make test: {path} made traversable (o+x) for the unprivileged grading user")
    path = os.path.dirname(path)
PY
fi

# configurable-http-proxy for the hub test, from the lock file, into $VENV/hub; reinstalled
# only when the lock file changes.
hub="$VENV/hub"
if ! cmp -s tests/grading/hub/package-lock.json "$hub/package-lock.json" \
   || [ ! -x "$hub/node_modules/.bin/configurable-http-proxy" ]; then
  mkdir -p "$hub"
  cp tests/grading/hub/package.json tests/grading/hub/package-lock.json "$hub/"
  npm ci --prefix "$hub" --no-audit --no-fund --loglevel=error
  echo "configurable-http-proxy $("$hub/node_modules/.bin/configurable-http-proxy" --version) installed in $hub"
fi
