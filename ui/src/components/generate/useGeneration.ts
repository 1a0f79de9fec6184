'use client';
// This page's generation requests: POST /generate through the proxy, frames parsed as they arrive,
// latents projected for the preview, results handed to the gallery, Cancel, re-attaching (after a
// reload or a dropped connection) through GET /stream/{request_id}, and requests queued while one
// runs: the preview follows the one the engine runs, and each one's results reach the gallery.
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
import { loadPending, storePending, type PendingRequest } from './pendingRequests';
import { chooseFollow, toCollect, type QueueSnapshot } from './queueView';
import { noTimings, noteTiming, timingsAt, type TimingNotes } from './resultTimings';
import type { GalleryItem, ResultInfo } from './types';

interface Ctx extends PendingRequest {
  /** the current reader's; a new reader gets a new one */
  abort: AbortController;
  /** a reader (POST stream or GET /stream) is open */
  reading: boolean;
  /** that reader is the POST stream of a request that is not detached: dropping it cancels the request */
  cancelOnDrop: boolean;
  /** when the engine took it (for toCollect) */
  sentAt: number;
  model: Record<string, unknown>;
  sample: Record<string, unknown>;
  preview: PreviewSpec | null;
  /** what its frames said of its run and load seconds (resultTimings.ts) */
  timing: TimingNotes;
  ended: boolean;
  view: GenView;
  /** gallery keys handed on already (a re-attach replays the results) */
  delivered: Set<string>;
  /** Cancel was pressed on this page */
  userCancelled?: boolean;
  /** the engine job was seen stopping while this request was current */
  engineStopped?: boolean;
}

const REATTACH_TRIES = 3;

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

