// The engine's queue (GET /queue) as rows for the queue panel, and which of this page's requests
// the preview follows (pure).

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

/** The running call (its batch, head first), then the queued requests in the order they start. */
export function queueRows(snap: QueueSnapshot | null, mine: ReadonlySet<string>): QueueRow[] {
  if (!snap) return [];
  const running = snap.batch.length ? snap.batch : snap.running ? [snap.running] : [];
  return [
    ...running.map((r) => ({
      ...row(r, mine),
      state: 'running' as const,
      position: null,
      last: false,
      start: r.total ? `step ${r.step}/${r.total}` : 'starting',
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
 * has not finished. Null: none to show.
 */
export function chooseFollow(ours: string[], shown: { id: string; ended: boolean } | null, snap: QueueSnapshot | null): string | null {
  if (!ours.length) return shown && !shown.ended ? shown.id : null;
  const running = runningIds(snap).filter((id) => ours.includes(id));
  if (running.length) return shown && !shown.ended && running.includes(shown.id) ? shown.id : running[0];
  if (shown && !shown.ended) return shown.id;
  const queued = (snap?.queued ?? []).map((r) => r.request_id).filter((id) => ours.includes(id));
  // one the engine has finished is read in the background (toCollect), not shown after the last
  const finished = new Set((snap?.finished ?? []).map((r) => r.request_id));
  return queued[0] ?? ours.find((id) => !finished.has(id)) ?? null;
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
