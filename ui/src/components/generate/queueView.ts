// The engine's queue (GET /queue) as rows for the queue panel, steadier start estimates, and which of
// this page's requests the preview follows (pure).

/** One request as GET /queue lists it (docs/engine_api.md). */
export interface QueueReq {
  request_id: string;
  status: string;
  arch: string;
  model?: string;
  width?: number;
  height?: number;
  steps?: number;
  batch_size?: number;
  pinned?: boolean;
  prompt?: string;
  step: number;
  total: number;
  estimated_start?: number | null;
  load_cost?: number;
}

export interface QueueSnapshot {
  running: QueueReq | null;
  batch: QueueReq[];
  /** calls over, files still being written while the next one samples (engine.write_behind) */
  writing?: QueueReq[];
  queued: QueueReq[];
  finished: QueueReq[];
}

export interface QueueRow {
  id: string;
  state: 'running' | 'queued';
  /** 0-based place among the queued (what POST /queue/{id}/move takes); null while running */
  position: number | null;
  last: boolean;
  model: string;
  size: string;
  steps: string;
  start: string;
  prompt: string;
  mine: boolean;
  pinned: boolean;
}

/** A model name short enough for a row: a repo id or path by its last part. */
export function shortModel(model: string | undefined, arch: string): string {
  const name = (model ?? '').replace(/[\\/]+$/, '');
  const last = name.split(/[\\/]/).pop() ?? '';
  return last || arch;
}

