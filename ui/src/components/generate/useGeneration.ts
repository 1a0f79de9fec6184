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
import type { GalleryItem, ResultInfo } from './types';

export type Phase = 'idle' | 'submitting' | 'running' | 'reattaching' | 'done' | 'error' | 'cancelled' | 'lost';

export interface GenView {
  phase: Phase;
  requestId: string | null;
  step: number;
  total: number;
  /** (step, elapsed) of the first progress frame: the sampling rate is measured from there */
  firstProgress: { step: number; elapsed: number } | null;
  elapsed: number;
  stage: string | null;
  statusLines: string[];
  message: string | null;
  cancelling: boolean;
  modality: string | null;
  preview: PreviewSpec | null;
  image: PreviewImage | null;
  latentStep: number | null;
  previewNote: string | null;
  results: ResultInfo[];
  startedAt: number | null;
  finishedAt: number | null;
}

const IDLE: GenView = {
  phase: 'idle',
  requestId: null,
  step: 0,
  total: 0,
  firstProgress: null,
  elapsed: 0,
  stage: null,
  statusLines: [],
  message: null,
  cancelling: false,
  modality: null,
  preview: null,
  image: null,
  latentStep: null,
  previewNote: null,
  results: [],
  startedAt: null,
  finishedAt: null,
};

interface Ctx {
  requestId: string;
  jobId: string;
  jobName: string;
  startedAt: number;
  abort: AbortController;
  model: Record<string, unknown>;
  sample: Record<string, unknown>;
  preview: PreviewSpec | null;
  ended: boolean;
}

const ACTIVE_KEY = 'aitk.generate.active';
const REATTACH_TRIES = 3;
const MAX_STATUS_LINES = 8;

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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const stepText = (v: Pick<GenView, 'step' | 'total'>) => (v.total ? `step ${v.step}/${v.total}` : 'before sampling started');

