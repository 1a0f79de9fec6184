// The worker against a fake run.py (real processes, real SQLite): start, GPU sets, stop
// escalation, silent deaths, and adopting running jobs after a UI restart.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createJob, findJob, startJob, stopJob } from '@/server/jobs';
import { isPidAlive } from '@/server/processes';
import type { JobRow } from '@/server/schema';
import { JobWorker } from '@/worker/jobWorker';
import { sleep, useTempEnv } from './helpers';

let env: ReturnType<typeof useTempEnv>;
const workers: JobWorker[] = [];
const pids: number[] = [];
const logs: string[] = [];

beforeAll(() => {
  env = useTempEnv('worker');
  const repo = path.join(env.dir, 'repo');
  fs.mkdirSync(repo);
  fs.copyFileSync(path.join(__dirname, 'fixtures', 'fake_run.py'), path.join(repo, 'run.py'));
  process.env.AITK_REPO_ROOT = repo;
  process.env.AITK_PYTHON = 'python3';
});

afterEach(() => {
  for (const w of workers.splice(0)) w.close();
  for (const pid of pids.splice(0)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

afterAll(() => {
  delete process.env.AITK_REPO_ROOT;
  delete process.env.AITK_PYTHON;
  env.cleanup();
});

function newWorker(graceMs = 400, killMs = 400): JobWorker {
  const w = new JobWorker({ graceMs, killMs, tickMs: 100, log: (m) => logs.push(m) });
  workers.push(w);
  return w;
}

let n = 0;
function queuedJob(fake: string, opts: { gpu_ids?: string; job_type?: string } = {}): JobRow {
  const job = createJob({
    name: `job_${++n}`,
    gpu_ids: opts.gpu_ids ?? 'cpu',
    job_type: opts.job_type ?? 'inference',
    job_config: { job: 'extension', config: { name: 'ignored', process: [{ type: 'InferenceEngine', fake, engine: { port: 0 } }] } },
  });
  return startJob(job.id);
}

/** Tick the worker until `cond` holds for the job row (or fail after `ms`). */
async function until(worker: JobWorker, id: string, cond: (j: JobRow) => boolean, ms = 15_000): Promise<JobRow> {
  const t0 = Date.now();
  for (;;) {
    worker.tick();
    const job = findJob(id) as JobRow;
    if (job.pid && !pids.includes(job.pid)) pids.push(job.pid);
    if (cond(job)) return job;
    if (Date.now() - t0 > ms) throw new Error(`timed out; job is ${JSON.stringify(job)}`);
    await sleep(50);
  }
}

const seenBy = (job: JobRow) => JSON.parse(fs.readFileSync(path.join(process.env.AITK_TRAINING_FOLDER as string, job.name, 'seen.json'), 'utf8'));

describe('JobWorker', () => {
  it('starts a queued job: config.yaml with the UI-owned keys, env, cwd, log.txt', async () => {
    const w = newWorker();
    process.env.AI_TOOLKIT_AUTH = 'secret';
    const job = queuedJob('obey', { gpu_ids: '1' });
    const running = await until(w, job.id, (j) => j.info === 'Idle — fake');
    delete process.env.AI_TOOLKIT_AUTH;
    expect(running.status).toBe('running');
    expect(isPidAlive(running.pid)).toBe(true);
    const seen = seenBy(job);
    const folder = path.join(process.env.AITK_TRAINING_FOLDER as string, job.name);
    expect(seen.argv).toEqual(['run.py', path.join(folder, 'config.yaml')]);
    expect(seen.cwd).toBe(process.env.AITK_REPO_ROOT);
    expect(seen.AITK_JOB_ID).toBe(job.id);
    expect(seen.CUDA_VISIBLE_DEVICES).toBe('1');
    expect(seen.has_auth).toBe(false);
    const proc = seen.config.config.process[0];
    expect(seen.config.config.name).toBe(job.name);
    expect(proc.sqlite_db_path).toBe(process.env.AITK_DB_PATH);
    expect(proc.engine).toEqual({ port: 0, job_folder: folder });
    expect(proc.device).toBe('cuda');
    expect(fs.readFileSync(path.join(folder, 'log.txt'), 'utf8')).toContain(`fake job ${job.id} mode obey`);

    // cooperative stop: the job sees stop=1 and ends itself
    expect(stopJob(job.id)).toMatchObject({ status: 'stopping', stop: 1 });
    const stopped = await until(w, job.id, (j) => j.status === 'stopped' && j.pid === null);
    expect(stopped.info).toBe('Stopped by itself');
  });

  it('runs one job per GPU set; other sets run alongside', async () => {
    const w = newWorker();
    const a = queuedJob('obey', { gpu_ids: 'cpu' });
    const b = queuedJob('obey', { gpu_ids: 'cpu' });
    const c = queuedJob('obey', { gpu_ids: '0' });
    await until(w, a.id, (j) => j.status === 'running');
    await until(w, c.id, (j) => j.status === 'running');
    const waiting = await until(w, b.id, (j) => j.info.startsWith('Queued: waiting'));
    expect(waiting.status).toBe('queued');
    stopJob(a.id);
    await until(w, a.id, (j) => j.status === 'stopped');
    await until(w, b.id, (j) => j.status === 'running');
    for (const id of [b.id, c.id]) stopJob(id);
    for (const id of [b.id, c.id]) await until(w, id, (j) => j.status === 'stopped');
  });

  it('escalates a stop the job ignores: SIGTERM after the grace period', async () => {
    const w = newWorker(300, 5000);
    const job = queuedJob('ignore_stop');
    const running = await until(w, job.id, (j) => j.info === 'Idle — fake');
    const t0 = Date.now();
    stopJob(job.id);
    const stopped = await until(w, job.id, (j) => j.status === 'stopped');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect(stopped.info).toBe('Stopped (ended with SIGTERM)');
    expect(isPidAlive(running.pid)).toBe(false);
  });

  it('escalates to SIGKILL when SIGTERM is ignored too', async () => {
    const w = newWorker(200, 300);
    const job = queuedJob('ignore_term');
    const running = await until(w, job.id, (j) => j.info === 'Idle — fake');
    stopJob(job.id);
    const stopped = await until(w, job.id, (j) => j.status === 'stopped');
    expect(stopped.info).toBe('Stopped (killed with SIGKILL)');
    expect(isPidAlive(running.pid)).toBe(false);
    const log = fs.readFileSync(path.join(process.env.AITK_TRAINING_FOLDER as string, job.name, 'log.txt'), 'utf8');
    expect(log).toContain('ignoring SIGTERM');
  });

  it('marks a job that died without a status as error, with its last log lines', async () => {
    const w = newWorker();
    const job = queuedJob('crash');
    const failed = await until(w, job.id, (j) => j.status === 'error');
    expect(failed.info).toContain('exit code 3');
    expect(failed.info).toContain('RuntimeError: the fake engine fell over');
    expect(failed.pid).toBeNull();
    // run it again: log.txt now holds both runs, the info only this one's lines
    startJob(job.id);
    const again = await until(w, job.id, (j) => j.status === 'error' && j.updated_at !== failed.updated_at);
    expect(again.info.match(/RuntimeError/g)).toHaveLength(1);
    const log = fs.readFileSync(path.join(process.env.AITK_TRAINING_FOLDER as string, job.name, 'log.txt'), 'utf8');
    expect(log.match(/RuntimeError/g)).toHaveLength(2);
  });

  it('reports a missing interpreter as an error, not a hang', async () => {
    process.env.AITK_PYTHON = path.join(env.dir, 'no-such-python');
    try {
      const job = queuedJob('obey');
      const failed = await until(newWorker(), job.id, (j) => j.status === 'error');
      expect(failed.info).toMatch(/Python interpreter not found/);
    } finally {
      process.env.AITK_PYTHON = 'python3';
    }
  });

  it('adopts running jobs after a restart: a new worker settles and stops them by pid', async () => {
    const first = newWorker();
    const a = queuedJob('ignore_stop');
    const b = queuedJob('ignore_stop', { gpu_ids: '3' });
    const runA = await until(first, a.id, (j) => j.info === 'Idle — fake');
    await until(first, b.id, (j) => j.info === 'Idle — fake');
    first.close(); // the UI goes away; the detached jobs keep running

    const second = newWorker(200, 2000);
    second.tick();
    expect(findJob(a.id)?.status).toBe('running');
    // a dies behind everyone's back: the new worker notices by pid
    process.kill(-(runA.pid as number), 'SIGKILL');
    const failed = await until(second, a.id, (j) => j.status === 'error');
    expect(failed.info).toContain('process is gone');
    // b is stopped through the new worker, which never spawned it
    stopJob(b.id);
    expect((await until(second, b.id, (j) => j.status === 'stopped')).info).toBe('Stopped (ended with SIGTERM)');
  });
});