/** "~12 s", "~2 min 5 s", or "unknown" before the engine has timed a step. */
export function startText(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return 'unknown';
  const s = Math.round(seconds);
  if (s < 60) return `~${s} s`;
  if (s < 3600) return `~${Math.floor(s / 60)} min ${s % 60} s`;
  return `~${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

function sizeText(r: QueueReq): string {
  const wh = r.width && r.height ? `${r.width}×${r.height}` : '?';
  return r.batch_size && r.batch_size > 1 ? `${wh} ×${r.batch_size}` : wh;
}

function row(r: QueueReq, mine: ReadonlySet<string>): Omit<QueueRow, 'state' | 'position' | 'last' | 'start'> {
  return {
    id: r.request_id,
    model: shortModel(r.model, r.arch),
    size: sizeText(r),
    steps: r.steps !== undefined ? String(r.steps) : '?',
    prompt: r.prompt ?? '',
    mine: mine.has(r.request_id),
    pinned: !!r.pinned,
  };
}

/** The request this page streams, at the step its stream reached (the polled queue lags behind it). */
export interface LiveStep {
  id: string | null;
  step: number;
  total: number;
}

/** The running call (its batch, head first), then the queued requests in the order they start. The
 * request `live` names shows its stream's step, so its row and the preview agree. */
export function queueRows(snap: QueueSnapshot | null, mine: ReadonlySet<string>, live?: LiveStep | null): QueueRow[] {
  if (!snap) return [];
  const running = snap.batch.length ? snap.batch : snap.running ? [snap.running] : [];
  const stepOf = (r: QueueReq) => (live && live.id === r.request_id && live.total ? { step: live.step, total: live.total } : r);
  return [
    ...running.map((r) => ({
      ...row(r, mine),
      state: 'running' as const,
      position: null,
      last: false,
      start: stepOf(r).total ? `step ${stepOf(r).step}/${stepOf(r).total}` : 'starting',
    })),
    ...snap.queued.map((r, i) => ({
      ...row(r, mine),
      state: 'queued' as const,
      position: i,
      last: i === snap.queued.length - 1,
      start: startText(r.estimated_start),
    })),
  ];
}

/** Ids of the engine's running call. */
export function runningIds(snap: QueueSnapshot | null): string[] {
  if (!snap) return [];
  return snap.batch.length ? snap.batch.map((r) => r.request_id) : snap.running ? [snap.running.request_id] : [];
}

/**
 * Which of this page's unfinished requests (`ours`, in the order they were sent) the preview shows:
 * one the engine runs now (the shown one if it is among them); else the shown one while it has not
 * ended; else the first of ours in the engine's queue order, else the first sent that the engine
 * has not finished (nor sampled, while a later call runs). Null: none to show.
 */
export function chooseFollow(ours: string[], shown: { id: string; ended: boolean } | null, snap: QueueSnapshot | null): string | null {
  if (!ours.length) return shown && !shown.ended ? shown.id : null;
  const running = runningIds(snap).filter((id) => ours.includes(id));
  if (running.length) return shown && !shown.ended && running.includes(shown.id) ? shown.id : running[0];
  if (shown && !shown.ended) return shown.id;
  const queued = (snap?.queued ?? []).map((r) => r.request_id).filter((id) => ours.includes(id));
  // one the engine has finished is read in the background (toCollect), not shown after the last to
  // run; so is one still writing its files while another call runs (engine.write_behind): that call
  // ran after it, and may have ended on this page before the writing one's stream did
  const superseded = runningIds(snap).length ? (snap?.writing ?? []) : [];
  const over = new Set([...(snap?.finished ?? []), ...superseded].map((r) => r.request_id));
  return queued[0] ?? ours.find((id) => !over.has(id)) ?? null;
}

/**
 * Ours that need a reader although the preview does not show them: the engine lists them as
 * finished, or does not know them at all in a snapshot taken after they were sent (it restarted).
 */
export function toCollect(ours: { id: string; sentAt: number }[], snap: QueueSnapshot | null, snapAt: number): string[] {
  if (!snap) return [];
  const live = new Set([...runningIds(snap), ...(snap.running ? [snap.running.request_id] : []), ...snap.queued.map((r) => r.request_id)]);
  const finished = new Set(snap.finished.map((r) => r.request_id));
  return ours.filter((o) => finished.has(o.id) || (!live.has(o.id) && o.sentAt < snapAt)).map((o) => o.id);
}

// -- steadier start estimates --------------------------------------------------------------------
// The engine's `estimated_start` is the steps ahead times its recent step time, which one slow step
// (a load, a first compile) moves a lot: 4 min 47 s, then 1 min 24 s two seconds later. The page
// reads the step time back out of it and smooths that, so one sample moves an estimate a little.

/** Steps before each queued request starts: the running request's steps left, then those ahead of it. */
export function stepsAhead(snap: QueueSnapshot): number[] {
  const head = snap.running;
  let ahead = head ? Math.max(0, (head.total || head.steps || 0) - head.step) : 0;
  return snap.queued.map((r) => {
    const mine = ahead;
    ahead += r.steps ?? 0;
    return mine;
  });
}

/** The engine's seconds per step, as its estimates imply (null before it timed a step). */
export function impliedStepSeconds(snap: QueueSnapshot): number | null {
  const ahead = stepsAhead(snap);
  let best: number | null = null;
  let most = 0;
  snap.queued.forEach((r, i) => {
    const e = r.estimated_start;
    if (e !== null && e !== undefined && Number.isFinite(e) && e >= 0 && ahead[i] > most) {
      most = ahead[i];
      best = e / ahead[i];
    }
  });
  return best;
}

/** How far one sample moves the smoothed step time: a quarter of the way, the sample held within
 * half to twice the current value (a rate that really changed tenfold is followed in ~10 polls). */
export const STEP_RATE_WEIGHT = 0.25;

/** The smoothed seconds per step after one more observation (null observed: unchanged). */
export function smoothStepSeconds(prev: number | null, observed: number | null): number | null {
  if (observed === null || !Number.isFinite(observed) || observed <= 0) return prev;
  if (prev === null) return observed;
  const held = Math.min(prev * 2, Math.max(prev / 2, observed));
  return prev + STEP_RATE_WEIGHT * (held - prev);
}

/** The snapshot with each queued request's `estimated_start` from the smoothed step time. */
export function withSteadyStarts(snap: QueueSnapshot, stepSeconds: number | null): QueueSnapshot {
  if (stepSeconds === null) return snap;
  const ahead = stepsAhead(snap);
  return { ...snap, queued: snap.queued.map((r, i) => ({ ...r, estimated_start: Math.round(ahead[i] * stepSeconds * 1000) / 1000 })) };
}
