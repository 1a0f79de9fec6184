// Job rows: create, list, start (queue), stop, delete. The worker does the process side.
import { randomUUID } from 'node:crypto';
import { and, asc, desc, eq, inArray, isNotNull, or } from 'drizzle-orm';
import { getDb } from './db';
import { ApiError } from './http';
import { completeJobConfig } from './jobConfig';
import { isSafeJobName } from './paths';
import { jobTable, type JobRow } from './schema';

export const nowIso = () => new Date().toISOString();

export function listJobs(filter: { job_type?: string } = {}): JobRow[] {
  const q = getDb().select().from(jobTable);
  const rows = filter.job_type ? q.where(eq(jobTable.job_type, filter.job_type)) : q;
  return rows.orderBy(desc(jobTable.created_at)).all();
}

/** A job by id, or else by name. */
export function findJob(idOrName: string): JobRow | undefined {
  const db = getDb();
  return (
    db.select().from(jobTable).where(eq(jobTable.id, idOrName)).get() ??
    db.select().from(jobTable).where(eq(jobTable.name, idOrName)).get()
  );
}

export function getJobOr404(id: string): JobRow {
  const job = findJob(id);
  if (!job) throw new ApiError(404, 'job_not_found', `No job '${id}'.`);
  return job;
}

export function normalizeGpuIds(raw: unknown): string {
  const s = String(raw ?? '').trim().toLowerCase();
  if (s === '' || s === 'cpu') return 'cpu';
  const ids = s.split(',').map((x) => x.trim());
  if (!ids.every((x) => /^\d+$/.test(x))) {
    throw new ApiError(400, 'bad_gpu_ids', `gpu_ids must be "cpu" or GPU indices like "0" or "0,1" (got "${raw}").`);
  }
  return [...new Set(ids.map(Number))].sort((a, b) => a - b).join(',');
}

export function createJob(input: { name: unknown; gpu_ids?: unknown; job_type?: unknown; job_config: unknown }): JobRow {
  const name = String(input.name ?? '').trim();
  if (!isSafeJobName(name)) {
    throw new ApiError(400, 'bad_name', 'A job name is letters, digits, "_", "-" or "." (it becomes a folder name).');
  }
  const job_type = String(input.job_type ?? 'train');
  const gpu_ids = normalizeGpuIds(input.gpu_ids);
  const config = completeJobConfig({ name, job_type, gpu_ids, job_config: input.job_config });
  const db = getDb();
  if (db.select({ id: jobTable.id }).from(jobTable).where(eq(jobTable.name, name)).get()) {
    throw new ApiError(409, 'name_taken', `A job named '${name}' already exists.`);
  }
  const now = nowIso();
  const row: JobRow = {
    id: randomUUID(),
    name,
    gpu_ids,
    job_config: JSON.stringify(config),
    status: 'stopped',
    stop: 0,
    step: 0,
    info: '',
    job_type,
    pid: null,
    created_at: now,
    updated_at: now,
  };
  db.insert(jobTable).values(row).run();
  return row;
}

/** Queue a job; the worker starts it when its GPU set is free. */
export function startJob(id: string): JobRow {
  const job = getJobOr404(id);
  if (job.status === 'queued' || job.status === 'running' || job.status === 'stopping') {
    throw new ApiError(409, 'already_active', `Job '${job.name}' is already ${job.status}.`);
  }
  getDb()
    .update(jobTable)
    .set({ status: 'queued', stop: 0, info: 'Queued', pid: null, updated_at: nowIso() })
    .where(and(eq(jobTable.id, job.id), inArray(jobTable.status, ['stopped', 'completed', 'error'])))
    .run();
  return getJobOr404(job.id);
}

/** Ask a job to stop: a queued job stops at once; a running one gets stop=1 / stopping. */
export function stopJob(id: string): JobRow {
  const job = getJobOr404(id);
  const db = getDb();
  const now = nowIso();
  if (job.status === 'queued') {
    db.update(jobTable)
      .set({ status: 'stopped', info: 'Stopped before it started', updated_at: now })
      .where(and(eq(jobTable.id, job.id), eq(jobTable.status, 'queued')))
      .run();
  } else if (job.status === 'running') {
    db.update(jobTable)
      .set({ status: 'stopping', stop: 1, info: 'Stopping…', updated_at: now })
      .where(and(eq(jobTable.id, job.id), eq(jobTable.status, 'running')))
      .run();
  } else if (job.status !== 'stopping') {
    throw new ApiError(409, 'not_running', `Job '${job.name}' is ${job.status}, not running.`);
  }
  return getJobOr404(job.id);
}

export function deleteJob(id: string): void {
  const job = getJobOr404(id);
  if (['queued', 'running', 'stopping'].includes(job.status)) {
    throw new ApiError(409, 'job_active', `Job '${job.name}' is ${job.status}; stop it before deleting it.`);
  }
  getDb().delete(jobTable).where(eq(jobTable.id, job.id)).run();
}

export function jobsWithStatus(statuses: string[]): JobRow[] {
  return getDb().select().from(jobTable).where(inArray(jobTable.status, statuses)).orderBy(asc(jobTable.updated_at)).all();
}

/** Rows that own a process, or should: active ones, and finished ones whose pid is still recorded. */
export function jobsWithProcesses(): JobRow[] {
  return getDb()
    .select()
    .from(jobTable)
    .where(or(inArray(jobTable.status, ['running', 'stopping']), isNotNull(jobTable.pid)))
    .orderBy(asc(jobTable.updated_at))
    .all();
}

export function updateJob(id: string, patch: Partial<Omit<JobRow, 'id'>>): void {
  getDb()
    .update(jobTable)
    .set({ ...patch, updated_at: nowIso() })
    .where(eq(jobTable.id, id))
    .run();
}

/** A client-safe view of a row: the parsed config rather than a JSON string. */
export function publicJob(job: JobRow) {
  let config: unknown = null;
  try {
    config = JSON.parse(job.job_config);
  } catch {
    config = job.job_config;
  }
  return { ...job, job_config: config };
}
