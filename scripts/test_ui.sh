#!/usr/bin/env bash
# The UI's tests: vitest (engineStream, the proxy and API routes, the job worker) and the
# Playwright e2e against the built UI and the real engine (tiny model, CPU), on a free port
# with a throwaway DB and training folder. Run scripts/setup_ui.sh (and scripts/setup.sh for
# the engine's .venv) first. Screenshots land in ui/test-results/screenshots/.
# AITK_UI_SKIP_BUILD=1 skips the rebuild of the UI.
set -euo pipefail
cd "$(dirname "$0")/../ui"
export NEXT_TELEMETRY_DISABLED=1

if [ "${AITK_UI_SKIP_BUILD:-}" != "1" ] || [ ! -f .next/BUILD_ID ] || [ ! -f dist/worker/index.js ]; then
  npm run build
fi

npx vitest run

e2e_dir=$(mktemp -d "${TMPDIR:-/tmp}/aitk-e2e-XXXXXX")
trap 'rm -rf "$e2e_dir"' EXIT
rm -rf test-results/screenshots
# two free ports (both held open while asking, so they differ): the UI, and a UI with AI_TOOLKIT_AUTH
read -r port auth_port < <(node -e "
const net = require('net'); const a = net.createServer(), b = net.createServer();
a.listen(0, '127.0.0.1', () => b.listen(0, '127.0.0.1', () => {
  console.log(a.address().port, b.address().port); a.close(); b.close(); }));")
AITK_E2E_DIR="$e2e_dir" AITK_E2E_PORT=$port AITK_E2E_AUTH_PORT=$auth_port npx playwright test
