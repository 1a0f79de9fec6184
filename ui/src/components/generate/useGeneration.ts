'use client';
// One generation request at a time: POST /generate through the proxy, frames parsed as they
// arrive, latents projected for the preview, results handed to the gallery, Cancel, and
// re-attaching (after a reload or a dropped connection) through GET /stream/{request_id}.
import { useCallback, useEffect, useRef, useState } from 'react';
import { apiFetch, describeError } from '@/utils/api';
import {
  FrameStreamError,
  latentFrameToImage,
  projectLatent,
  decodeFloat16,
  readFrames,
  type Frame,
  type PreviewImage,
  type PreviewSpec,
} from '@/utils/engineStream';
import { IDLE, applyFrame, stepText, withStatusLine, type GenView, type Phase } from './generationView';
import { noTimings, noteTiming, timingsAt, type TimingNotes } from './resultTimings';
import type { GalleryItem, ResultInfo } from './types';

interface Ctx {
  requestId: string;
  jobId: string;
  jobName: string;
  startedAt: number;
  abort: AbortController;
  model: Record<string, unknown>;
  sample: Record<string, unknown>;
  preview: PreviewSpec | null;
  timing: TimingNotes;
  ended: boolean;
  /** Cancel was pressed on this page */
  userCancelled?: boolean;
  /** the engine job was seen stopping while this request was current */
  engineStopped?: boolean;
}

const ACTIVE_KEY = 'aitk.generate.active';
const REATTACH_TRIES = 3;

type Stored = Pick<Ctx, 'requestId' | 'jobId' | 'jobName' | 'startedAt'>;

function storeActive(rec: Stored | null) {
  try {
    if (rec) window.localStorage.setItem(ACTIVE_KEY, JSON.stringify(rec));
    else window.localStorage.removeItem(ACTIVE_KEY);
  } catch {
    // storage unavailable: no re-attach after a reload
  }
}

function loadActive(): Stored | null {
  try {
    const raw = window.localStorage.getItem(ACTIVE_KEY);
    return raw ? (JSON.parse(raw) as Stored) : null;
  } catch {
    return null;
  }
}