export function etaSeconds(v: Pick<GenView, 'step' | 'total' | 'elapsed' | 'firstProgress'>): number | null {
  const f = v.firstProgress;
  if (!f || v.step <= f.step || !v.total) return null;
  return ((v.elapsed - f.elapsed) / (v.step - f.step)) * (v.total - v.step);
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
    switch (h.type) {
      case 'start': {
        ctx.model = (h.model as Record<string, unknown>) ?? {};
        ctx.sample = (h.sample as Record<string, unknown>) ?? {};
        ctx.preview = (h.preview as PreviewSpec) ?? null;
        // a re-attach replays the request from its start frame: begin the lists afresh
        update(ctx, (v) => ({ ...v, phase: 'running', modality: String(h.modality ?? ''), preview: ctx.preview, statusLines: [], results: [] }));
        break;
      }
      case 'status': {
        const stage = String(h.stage ?? '');
        let line = String(h.message ?? '');
        const queued = stage === 'queued' ? /(\d+) in queue/.exec(line) : null;
        if (queued && Number(queued[1]) > 1) line = `The engine is busy with another request: yours is queued (${queued[1]} in queue).`;
        update(ctx, (v) => ({ ...v, stage, statusLines: [...v.statusLines, line].slice(-MAX_STATUS_LINES) }));
        break;
      }
      case 'progress': {
        const step = Number(h.step);
        const total = Number(h.total);
        const elapsed = Number(h.elapsed);
        update(ctx, (v) => ({ ...v, step, total, elapsed, firstProgress: v.firstProgress ?? { step, elapsed } }));
        break;
      }
      case 'latent': {
        let image: PreviewImage;
        let note: string | null = null;
        try {
          image = latentFrameToImage(frame, ctx.preview);
        } catch (err) {
          // factors that do not fit: fall back to the plain channel preview, and say so
          try {
            image = projectLatent(decodeFloat16(frame.payload), h.shape as number[], String(h.layout ?? ctx.preview?.layout), null);
            note = `Preview without colour factors (${(err as Error).message}).`;
          } catch (err2) {
            update(ctx, (v) => ({ ...v, previewNote: `This latent cannot be previewed: ${(err2 as Error).message}` }));
            break;
          }
        }
        const step = Number(h.step);
        update(ctx, (v) => ({ ...v, image, latentStep: step, previewNote: note }));
        break;
      }
      case 'result': {
        const result = h as unknown as ResultInfo;
        onResultRef.current({
          key: `${ctx.requestId}/${result.relpath}`,
          requestId: ctx.requestId,
          jobId: ctx.jobId,
          jobName: ctx.jobName,
          result: {
            relpath: result.relpath,
            url: result.url,
            kind: result.kind,
            ext: result.ext,
            bytes: result.bytes,
            seed: result.seed,
            width: result.width,
            height: result.height,
            num_frames: result.num_frames,
            fps: result.fps,
            duration: result.duration,
          },
          model: ctx.model,
          sample: ctx.sample,
          createdAt: new Date().toISOString(),
        });
        update(ctx, (v) => ({ ...v, results: [...v.results, result] }));
        break;
      }
      case 'error': {
        const cancelled = h.cancelled === true;
        const msg = String(h.message ?? 'unknown error');
        update(ctx, (v) => ({
          ...v,
          message: cancelled ? `Cancelled at ${stepText(v)}.` : `Generation failed at ${stepText(v)}: ${msg}`,
        }));
        break;
      }
      case 'end': {
        ctx.ended = true;
        storeActive(null);
        const status = String(h.status);
        update(ctx, (v) => {
          const phase: Phase = status === 'ok' ? 'done' : status === 'cancelled' ? 'cancelled' : 'error';
          const fallback = phase === 'done' ? null : phase === 'cancelled' ? `Cancelled at ${stepText(v)}.` : `Generation failed at ${stepText(v)}.`;
          const finishedAt = Date.now();
          const took = v.startedAt ? ` in ${((finishedAt - v.startedAt) / 1000).toFixed(1)} s` : '';
          const message = phase === 'done' ? `Done${took}: ${v.results.length} file${v.results.length === 1 ? '' : 's'}.` : (v.message ?? fallback);
          return { ...v, phase, message, finishedAt, cancelling: false, stage: null };
        });
        break;
      }
      default:
        break; // a frame type this page does not know: ignore it
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
    let lastError = 'the connection dropped';
    for (let attempt = 1; attempt <= tries; attempt++) {
      if (ctx.abort.signal.aborted || ctxRef.current !== ctx) return;
      update(ctx, (v) => ({ ...v, phase: 'reattaching', statusLines: [...v.statusLines, `Re-attaching to request ${ctx.requestId} (try ${attempt}/${tries})…`].slice(-MAX_STATUS_LINES) }));
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
          message: `Lost the stream at ${stepText(v)}, and the engine no longer knows request ${ctx.requestId} (was it restarted?).`,
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
      lastError = 'the connection dropped again';
    }
    storeActive(null);
    update(ctx, (v) => ({ ...v, phase: 'lost', cancelling: false, finishedAt: Date.now(), message: `Lost the connection to the engine at ${stepText(v)}: ${lastError}.` }));
  };

  const begin = (rec: Stored, phase: Phase): Ctx => {
    ctxRef.current?.abort.abort();
    const ctx: Ctx = { ...rec, abort: new AbortController(), model: {}, sample: {}, preview: null, ended: false };
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
      const { message } = await describeError(res);
      update(ctx, (v) => ({ ...v, phase: 'error', finishedAt: Date.now(), message }));
      return;
    }
    storeActive(rec);
    const outcome = await follow(ctx, res);
    if (outcome === 'lost') await reattach(ctx, REATTACH_TRIES);
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  const cancel = useCallback(async () => {
    const ctx = ctxRef.current;
    if (!ctx || ctx.ended) return;
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
      update(ctx, (v) => ({ ...v, phase: 'cancelled', cancelling: false, finishedAt: Date.now(), message: `Stopped following the request at ${stepText(v)}; the engine could not confirm the cancel: ${problem}` }));
      return;
    }
    // the stream now ends with error(cancelled) + end(cancelled); do not wait forever for it
    await sleep(15000);
    if (ctxRef.current === ctx && !ctx.ended) {
      ctx.abort.abort();
      storeActive(null);
      update(ctx, (v) => ({ ...v, phase: 'cancelled', cancelling: false, finishedAt: Date.now(), message: `Cancel sent at ${stepText(v)}, but the engine did not confirm it.` }));
    }
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

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

  return { view, generate, cancel, dismiss };
}
