#!/usr/bin/env bash
# Sets up the web UI (ui/): Debian's chromium for the browser tests (apt, without recommended
# packages: chromium recommends only chromium-sandbox, and the tests run it with --no-sandbox;
# `npx playwright install` is not used, so its flags do not apply), the node modules
# (package-lock.json, exact versions; better-sqlite3 builds from source), and the build.
# Idempotent: a rerun reinstalls modules only when package-lock.json changed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/chromium ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium
fi

cd ui
export NEXT_TELEMETRY_DISABLED=1
stamp=node_modules/.package-lock.sha
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -e node_modules/better-sqlite3/build/Release/better_sqlite3.node ]; then
  npm ci --no-audit --no-fund
  echo "$want" > "$stamp"
fi
npm run build
