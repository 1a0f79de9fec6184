'use client';
// Restarting an engine job through the job routes the Jobs page uses: stop, wait until its process
// is down (the worker settles it), start; and how many requests a restart would end.
import type { EngineSummary } from '@/server/engines';
import { apiJson, postJson } from '@/utils/api';
import { isActive, type Job } from './types';

const POLL_MS = 500;
const DOWN_TIMEOUT_MS = 180_000;

const getJob = async (id: string) => (await apiJson<{ job: Job }>(`/api/jobs/${id}`)).job;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The engine's summary (GET /api/engines), null while it is not listed. */
export async function engineSummary(jobId: string): Promise<EngineSummary | null> {
  const { engines } = await apiJson<{ engines: EngineSummary[] }>('/api/engines');
  return engines.find((e) => e.job.id === jobId) ?? null;
}

/** Requests a restart would end: the running one and those waiting. */
export const requestsHeld = (e: EngineSummary | null) => (e ? e.queue + (e.busy ? 1 : 0) : 0);

async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + DOWN_TIMEOUT_MS;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > deadline) throw new Error(`The engine did not ${what} within ${DOWN_TIMEOUT_MS / 1000} s.`);
    await sleep(POLL_MS);
  }
}

export type RestartPhase = 'stopping' | 'starting' | 'ready';

/** Stop (unless already down), wait for the process to end, start, wait until the engine answers. */
export async function restartEngine(jobId: string, onPhase: (p: RestartPhase) => void): Promise<void> {
  onPhase('stopping');
  const job = await getJob(jobId);
  if (isActive(job) && job.status !== 'stopping') await postJson(`/api/jobs/${jobId}/stop`);
  await until(() => getJob(jobId), (j) => !isActive(j), 'stop');
  onPhase('starting');
  await postJson(`/api/jobs/${jobId}/start`);
  const up = await until(
    async () => ({ job: await getJob(jobId), engine: await engineSummary(jobId) }),
    (s) => s.engine?.state === 'ready' || !isActive(s.job),
    'start',
  );
  if (up.engine?.state !== 'ready') throw new Error(`The engine did not start again: ${up.job.info || up.job.status}`);
  onPhase('ready');
}