/** A request that ended cancelled (not by this page) or lost: the engine was stopped. */
function explainEngineStop(v: GenView): GenView {
  if (v.phase !== 'cancelled' && v.phase !== 'lost') return v;
  return { ...v, phase: 'cancelled', message: `The engine was stopped ${stepText(v)}; start the engine above to generate again.` };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Project a latent frame; with factors that do not fit, fall back to the plain channel preview and say so. */
function projectForPreview(frame: Frame, preview: PreviewSpec | null): { image: PreviewImage | null; note: string | null } {
  try {
    return { image: latentFrameToImage(frame, preview), note: null };
  } catch (err) {
    try {
      const h = frame.header;
      const image = projectLatent(decodeFloat16(frame.payload), h.shape as number[], String(h.layout ?? preview?.layout), null);
      return { image, note: `Preview without colour factors (${(err as Error).message}).` };
    } catch (err2) {
      return { image: null, note: `This latent cannot be previewed: ${(err2 as Error).message}` };
    }
  }
}

function galleryItem(ctx: Ctx, r: ResultInfo): GalleryItem {
  const { relpath, url, kind, ext, bytes, seed, index, width, height, num_frames, fps, duration } = r;
  return {
    key: `${ctx.requestId}/${relpath}`,
    requestId: ctx.requestId,
    jobId: ctx.jobId,
    jobName: ctx.jobName,
    result: { relpath, url, kind, ext, bytes, seed, index: index ?? 0, width, height, num_frames, fps, duration },
    model: ctx.model,
    sample: ctx.sample,
    createdAt: new Date().toISOString(),
    timings: timingsAt(ctx.timing, ctx.startedAt),
  };
}

export function useGeneration(onResult: (item: GalleryItem) => void) {
  const [view, setView] = useState<GenView>(IDLE);
  const ctxRef = useRef<Ctx | null>(null);
  const onResultRef = useRef(onResult);
  onResultRef.current = onResult;

  const update = (ctx: Ctx, fn: (v: GenView) => GenView) => {
    if (ctxRef.current === ctx) setView(fn);
  };

  const handleFrame = (ctx: Ctx, frame: Frame) => {
    const h = frame.header;
    let latent: { image: PreviewImage | null; note: string | null } | undefined;
    noteTiming(ctx.timing, h);
    if (h.type === 'start') {
      ctx.model = (h.model as Record<string, unknown>) ?? {};
      ctx.sample = (h.sample as Record<string, unknown>) ?? {};
      ctx.preview = (h.preview as PreviewSpec) ?? null;
    } else if (h.type === 'status' && h.stage === 'queued') {
      void explainQueue(ctx);
    } else if (h.type === 'latent') {
      latent = projectForPreview(frame, ctx.preview);
    } else if (h.type === 'result') {
      onResultRef.current(galleryItem(ctx, h as unknown as ResultInfo));
    } else if (h.type === 'end') {
      ctx.ended = true;
      storeActive(null);
    }
    update(ctx, (v) => {
      const next = applyFrame(v, h, latent);
      return ctx.engineStopped ? explainEngineStop(next) : next;
    });
  };

  /** Queued: if another request holds the engine, say so (from GET /queue). */
  const explainQueue = async (ctx: Ctx) => {
    try {
      const res = await apiFetch(`/api/inference/queue?job=${ctx.jobId}`, { signal: ctx.abort.signal });
      if (!res.ok) return;
      const q = (await res.json()) as { running: { request_id: string; step: number; total: number } | null; queued: { request_id: string }[] };
      if (!q.running || q.running.request_id === ctx.requestId) return;
      const ahead = q.queued.findIndex((r) => r.request_id === ctx.requestId);
      const where = ahead > 0 ? `${ahead} more ahead of yours` : 'yours is next';
      const progress = q.running.total ? `at step ${q.running.step}/${q.running.total}` : 'getting ready';
      const line = `The engine is busy with another request (${progress}); ${where}.`;
      update(ctx, (v) => (v.stage === 'queued' ? withStatusLine(v, line) : v));
    } catch {
      // only an explanation: nothing to do when it fails
    }
  };

  /** Read a frame stream to its end; 'ended' | 'lost' | 'aborted' | 'malformed'. */
  const follow = async (ctx: Ctx, res: Response) => {
    try {
      const { sawEnd } = await readFrames(res.body as ReadableStream<Uint8Array>, (f) => handleFrame(ctx, f));
      return sawEnd ? 'ended' : 'lost';
    } catch (err) {
      if (ctx.abort.signal.aborted) return 'aborted';
      if (err instanceof FrameStreamError) {
        update(ctx, (v) => ({ ...v, phase: 'error', finishedAt: Date.now(), message: `The engine sent a stream this page cannot read: ${err.message}` }));
        return 'malformed';
      }
      return 'lost';
    }
  };

  /** After a dropped stream (or on reload): GET /stream/{id} and follow it again. */
  const reattach = async (ctx: Ctx, tries: number): Promise<void> => {
    let lastError = 'The connection dropped.';
    for (let attempt = 1; attempt <= tries; attempt++) {
      if (ctx.abort.signal.aborted || ctxRef.current !== ctx) return;
      update(ctx, (v) => ({ ...withStatusLine(v, `Re-attaching to request ${ctx.requestId} (try ${attempt}/${tries})…`), phase: 'reattaching' }));
      let res: Response;
      try {
        res = await apiFetch(`/api/inference/stream/${encodeURIComponent(ctx.requestId)}?job=${ctx.jobId}`, { signal: ctx.abort.signal });
      } catch (err) {
        if (ctx.abort.signal.aborted) return;
        lastError = (err as Error).message;
        await sleep(1000 * attempt);
        continue;
      }
      if (res.status === 404) {
        storeActive(null);
        update(ctx, (v) => ({
          ...v,
          phase: 'lost',
          finishedAt: Date.now(),
          message: `Lost the stream ${stepText(v)}, and the engine no longer knows request ${ctx.requestId} (was it restarted?).`,
        }));
        return;
      }
      if (!res.ok) {
        lastError = (await describeError(res)).message;
        await sleep(1000 * attempt);
        continue;
      }
      const outcome = await follow(ctx, res);
      if (outcome !== 'lost') return;
      lastError = 'The connection dropped again.';
    }
    storeActive(null);
    update(ctx, (v) => ({ ...v, phase: 'lost', cancelling: false, finishedAt: Date.now(), message: `Lost the connection to the engine ${stepText(v)}. ${lastError.replace(/\.*$/, '.')}` }));
  };

  const begin = (rec: Stored, phase: Phase): Ctx => {
    ctxRef.current?.abort.abort();
    const ctx: Ctx = { ...rec, abort: new AbortController(), model: {}, sample: {}, preview: null, timing: noTimings(), ended: false };
    ctxRef.current = ctx;
    setView({ ...IDLE, phase, requestId: rec.requestId, startedAt: rec.startedAt });
    return ctx;
  };

  const generate = useCallback(async (job: { id: string; name: string }, body: { request_id: string } & Record<string, unknown>) => {
    const rec: Stored = { requestId: body.request_id, jobId: job.id, jobName: job.name, startedAt: Date.now() };
    const ctx = begin(rec, 'submitting');
    let res: Response;
    try {
      res = await apiFetch(`/api/inference/generate?job=${job.id}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: ctx.abort.signal,
      });
    } catch (err) {
      if (!ctx.abort.signal.aborted) update(ctx, (v) => ({ ...v, phase: 'error', finishedAt: Date.now(), message: `The UI server did not answer: ${(err as Error).message}` }));
      return;
    }
    if (!res.ok) {
      const { message, code } = await describeError(res);
      // the server's words name the Generate page; this is it
      const text = code === 'engine_not_running' ? 'The engine is not running: start the engine above, then Generate.' : message;
      update(ctx, (v) => ({ ...v, phase: 'error', finishedAt: Date.now(), message: text }));
      return;
    }
    storeActive(rec);
    const outcome = await follow(ctx, res);
    if (outcome === 'lost') await reattach(ctx, REATTACH_TRIES);
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  const cancel = useCallback(async () => {
    const ctx = ctxRef.current;
    if (!ctx || ctx.ended) return;
    ctx.userCancelled = true;
    update(ctx, (v) => ({ ...v, cancelling: true }));
    let problem: string | null = null;
    try {
      const res = await apiFetch(`/api/inference/cancel/${encodeURIComponent(ctx.requestId)}?job=${ctx.jobId}`, { method: 'POST' });
      if (!res.ok) problem = (await describeError(res)).message;
    } catch (err) {
      problem = (err as Error).message;
    }
    if (problem !== null) {
      // the engine could not be told: drop our side of the stream at least
      ctx.abort.abort();
      storeActive(null);
      update(ctx, (v) => ({ ...v, phase: 'cancelled', cancelling: false, finishedAt: Date.now(), message: `Stopped following the request ${stepText(v)}; the engine could not confirm the cancel: ${problem}` }));
      return;
    }
    // the stream now ends with error(cancelled) + end(cancelled); do not wait forever for it
    await sleep(15000);
    if (ctxRef.current === ctx && !ctx.ended) {
      ctx.abort.abort();
      storeActive(null);
      update(ctx, (v) => ({ ...v, phase: 'cancelled', cancelling: false, finishedAt: Date.now(), message: `Cancel sent ${stepText(v)}, but the engine did not confirm it.` }));
    }
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  /**
   * The engine job is stopping or stopped. A request that ended cancelled without Cancel pressed here (or
   * ends so later) was stopped with the engine: say that.
   */
  const engineStopped = useCallback(() => {
    const ctx = ctxRef.current;
    if (!ctx || ctx.userCancelled || ctx.engineStopped) return;
    ctx.engineStopped = true;
    setView((v) => (ctxRef.current === ctx ? explainEngineStop(v) : v));
  }, []);

  /** A request that could not be sent (e.g. its mask did not upload): said where the outcome shows. */
  const fail = useCallback((message: string) => {
    const ctx = ctxRef.current;
    if (ctx && !ctx.ended) return;
    ctxRef.current = null;
    setView({ ...IDLE, phase: 'error', message, finishedAt: Date.now() });
  }, []);

  const dismiss = useCallback(() => {
    const ctx = ctxRef.current;
    if (ctx && !ctx.ended) return;
    ctxRef.current = null;
    setView(IDLE);
  }, []);

  // after a reload: re-attach to the request that was running
  useEffect(() => {
    const rec = loadActive();
    if (rec) reattach(begin(rec, 'reattaching'), REATTACH_TRIES);
    return () => ctxRef.current?.abort.abort(); // leaving the page closes the stream (the engine's rules decide the rest)
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  return { view, generate, cancel, dismiss, fail, engineStopped };
}
