// This page's generation requests that have not ended, each with its reader's state, and the one the
// preview shows: the bookkeeping under useGeneration.ts. Reading a request's frames is
// requestStreams.ts; sending one is sendRequest.ts.
import type { PreviewSpec } from '@/utils/engineStream';
import { IDLE, stepText, type GenView, type Phase } from './generationView';
import { storePending, type PendingRequest } from './pendingRequests';
import { chooseFollow, type QueueSnapshot } from './queueView';
import { noTimings, timingsAt, type TimingNotes } from './resultTimings';
import type { GalleryItem, ResultInfo } from './types';

export interface Ctx extends PendingRequest {
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

export const REATTACH_TRIES = 3;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A request that ended cancelled (not by this page) or lost: the engine was stopped. */
export function explainEngineStop(v: GenView): GenView {
  if (v.phase !== 'cancelled' && v.phase !== 'lost') return v;
  return { ...v, phase: 'cancelled', message: `The engine was stopped ${stepText(v)}; start the engine above to generate again.` };
}

/** One result frame of a request as a gallery item, with the settings its start frame resolved. */
export function galleryItem(ctx: Pick<Ctx, 'requestId' | 'jobId' | 'jobName' | 'model' | 'sample' | 'timing' | 'startedAt'>, r: ResultInfo): GalleryItem {
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

/** What the book tells the page (React state setters), and how a request the preview moves to gets a reader. */
export interface BookIO {
  setView: (v: GenView) => void;
  setOurs: (ids: string[]) => void;
  setNotice: (notice: string | null) => void;
  onResult: (item: GalleryItem) => void;
  /** open a reader for a request the preview now shows (requestStreams.ts's reattach) */
  follow: (ctx: Ctx) => void;
}

export class RequestBook {
  /** this page's requests that have not ended, in the order they were sent */
  readonly ctxs = new Map<string, Ctx>();
  /** the one the preview shows (it may have ended) */
  shown: Ctx | null = null;
  snap: { snap: QueueSnapshot; at: number } | null = null;

  constructor(readonly io: BookIO) {}

  update(ctx: Ctx, fn: (v: GenView) => GenView) {
    ctx.view = fn(ctx.view);
    if (this.shown === ctx) this.io.setView(ctx.view);
  }

  /** The live requests into localStorage (a reload re-attaches) and the queue panel's "mine". */
  persist() {
    const live = [...this.ctxs.values()];
    storePending(live.map(({ requestId, jobId, jobName, startedAt, keepOnClose }) => ({ requestId, jobId, jobName, startedAt, keepOnClose })));
    this.io.setOurs(live.map((c) => c.requestId));
  }

  add(rec: PendingRequest, phase: Phase): Ctx {
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
    this.ctxs.set(rec.requestId, ctx);
    return ctx;
  }

  /** Show `ctx` in the preview; it gets a reader if it has none. */
  show(ctx: Ctx) {
    this.shown = ctx;
    this.io.setView(ctx.view);
    if (!ctx.ended && !ctx.reading) this.io.follow(ctx);
  }

  /** Stop reading a request the preview no longer shows (unless that would cancel it: then it reads on unseen). */
  park(ctx: Ctx) {
    if (ctx.reading && !ctx.cancelOnDrop) {
      ctx.abort.abort();
      ctx.reading = false;
    }
  }

  /** The preview moves to the request it should follow (queueView.chooseFollow), if that is another. */
  advance() {
    const shown = this.shown;
    const next = chooseFollow([...this.ctxs.keys()], shown ? { id: shown.requestId, ended: shown.ended } : null, this.snap?.snap ?? null);
    const ctx = next ? this.ctxs.get(next) : undefined;
    if (!ctx || ctx === shown) return;
    if (shown && !shown.ended) this.park(shown);
    this.show(ctx);
  }

  /** A request ended (or was lost): it leaves the list; the preview moves on if it showed it. */
  finish(ctx: Ctx) {
    ctx.ended = true;
    ctx.reading = false;
    this.ctxs.delete(ctx.requestId);
    this.persist();
    if (this.shown === ctx) this.advance();
  }

  /** The preview shows nothing (or only `view`, of no request). */
  clear(view: GenView) {
    this.shown = null;
    this.io.setView(view);
  }
}
