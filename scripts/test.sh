#!/usr/bin/env bash
# Every test: the UI's (vitest + Playwright e2e against the real engine) and the Python suite
# (one pytest process). Run scripts/setup.sh and scripts/setup_ui.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
AITK_UI_SKIP_BUILD=1 bash scripts/test_ui.sh
.venv/bin/python -m pytest testing/tests -q
