// Shared test helpers: a private DB + training folder per test file, job rows, engine.json files.
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { closeAllDbs, getDb } from '@/server/db';
import { jobTable, type JobRow } from '@/server/schema';

export function useTempEnv(prefix: string): { dir: string; cleanup: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `aitk-${prefix}-`));
  const saved = { db: process.env.AITK_DB_PATH, tf: process.env.AITK_TRAINING_FOLDER, auth: process.env.AI_TOOLKIT_AUTH };
  process.env.AITK_DB_PATH = path.join(dir, 'aitk_db.db');
  process.env.AITK_TRAINING_FOLDER = path.join(dir, 'output');
  delete process.env.AI_TOOLKIT_AUTH;
  return {
    dir,
    cleanup: () => {
      closeAllDbs();
      for (const [k, v] of [
        ['AITK_DB_PATH', saved.db],
        ['AITK_TRAINING_FOLDER', saved.tf],
        ['AI_TOOLKIT_AUTH', saved.auth],
      ] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function insertJob(fields: Partial<JobRow> & { name: string }): JobRow {
  const now = new Date().toISOString();
  const row: JobRow = {
    id: randomUUID(),
    gpu_ids: 'cpu',
    job_config: JSON.stringify({ job: 'extension', config: { name: fields.name, process: [{ type: 'InferenceEngine' }] } }),
    status: 'running',
    stop: 0,
    step: 0,
    info: '',
    job_type: 'inference',
    pid: null,
    created_at: now,
    updated_at: now,
    ...fields,
  };
  getDb().insert(jobTable).values(row).run();
  return row;
}

export function writeEngineJson(jobName: string, engine: { port: number; token: string; pid: number; host?: string }): string {
  const folder = path.join(process.env.AITK_TRAINING_FOLDER as string, jobName);
  fs.mkdirSync(folder, { recursive: true });
  const file = path.join(folder, 'engine.json');
  fs.writeFileSync(file, JSON.stringify({ host: '127.0.0.1', started_at: new Date().toISOString(), ...engine }));
  return file;
}

/** A pid that certainly belonged to a process that has exited. */
export function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', '0']);
  return r.pid as number;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
