// Playwright e2e: the built UI (`node scripts/start.mjs`: Next + worker) against the real engine
// on a tiny model, driven through Debian's chromium. A private DB and training folder per run.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defineConfig } from '@playwright/test';

// set once in the main process; the test workers inherit them
process.env.AITK_E2E_DIR ||= fs.mkdtempSync(path.join(os.tmpdir(), 'aitk-e2e-'));
process.env.AITK_E2E_PORT ||= '8695';
process.env.AITK_E2E_AUTH_PORT ||= '8696';
process.env.AITK_E2E_AUTH_TOKEN ||= 'e2e-secret-token';
// the fake hub (testing/fake_hub.py) downloads.spec.ts fetches from: the port after the auth UI's
process.env.AITK_E2E_HUB_PORT ||= String(Number(process.env.AITK_E2E_PORT) + 2);
const dir = process.env.AITK_E2E_DIR;
const port = process.env.AITK_E2E_PORT;
const authPort = process.env.AITK_E2E_AUTH_PORT;
const hubPort = process.env.AITK_E2E_HUB_PORT;
const repoRoot = path.join(__dirname, '..');

export default defineConfig({
  testDir: 'e2e',
  outputDir: 'test-results/e2e',
  timeout: 300_000,
  expect: { timeout: 20_000 },
  workers: 1,
  retries: 0,
  reporter: [['list']],
  globalTeardown: './e2e/globalTeardown.ts',
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    browserName: 'chromium',
    viewport: { width: 1400, height: 1000 },
    screenshot: 'only-on-failure',
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: process.env.AITK_CHROMIUM || '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    },
  },
  webServer: [
    {
      // a local server in the hub's layout; the engines the UI starts download from it (HF_ENDPOINT below)
      command: `"${process.env.AITK_PYTHON || path.join(repoRoot, '.venv', 'bin', 'python')}" -m testing.fake_hub --root "${path.join(dir, 'fake-hub')}" --port ${hubPort}`,
      cwd: repoRoot,
      url: `http://127.0.0.1:${hubPort}/_control/held`,
      timeout: 60_000,
      reuseExistingServer: false,
    },
    {
      command: 'node scripts/start.mjs',
      url: `http://127.0.0.1:${port}/api/jobs`,
      timeout: 60_000,
      reuseExistingServer: false,
      stdout: 'pipe',
      stderr: 'pipe',
      gracefulShutdown: { signal: 'SIGTERM', timeout: 10_000 },
      env: {
        PORT: port,
        AITK_UI_HOST: '127.0.0.1',
        AITK_DB_PATH: path.join(dir, 'aitk_db.db'),
        AITK_TRAINING_FOLDER: path.join(dir, 'output'),
        NEXT_TELEMETRY_DISABLED: '1',
        // reach the engines through the worker's environment: downloads from the fake hub, into a hub
        // cache of this run's own (the machine's is never written)
        HF_ENDPOINT: `http://127.0.0.1:${hubPort}`,
        HF_HUB_CACHE: path.join(dir, 'hub-cache'),
      },
    },
    {
      // a second UI with AI_TOOLKIT_AUTH set (its own DB), for auth.spec.ts
      command: 'node scripts/start.mjs',
      url: `http://127.0.0.1:${authPort}/generate`,
      timeout: 60_000,
      reuseExistingServer: false,
      gracefulShutdown: { signal: 'SIGTERM', timeout: 10_000 },
      env: {
        PORT: authPort,
        AITK_UI_HOST: '127.0.0.1',
        AI_TOOLKIT_AUTH: process.env.AITK_E2E_AUTH_TOKEN,
        AITK_DB_PATH: path.join(dir, 'auth', 'aitk_db.db'),
        AITK_TRAINING_FOLDER: path.join(dir, 'auth', 'output'),
        NEXT_TELEMETRY_DISABLED: '1',
      },
    },
  ],
});
