// Every inference engine job at once (one per GPU set): each one's state, health, active model and
// queue, for the Generate page's engine list (GET /api/engines) and for `?job=auto` in the proxy,
// which sends a request to the engine that already holds its model, else to the least busy one.
import { listJobs } from './jobs';
import { resolveEngine } from './engineEndpoint';

export interface EngineActive {
  arch: string;
  name_or_path: string;
  profile: string | null;
  variant: string | null;
}

export interface EngineSummary {
  job: { id: string; name: string; gpu_ids: string; status: string };
  /** ready: answered /health; otherwise why it cannot take a request now */
  state: 'ready' | 'queued' | 'starting' | 'stopped' | 'unreachable';
  busy: boolean;
  queue: number;
  active: EngineActive | null;
  message: string | null;
}

/** Requests that may wait on the engine holding their model beyond the least busy engine's load:
 * past that, a hot model spreads to other engines instead of piling onto one (docs/scale.md). */
export const MAX_IMBALANCE = 2;
const HEALTH_TIMEOUT_MS = 2000;

async function summarize(job: { id: string; name: string; gpu_ids: string; status: string }): Promise<EngineSummary> {
  const base = { job: { id: job.id, name: job.name, gpu_ids: job.gpu_ids, status: job.status }, busy: false, queue: 0, active: null };
  const target = resolveEngine(job.id);
  if (!target.ok) {
    const state = job.status === 'queued' ? 'queued' : target.code === 'engine_starting' ? 'starting' : 'stopped';
    return { ...base, state, message: target.message };
  }
  const { host, port, token } = target.engine;
  try {
    const res = await fetch(`http://${host}:${port}/health`, { headers: { 'x-engine-token': token }, signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
    if (!res.ok) return { ...base, state: 'unreachable', message: `its /health answered HTTP ${res.status}` };
    const h = (await res.json()) as { busy?: unknown; queue?: unknown; active?: EngineActive | null };
    return {
      ...base,
      state: 'ready',
      busy: h.busy === true,
      queue: Number.isInteger(h.queue) ? (h.queue as number) : 0,
      active: h.active && typeof h.active === 'object' ? h.active : null,
      message: null,
    };
  } catch (err) {
    return { ...base, state: 'unreachable', message: `it did not answer at ${host}:${port} (${(err as Error).name})` };
  }
}

/** Every inference job, in name order, with its engine's health where it runs. */
export async function engineSummaries(): Promise<EngineSummary[]> {
  const jobs = listJobs({ job_type: 'inference' }).sort((a, b) => a.name.localeCompare(b.name));
  return Promise.all(jobs.map(summarize));
}

const baseName = (p: string) => p.replace(/[\\/]+$/, '').split(/[\\/]/).pop() ?? p;

/** Whether an engine's active model is the one a request's `model` names: a profile by name, else the
 * arch and weights (the engine shows a local path by its basename) and the variant where both say. */
export function holdsModel(active: EngineActive | null, model: Record<string, unknown> | null): boolean {
  if (!active || !model) return false;
  if (typeof model.profile === 'string' && model.profile) return active.profile === model.profile;
  if (active.profile || model.arch !== active.arch) return false;
  const want = typeof model.name_or_path === 'string' ? model.name_or_path.trim() : '';
  if (!want || (want !== active.name_or_path && baseName(want) !== active.name_or_path)) return false;
  return !(typeof model.variant === 'string' && model.variant && active.variant && model.variant !== active.variant);
}

const load = (e: EngineSummary) => e.queue + (e.busy ? 1 : 0);

/** The engine `?job=auto` sends a request to: among ready engines, one that holds its model unless it
 * has MAX_IMBALANCE more requests ahead than the least busy engine, else the least busy (ties: name
 * order). null when none is ready. */
export function pickEngine(engines: EngineSummary[], model: Record<string, unknown> | null): EngineSummary | null {
  const ready = engines.filter((e) => e.state === 'ready');
  if (!ready.length) return null;
  const byLoad = [...ready].sort((a, b) => load(a) - load(b) || a.job.name.localeCompare(b.job.name));
  const least = load(byLoad[0]);
  const holder = byLoad.find((e) => holdsModel(e.active, model) && load(e) - least <= MAX_IMBALANCE);
  return holder ?? byLoad[0];
}
