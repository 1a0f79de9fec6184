#!/usr/bin/env bash
# Creates .venv and installs the project's Python dependencies. Idempotent: reruns only
# reinstall when requirements.txt changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha
want=$(sha256sum requirements.txt | cut -d' ' -f1)
# this machine's pip config lists extra local indexes, some absent: hide those lines, keep the rest
quiet_pip() { .venv/bin/pip "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2); }
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # torch first: on a CPU machine this takes the local 2.13.0 CPU wheel instead of a multi-GB CUDA build
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    quiet_pip install --quiet "torch==2.13.0" || quiet_pip install --quiet torch
  fi
  quiet_pip install --quiet -r requirements.txt
  echo "$want" > "$stamp"
fi
