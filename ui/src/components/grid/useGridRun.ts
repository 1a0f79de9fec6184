'use client';
// Running a grid: every cell goes to the engine as an ordinary POST /generate (detached, so it stays
// queued once its answer's headers arrive and the page lets go of that stream); then each cell's
// frames are read through GET /stream/{id}, a few at a time (a browser keeps about six connections to
// one host), to its result or error.
import { useCallback, useEffect, useRef, useState } from 'react';
import { apiFetch, describeError } from '@/utils/api';
import { readFrames, type FrameHeader } from '@/utils/engineStream';
import type { ResultInfo } from '@/components/generate/types';
import type { GridPlan } from './axes';

export type CellPhase = 'waiting' | 'queued' | 'running' | 'done' | 'error' | 'cancelled';

export interface CellState {
  requestId: string;
  phase: CellPhase;
  stage: string;
  step: number;
  total: number;
  result: ResultInfo | null;
  message: string;
}

/** Streams read at once; the rest of the cells wait on the engine's queue, not in the browser. */
const FOLLOWERS = 3;
const REATTACH_TRIES = 3;

const ENDED = new Set<CellPhase>(['done', 'error', 'cancelled']);
export const cellEnded = (c: CellState) => ENDED.has(c.phase);

/** A cell's state after one frame. */
export function cellAfterFrame(c: CellState, h: FrameHeader): CellState {
  switch (h.type) {
    case 'status':
      return { ...c, phase: h.stage === 'queued' ? 'queued' : 'running', stage: String(h.stage ?? '') };
    case 'progress':
      return { ...c, phase: 'running', step: Number(h.step) || 0, total: Number(h.total) || 0 };
    case 'result':
      return c.result ? c : { ...c, result: h as unknown as ResultInfo };
    case 'error':
      return { ...c, phase: h.cancelled ? 'cancelled' : 'error', message: String(h.message ?? '') };
    case 'end': {
      if (h.status === 'ok') return { ...c, phase: c.result ? 'done' : 'error', message: c.result ? '' : 'The engine made no image.' };
      if (h.status === 'cancelled') return { ...c, phase: 'cancelled', message: c.message || 'Cancelled.' };
      return { ...c, phase: 'error', message: c.message || 'The request failed.' };
    }
    default:
      return c;
  }
}

const fresh = (requestId: string): CellState => ({ requestId, phase: 'waiting', stage: '', step: 0, total: 0, result: null, message: '' });

/** Read one cell's stream to its end, re-attaching after a dropped connection; `patch` changes its state. */
async function followCell(jobId: string, requestId: string, signal: AbortSignal, patch: (fn: (c: CellState) => CellState) => void) {
  let ended = false;
  for (let attempt = 1; attempt <= REATTACH_TRIES && !ended && !signal.aborted; attempt++) {
    let res: Response;
    try {
      res = await apiFetch(`/api/inference/stream/${encodeURIComponent(requestId)}?job=${encodeURIComponent(jobId)}`, { signal });
    } catch {
      continue;
    }
    if (!res.ok) {
      const { message } = await describeError(res);
      patch((c) => ({ ...c, phase: 'error', message }));
      return;
    }
    try {
      const out = await readFrames(res.body as ReadableStream<Uint8Array>, (f) => {
        ended = ended || f.header.type === 'end';
        patch((c) => cellAfterFrame(c, f.header));
      });
      ended = ended || out.sawEnd;
    } catch {
      // dropped: try again
    }
  }
  if (!ended && !signal.aborted) patch((c) => (cellEnded(c) ? c : { ...c, phase: 'error', message: 'Lost the connection to the engine.' }));
}

/** Put one cell on the engine's queue (detached: its stream is let go once the engine took it); whether it is queued. */
async function queueCell(jobId: string, body: unknown, signal: AbortSignal, patch: (fn: (c: CellState) => CellState) => void): Promise<boolean> {
  try {
    const res = await apiFetch(`/api/inference/generate?job=${encodeURIComponent(jobId)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
    if (!res.ok) {
      const { message } = await describeError(res);
      patch((c) => ({ ...c, phase: 'error', message }));
      return false;
    }
    await res.body?.cancel().catch(() => undefined); // detached: the request stays queued
    patch((c) => (c.phase === 'waiting' ? { ...c, phase: 'queued' } : c));
    return true;
  } catch (err) {
    if (!signal.aborted) patch((c) => ({ ...c, phase: 'error', message: `The UI server did not answer: ${(err as Error).message}` }));
    return false;
  }
}

export function useGridRun() {
  const [cells, setCells] = useState<CellState[]>([]);
  const [running, setRunning] = useState(false);
  const abortRef = useRef<AbortController | null>(null);
  const runRef = useRef<{ jobId: string; cancelled: boolean } | null>(null);

  const patch = (i: number, fn: (c: CellState) => CellState) => setCells((prev) => prev.map((c, k) => (k === i ? fn(c) : c)));

  const run = useCallback(async (job: { id: string }, plan: GridPlan) => {
    abortRef.current?.abort();
    const abort = new AbortController();
    abortRef.current = abort;
    const r = { jobId: job.id, cancelled: false };
    runRef.current = r;
    setCells(plan.cells.map((c) => fresh(c.requestId)));
    setRunning(true);
    // 1. every cell onto the engine's queue, in order
    const queued: number[] = [];
    for (const [i, cell] of plan.cells.entries()) {
      if (abort.signal.aborted) break;
      if (r.cancelled) {
        patch(i, (c) => ({ ...c, phase: 'cancelled', message: 'Cancelled before it was queued.' }));
        continue;
      }
      if (await queueCell(job.id, cell.body, abort.signal, (fn) => patch(i, fn))) queued.push(i);
    }
    // 2. their streams, a few at a time, in queue order
    let next = 0;
    const worker = async () => {
      while (next < queued.length && !abort.signal.aborted) {
        const i = queued[next++];
        await followCell(job.id, plan.cells[i].requestId, abort.signal, (fn) => patch(i, fn));
      }
    };
    await Promise.all(Array.from({ length: FOLLOWERS }, worker));
    if (abortRef.current === abort) setRunning(false);
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  /** Cancel every cell not yet ended (the engine ends each stream with `cancelled`). */
  const cancel = useCallback(async (current: CellState[]) => {
    const r = runRef.current;
    if (!r) return;
    r.cancelled = true;
    await Promise.all(
      current
        .filter((c) => !cellEnded(c))
        .map((c) => apiFetch(`/api/inference/cancel/${encodeURIComponent(c.requestId)}?job=${encodeURIComponent(r.jobId)}`, { method: 'POST' }).catch(() => null)),
    );
  }, []);

  // leaving the page stops reading; the queued requests still run (they are detached)
  useEffect(() => () => abortRef.current?.abort(), []);

  return { cells, running, run, cancel };
}
