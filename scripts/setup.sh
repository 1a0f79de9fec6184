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
want=$( (cat requirements.txt; cat "$0") | sha256sum | cut -d' ' -f1)
# this machine's pip config lists extra local indexes, some absent: hide those lines, keep the rest
quiet_pip() { .venv/bin/pip "$@" 2> >(grep -v "^WARNING: Location 'file://" >&2); }
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # torch and torchvision first, as a matching pair: Qwen-Image-Edit's processor needs torchvision,
  # and PyPI has no CPU torchvision for the 2.13 CPU wheel (README, "torch and torchvision")
  if ! .venv/bin/python -c "import torch, torchvision" 2>/dev/null; then
    quiet_pip install --quiet "torch==2.14.1" "torchvision==0.29.1" || quiet_pip install --quiet torch torchvision
  fi
  quiet_pip install --quiet -r requirements.txt
  echo "$want" > "$stamp"
fi
