// Which engine a request goes to: the running inference job named by ?job=, or else the only
// one. Its <job folder>/engine.json gives host, port, token and pid; the file is cached ~2 s
// and its pid must be alive (a killed engine leaves a stale file behind).
import fs from 'node:fs';
import path from 'node:path';
import { listJobs } from './jobs';
import { jobFolder } from './paths';
import { isPidAlive } from './processes';
import type { JobRow } from './schema';

export interface EngineFile {
  host: string;
  port: number;
  token: string;
  pid: number;
  started_at?: string;
}

export type EngineResolution =
  | { ok: true; job: JobRow; engine: EngineFile }
  | { ok: false; status: number; code: string; message: string };

const CACHE_MS = 2000;
const cache = new Map<string, { at: number; file: EngineFile | null; error?: string }>();

export function engineJsonPath(jobName: string): string {
  return path.join(jobFolder(jobName), 'engine.json');
}

function parseEngineFile(text: string): EngineFile {
  const v = JSON.parse(text);
  if (!v || typeof v.host !== 'string' || !Number.isInteger(v.port) || typeof v.token !== 'string' || !Number.isInteger(v.pid)) {
    throw new Error('engine.json lacks host, port, token or pid');
  }
  return { host: v.host, port: v.port, token: v.token, pid: v.pid, started_at: v.started_at };
}

function readEngineFile(file: string): { file: EngineFile | null; error?: string } {
  const hit = cache.get(file);
  if (hit && Date.now() - hit.at < CACHE_MS) return hit;
  let entry: { at: number; file: EngineFile | null; error?: string };
  try {
    entry = { at: Date.now(), file: parseEngineFile(fs.readFileSync(file, 'utf8')) };
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    entry = { at: Date.now(), file: null, error: missing ? undefined : (err as Error).message };
  }
  cache.set(file, entry);
  return entry;
}

/** Forget a cached engine.json (after a failed connection, the file may have changed). */
export function forgetEngineFile(jobName: string): void {
  cache.delete(engineJsonPath(jobName));
}

const unavailable = (status: number, code: string, message: string): EngineResolution => ({ ok: false, status, code, message });

export function resolveEngine(jobParam: string | null): EngineResolution {
  const engines = listJobs({ job_type: 'inference' });
  let job: JobRow | undefined;
  if (jobParam) {
    job = engines.find((j) => j.id === jobParam || j.name === jobParam);
    if (!job) return unavailable(404, 'engine_job_not_found', `There is no inference job '${jobParam}'.`);
  } else {
    const running = engines.filter((j) => j.status === 'running');
    if (running.length > 1) {
      const names = running.map((j) => j.name).join(', ');
      return unavailable(409, 'engine_ambiguous', `Several inference engines are running (${names}); pick one with ?job=<id>.`);
    }
    job = running[0];
    if (!job) return unavailable(503, 'engine_not_running', 'The inference engine is not running. Start it on the Generate page.');
  }
  if (job.status === 'queued') {
    return unavailable(503, 'engine_queued', `The inference engine '${job.name}' is queued, waiting for GPU ${job.gpu_ids}.`);
  }
  if (job.status !== 'running') {
    return unavailable(503, 'engine_not_running', `The inference engine '${job.name}' is not running (its job is ${job.status}). Start it on the Generate page.`);
  }
  const { file, error } = readEngineFile(engineJsonPath(job.name));
  if (!file) {
    const why = error ? `its engine.json is unreadable (${error})` : 'it has not written engine.json yet';
    return unavailable(503, 'engine_starting', `The inference engine '${job.name}' is starting: ${why}.`);
  }
  if (!isPidAlive(file.pid)) {
    return unavailable(
      503,
      'engine_stale',
      `The inference engine '${job.name}' is not running: its engine.json names pid ${file.pid}, which is gone (a stale file from a killed engine).`,
    );
  }
  return { ok: true, job, engine: file };
}
