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
const dir = process.env.AITK_E2E_DIR;
const port = process.env.AITK_E2E_PORT;
const authPort = process.env.AITK_E2E_AUTH_PORT;

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
