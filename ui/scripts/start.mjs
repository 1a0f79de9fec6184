#!/usr/bin/env node
// `npm run start`: the Next server and the job worker together, one command.
// PORT (default 8675) and AITK_UI_HOST (default 127.0.0.1; another interface only with
// AI_TOOLKIT_AUTH set, see listenHost.mjs) pick where Next listens; every request then passes
// src/proxy.ts (Host, Origin, body type; AITK_UI_ALLOWED_HOSTS adds names). Ctrl-C stops both; job
// processes are detached and keep running (the next start adopts them).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { listenHost } from './listenHost.mjs';

const uiDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const env = {
  ...process.env,
  AITK_REPO_ROOT: process.env.AITK_REPO_ROOT || path.resolve(uiDir, '..'),
  NEXT_TELEMETRY_DISABLED: '1',
};
const port = process.env.PORT || '8675';
const listen = listenHost(process.env);
if (listen.error) {
  console.error(`[start] refusing to start: ${listen.error}`);
  process.exit(2);
}
const workerEntry = path.join(uiDir, 'dist', 'worker', 'index.js');
if (!fs.existsSync(workerEntry) || !fs.existsSync(path.join(uiDir, '.next', 'BUILD_ID'))) {
  console.error('The UI is not built: run `npm run build` in ui/ first.');
  process.exit(1);
}

let shuttingDown = false;
let worker = null;

function startWorker() {
  worker = spawn(process.execPath, [workerEntry], { cwd: uiDir, env, stdio: 'inherit' });
  worker.on('exit', (code, signal) => {
    if (shuttingDown) return;
    console.error(`[start] worker exited (${signal || code}); restarting in 2 s`);
    setTimeout(() => !shuttingDown && startWorker(), 2000);
  });
}

const nextArgs = [path.join(uiDir, 'node_modules', 'next', 'dist', 'bin', 'next'), 'start', '-p', port, '-H', listen.host];
const next = spawn(process.execPath, nextArgs, { cwd: uiDir, env, stdio: 'inherit' });
startWorker();

function shutdown(code) {
  if (shuttingDown) return;
  shuttingDown = true;
  const children = [next, worker].filter((c) => c && c.exitCode === null && c.signalCode === null);
  let left = children.length;
  if (left === 0) process.exit(code);
  for (const child of children) {
    child.once('exit', () => --left === 0 && process.exit(code));
    child.kill('SIGTERM');
  }
  setTimeout(() => {
    for (const child of children) child.kill('SIGKILL');
    process.exit(code);
  }, 5000);
}

next.on('exit', (code, signal) => {
  console.error(`[start] next exited (${signal || code})`);
  shutdown(code ?? 1);
});
process.on('SIGINT', () => shutdown(0));
process.on('SIGTERM', () => shutdown(0));
