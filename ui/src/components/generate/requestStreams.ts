// Reading a request's frames: the POST stream or GET /stream/{request_id} (after a dropped stream or
// a reload, or to show a request sent while another ran), each frame applied to its view, its results
// handed to the gallery, and a queued request's wait explained from GET /queue.
import { apiFetch, describeError } from '@/utils/api';
import { FrameStreamError, readFrames, type Frame, type PreviewImage, type PreviewSpec } from '@/utils/engineStream';
import { applyFrame, stepText, withStatusLine } from './generationView';
import { decodePreviewFrame, projectForPreview } from './previewProjection';
import { toCollect, type QueueSnapshot } from './queueView';
import { explainEngineStop, galleryItem, sleep, type Ctx, type RequestBook } from './requestBook';
import { noteTiming } from './resultTimings';
import type { ResultInfo } from './types';

function handleFrame(book: RequestBook, ctx: Ctx, frame: Frame) {
  const h = frame.header;
  let latent: { image: PreviewImage | null; note: string | null } | undefined;
  noteTiming(ctx.timing, h);
  if (h.type === 'start') {
    ctx.model = (h.model as Record<string, unknown>) ?? {};
    ctx.sample = (h.sample as Record<string, unknown>) ?? {};
    ctx.preview = (h.preview as PreviewSpec) ?? null;
  } else if (h.type === 'status' && h.stage === 'queued') {
    if (book.shown === ctx) void explainQueue(book, ctx);
  } else if (h.type === 'latent') {
    if (book.shown === ctx) latent = projectForPreview(frame, ctx.preview);
  } else if (h.type === 'preview') {
    if (book.shown === ctx) void showDecoded(book, ctx, frame, decodePreviewFrame);
    return;
  } else if (h.type === 'result') {
    const item = galleryItem(ctx, h as unknown as ResultInfo);
    if (!ctx.delivered.has(item.key)) {
      ctx.delivered.add(item.key);
      book.io.onResult(item);
    }
  }
  book.update(ctx, (v) => {
    const next = applyFrame(v, h, latent);
    return ctx.engineStopped ? explainEngineStop(next) : next;
  });
  if (h.type === 'end') book.finish(ctx);
}

/** A `preview` frame drawn once the browser has decoded its JPEG (a newer one already shown wins). */
export async function showDecoded(book: RequestBook, ctx: Ctx, frame: Frame, decode: (f: Frame) => Promise<PreviewImage>) {
  let shown: { image: PreviewImage | null; note: string | null };
  try {
    shown = { image: await decode(frame), note: null };
  } catch (err) {
    shown = { image: null, note: `This preview image cannot be shown: ${(err as Error).message}` };
  }
  book.update(ctx, (v) => applyFrame(v, frame.header, shown));
}

/** Queued: if another request holds the engine, say so (from GET /queue). */
async function explainQueue(book: RequestBook, ctx: Ctx) {
  try {
    const res = await apiFetch(`/api/inference/queue?job=${ctx.jobId}`, { signal: ctx.abort.signal });
    if (!res.ok) return;
    const q = (await res.json()) as QueueSnapshot;
    if (!q.running || q.running.request_id === ctx.requestId) return;
    const ahead = q.queued.findIndex((r) => r.request_id === ctx.requestId);
    const where = ahead > 0 ? `${ahead} more ahead of yours` : 'yours is next';
    const progress = q.running.total ? `at step ${q.running.step}/${q.running.total}` : 'getting ready';
    const line = `The engine is busy with another request (${progress}); ${where}.`;
    book.update(ctx, (v) => (v.stage === 'queued' ? withStatusLine(v, line) : v));
  } catch {
    // only an explanation: nothing to do when it fails
  }
}

/** Read a frame stream to its end; 'ended' | 'lost' | 'aborted' | 'malformed'. */
export async function readStream(book: RequestBook, ctx: Ctx, res: Response, ctl: AbortController) {
  ctx.reading = true;
  try {
    const { sawEnd } = await readFrames(res.body as ReadableStream<Uint8Array>, (f) => {
      if (!ctl.signal.aborted) handleFrame(book, ctx, f);
    });
    return ctl.signal.aborted ? 'aborted' : sawEnd ? 'ended' : 'lost';
  } catch (err) {
    if (ctl.signal.aborted) return 'aborted';
    if (err instanceof FrameStreamError) {
      book.update(ctx, (v) => ({ ...v, phase: 'error', finishedAt: Date.now(), message: `The engine sent a stream this page cannot read: ${err.message}` }));
      book.finish(ctx);
      return 'malformed';
    }
    return 'lost';
  } finally {
    if (ctx.abort === ctl) ctx.reading = false;
  }
}

/**
 * GET /stream/{id} and follow it: after a dropped stream or a reload ('reattach'), or to show a
 * request sent while another ran ('follow'; its replay brings every frame it made meanwhile).
 */
export async function reattach(book: RequestBook, ctx: Ctx, tries: number, why: 'reattach' | 'follow' = 'reattach'): Promise<void> {
  const ctl = new AbortController();
  ctx.abort = ctl;
  ctx.reading = true;
  ctx.cancelOnDrop = false;
  let lastError = 'The connection dropped.';
  for (let attempt = 1; attempt <= tries; attempt++) {
    if (ctl.signal.aborted || ctx.ended) return;
    const line = why === 'follow' && attempt === 1 ? `Following request ${ctx.requestId}…` : `Re-attaching to request ${ctx.requestId} (try ${attempt}/${tries})…`;
    book.update(ctx, (v) => ({ ...withStatusLine(v, line), phase: 'reattaching' }));
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
      book.update(ctx, (v) => ({
        ...v,
        phase: 'lost',
        finishedAt: Date.now(),
        message: `Lost the stream ${stepText(v)}, and the engine no longer knows request ${ctx.requestId} (was it restarted?).`,
      }));
      book.finish(ctx);
      return;
    }
    if (!res.ok) {
      lastError = (await describeError(res)).message;
      await sleep(1000 * attempt);
      continue;
    }
    const outcome = await readStream(book, ctx, res, ctl);
    if (outcome !== 'lost') return;
    lastError = 'The connection dropped again.';
  }
  if (ctl.signal.aborted || ctx.ended) return;
  book.update(ctx, (v) => ({ ...v, phase: 'lost', cancelling: false, finishedAt: Date.now(), message: `Lost the connection to the engine ${stepText(v)}. ${lastError.replace(/\.*$/, '.')}` }));
  book.finish(ctx);
}

/**
 * A new GET /queue answer (asked at `at`): requests of ours the engine has finished are read in the
 * background (their results reach the gallery now), and the preview follows the one it runs.
 */
export function onQueueAnswer(book: RequestBook, snap: QueueSnapshot, at: number) {
  book.snap = { snap, at };
  const idle = [...book.ctxs.values()].filter((c) => !c.reading && c !== book.shown);
  for (const id of toCollect(idle.map((c) => ({ id: c.requestId, sentAt: c.sentAt })), snap, at)) {
    void reattach(book, book.ctxs.get(id) as Ctx, 1);
  }
  book.advance();
}