function galleryItem(ctx: Pick<Ctx, 'requestId' | 'jobId' | 'jobName' | 'model' | 'sample' | 'timing' | 'startedAt'>, r: ResultInfo): GalleryItem {
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
  const [ours, setOurs] = useState<string[]>([]);
  const [notice, setNotice] = useState<string | null>(null);
  /** this page's requests that have not ended, in the order they were sent */
  const ctxs = useRef(new Map<string, Ctx>());
  /** the one the preview shows (it may have ended) */
  const shownRef = useRef<Ctx | null>(null);
  const snapRef = useRef<{ snap: QueueSnapshot; at: number } | null>(null);
  const onResultRef = useRef(onResult);
  onResultRef.current = onResult;

  const update = (ctx: Ctx, fn: (v: GenView) => GenView) => {
    ctx.view = fn(ctx.view);
    if (shownRef.current === ctx) setView(ctx.view);
  };

  const persist = () => {
    const live = [...ctxs.current.values()];
    storePending(live.map(({ requestId, jobId, jobName, startedAt, keepOnClose }) => ({ requestId, jobId, jobName, startedAt, keepOnClose })));
    setOurs(live.map((c) => c.requestId));
  };

  const newCtx = (rec: PendingRequest, phase: Phase): Ctx => {
    const ctx: Ctx = {
      ...rec,
      abort: new AbortController(),
      reading: false,
      cancelOnDrop: false,
      sentAt: Date.now(),
      model: {},
      sample: {},
      preview: null,
      timing: noTimings(),
      ended: false,
      view: { ...IDLE, phase, requestId: rec.requestId, startedAt: rec.startedAt },
      delivered: new Set(),
    };
    ctxs.current.set(rec.requestId, ctx);
    return ctx;
  };

  /** Show `ctx` in the preview; it gets a reader if it has none. */
  const show = (ctx: Ctx) => {
    shownRef.current = ctx;
    setView(ctx.view);
    if (!ctx.ended && !ctx.reading) void reattach(ctx, REATTACH_TRIES, 'follow');
  };

  /** Stop reading a request the preview no longer shows (unless that would cancel it: then it reads on unseen). */
  const park = (ctx: Ctx) => {
    if (ctx.reading && !ctx.cancelOnDrop) {
      ctx.abort.abort();
      ctx.reading = false;
    }
  };

  /** The preview moves to the request it should follow (queueView.chooseFollow), if that is another. */
  const advance = () => {
    const shown = shownRef.current;
    const next = chooseFollow([...ctxs.current.keys()], shown ? { id: shown.requestId, ended: shown.ended } : null, snapRef.current?.snap ?? null);
    const ctx = next ? ctxs.current.get(next) : undefined;
    if (!ctx || ctx === shown) return;
    if (shown && !shown.ended) park(shown);
    show(ctx);
  };

  /** A request ended (or was lost): it leaves the list; the preview moves on if it showed it. */
  const finish = (ctx: Ctx) => {
    ctx.ended = true;
    ctx.reading = false;
    ctxs.current.delete(ctx.requestId);
    persist();
    if (shownRef.current === ctx) advance();
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
      if (shownRef.current === ctx) void explainQueue(ctx);
    } else if (h.type === 'latent') {
      if (shownRef.current === ctx) latent = projectForPreview(frame, ctx.preview);
    } else if (h.type === 'result') {
      const item = galleryItem(ctx, h as unknown as ResultInfo);
      if (!ctx.delivered.has(item.key)) {
        ctx.delivered.add(item.key);
        onResultRef.current(item);
      }
    }
    update(ctx, (v) => {
      const next = applyFrame(v, h, latent);
      return ctx.engineStopped ? explainEngineStop(next) : next;
    });
    if (h.type === 'end') finish(ctx);
  };

  /** Queued: if another request holds the engine, say so (from GET /queue). */
  const explainQueue = async (ctx: Ctx) => {
    try {
      const res = await apiFetch(`/api/inference/queue?job=${ctx.jobId}`, { signal: ctx.abort.signal });
      if (!res.ok) return;
      const q = (await res.json()) as QueueSnapshot;
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
  const follow = async (ctx: Ctx, res: Response, ctl: AbortController) => {
    ctx.reading = true;
    try {
      const { sawEnd } = await readFrames(res.body as ReadableStream<Uint8Array>, (f) => {
        if (!ctl.signal.aborted) handleFrame(ctx, f);
      });
      return ctl.signal.aborted ? 'aborted' : sawEnd ? 'ended' : 'lost';
    } catch (err) {
      if (ctl.signal.aborted) return 'aborted';
      if (err instanceof FrameStreamError) {
        update(ctx, (v) => ({ ...v, phase: 'error', finishedAt: Date.now(), message: `The engine sent a stream this page cannot read: ${err.message}` }));
        finish(ctx);
        return 'malformed';
      }
      return 'lost';
    } finally {
      if (ctx.abort === ctl) ctx.reading = false;
    }
  };

  /**
   * GET /stream/{id} and follow it: after a dropped stream or a reload ('reattach'), or to show a
   * request sent while another ran ('follow'; its replay brings every frame it made meanwhile).
   */
  const reattach = async (ctx: Ctx, tries: number, why: 'reattach' | 'follow' = 'reattach'): Promise<void> => {
    const ctl = new AbortController();
    ctx.abort = ctl;
    ctx.reading = true;
    ctx.cancelOnDrop = false;
    let lastError = 'The connection dropped.';
    for (let attempt = 1; attempt <= tries; attempt++) {
      if (ctl.signal.aborted || ctx.ended) return;
      const line = why === 'follow' && attempt === 1 ? `Following request ${ctx.requestId}…` : `Re-attaching to request ${ctx.requestId} (try ${attempt}/${tries})…`;
      update(ctx, (v) => ({ ...withStatusLine(v, line), phase: 'reattaching' }));
      let res: Response;
      try {
        res = await apiFetch(`/api/inference/stream/${encodeURIComponent(ctx.requestId)}?job=${ctx.jobId}`, { signal: ctl.signal });
      } catch (err) {
        if (ctl.signal.aborted) return;
        lastError = (err as Error).message;
        await sleep(1000 * attempt);
        continue;
      }
      if (res.status === 404) {
        update(ctx, (v) => ({
          ...v,
          phase: 'lost',
          finishedAt: Date.now(),
          message: `Lost the stream ${stepText(v)}, and the engine no longer knows request ${ctx.requestId} (was it restarted?).`,
        }));
        finish(ctx);
        return;
      }
      if (!res.ok) {
        lastError = (await describeError(res)).message;
        await sleep(1000 * attempt);
        continue;
      }
      const outcome = await follow(ctx, res, ctl);
      if (outcome !== 'lost') return;
      lastError = 'The connection dropped again.';
    }
    if (ctl.signal.aborted || ctx.ended) return;
    update(ctx, (v) => ({ ...v, phase: 'lost', cancelling: false, finishedAt: Date.now(), message: `Lost the connection to the engine ${stepText(v)}. ${lastError.replace(/\.*$/, '.')}` }));
    finish(ctx);
  };

  /**
   * Send a request. With none of this page's running or waiting, the preview follows its POST stream
   * (as before the queue). Otherwise it is queued: sent detached, its stream closed once the engine
   * took it, and followed later through GET /stream (one open stream per page, whatever the queue).
   */
  const generate = useCallback(async (job: { id: string; name: string }, body: { request_id: string } & Record<string, unknown>) => {
    const stream = (body.stream ?? {}) as Record<string, unknown>;
    const rec: PendingRequest = { requestId: body.request_id, jobId: job.id, jobName: job.name, startedAt: Date.now(), keepOnClose: stream.detach !== false };
    const queueing = ctxs.current.size > 0;
    setNotice(null);
    const ctl = new AbortController();
    let ctx: Ctx | null = null;
    if (!queueing) {
      shownRef.current?.abort.abort();
      ctx = newCtx(rec, 'submitting');
      ctx.abort = ctl;
      ctx.reading = true; // its reader is this POST
      show(ctx);
    }
    let res: Response;
    try {
      res = await apiFetch(`/api/inference/generate?job=${job.id}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(queueing ? { ...body, stream: { ...stream, detach: true } } : body),
        signal: ctl.signal,
      });
    } catch (err) {
      if (ctl.signal.aborted) return;
      const message = `The UI server did not answer: ${(err as Error).message}`;
      if (!ctx) return setNotice(`Not queued. ${message}`);
      update(ctx, (v) => ({ ...v, phase: 'error', finishedAt: Date.now(), message }));
      return finish(ctx);
    }
    if (!res.ok) {
      const { message, code } = await describeError(res);
      // the server's words name the Generate page; this is it
      const text = code === 'engine_not_running' ? 'The engine is not running: start the engine above, then Generate.' : message;
      if (!ctx) return setNotice(`Not queued. ${text}`);
      update(ctx, (v) => ({ ...v, phase: 'error', finishedAt: Date.now(), message: text }));
      return finish(ctx);
    }
    // sent with ?job=auto: the engine that took it is the one for its cancel, re-attach and files
    const took = res.headers.get('x-engine-job');
    if (took && took !== rec.jobId) {
      rec.jobId = took;
      rec.jobName = res.headers.get('x-engine-job-name') ?? rec.jobName;
      if (ctx) Object.assign(ctx, { jobId: rec.jobId, jobName: rec.jobName });
    }
    if (!ctx) {
      ctl.abort(); // detached: the engine keeps it; it is followed when its turn comes
      newCtx(rec, 'submitting');
      persist();
      advance();
      return;
    }
    persist();
    ctx.cancelOnDrop = !rec.keepOnClose;
    const outcome = await follow(ctx, res, ctl);
    if (outcome === 'lost') await reattach(ctx, REATTACH_TRIES);
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  /** Cancel the request the preview shows. */
  const cancel = useCallback(async () => {
    const ctx = shownRef.current;
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
      update(ctx, (v) => ({ ...v, phase: 'cancelled', cancelling: false, finishedAt: Date.now(), message: `Stopped following the request ${stepText(v)}; the engine could not confirm the cancel: ${problem}` }));
      finish(ctx);
      return;
    }
    // the stream now ends with error(cancelled) + end(cancelled); do not wait forever for it
    await sleep(15000);
    if (shownRef.current === ctx && !ctx.ended) {
      ctx.abort.abort();
      update(ctx, (v) => ({ ...v, phase: 'cancelled', cancelling: false, finishedAt: Date.now(), message: `Cancel sent ${stepText(v)}, but the engine did not confirm it.` }));
      finish(ctx);
    }
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  /** One of this page's requests is being cancelled from the queue panel: its end reads as a cancel here. */
  const noteCancel = useCallback((requestId: string) => {
    const ctx = ctxs.current.get(requestId);
    if (ctx) ctx.userCancelled = true;
  }, []);

  /**
   * A new GET /queue answer (asked at `at`): requests of ours the engine has finished are read in
   * the background (their results reach the gallery now), and the preview follows the one it runs.
   */
  const onQueue = useCallback((snap: QueueSnapshot, at: number) => {
    snapRef.current = { snap, at };
    const idle = [...ctxs.current.values()].filter((c) => !c.reading && c !== shownRef.current);
    for (const id of toCollect(idle.map((c) => ({ id: c.requestId, sentAt: c.sentAt })), snap, at)) {
      void reattach(ctxs.current.get(id) as Ctx, 1);
    }
    advance();
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  /**
   * The engine job is stopping or stopped. A request that ended cancelled without Cancel pressed here (or
   * ends so later) was stopped with the engine: say that. The others of this page went with it.
   */
  const engineStopped = useCallback(() => {
    for (const ctx of [...ctxs.current.values()]) {
      if (ctx === shownRef.current) continue;
      ctx.abort.abort();
      ctx.ended = true;
      ctxs.current.delete(ctx.requestId);
    }
    persist();
    const ctx = shownRef.current;
    if (!ctx || ctx.userCancelled || ctx.engineStopped) return;
    ctx.engineStopped = true;
    update(ctx, explainEngineStop);
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  /** A request that could not be sent (e.g. its mask did not upload): said where the outcome shows. */
  const fail = useCallback((message: string) => {
    if (ctxs.current.size) {
      setNotice(`Not queued. ${message}`);
      return;
    }
    shownRef.current = null;
    setView({ ...IDLE, phase: 'error', message, finishedAt: Date.now() });
  }, []);

  const dismiss = useCallback(() => {
    if (ctxs.current.size) return;
    shownRef.current = null;
    setView(IDLE);
  }, []);

  // after a reload: re-attach to the requests that were running or waiting
  useEffect(() => {
    const list = loadPending();
    for (const rec of list) newCtx(rec, 'reattaching');
    persist();
    const first = ctxs.current.values().next().value;
    if (first) {
      shownRef.current = first;
      setView(first.view);
      void reattach(first, REATTACH_TRIES);
    }
    // closing the page: requests sent without "keep generating" are cancelled (a queued one has no
    // stream whose end the engine would notice)
    const onHide = () => {
      for (const ctx of ctxs.current.values()) {
        if (ctx.keepOnClose === false) {
          void apiFetch(`/api/inference/cancel/${encodeURIComponent(ctx.requestId)}?job=${ctx.jobId}`, { method: 'POST', keepalive: true }).catch(() => undefined);
        }
      }
    };
    window.addEventListener('pagehide', onHide);
    return () => {
      window.removeEventListener('pagehide', onHide);
      for (const ctx of ctxs.current.values()) ctx.abort.abort(); // leaving the page closes the streams (the engine's rules decide the rest)
    };
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  return { view, ours, notice, generate, cancel, noteCancel, onQueue, dismiss, fail, engineStopped };
}
