// After the e2e: no engine process of this run may outlive it (they are detached from the UI).
import fs from 'node:fs';
import Database from 'better-sqlite3';
import { DB_PATH } from './env';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export default async function globalTeardown() {
  if (!fs.existsSync(DB_PATH)) return;
  const db = new Database(DB_PATH, { readonly: true });
  const pids = (db.prepare('SELECT pid FROM Job WHERE pid IS NOT NULL').all() as { pid: number }[]).map((r) => r.pid).filter(alive);
  db.close();
  for (const pid of pids) {
    console.log(`[teardown] stopping leftover job process ${pid}`);
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {
      // gone
    }
  }
  const deadline = Date.now() + 15_000;
  while (pids.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  for (const pid of pids.filter(alive)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}
