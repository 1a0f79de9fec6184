// What the preview panel shows for one request, and how each frame changes it (pure).
import type { FrameHeader, PreviewImage, PreviewSpec } from '@/utils/engineStream';
import { runAndWaitText } from '@/utils/format';
import type { ResultInfo } from './types';

export type Phase = 'idle' | 'submitting' | 'running' | 'reattaching' | 'done' | 'error' | 'cancelled' | 'lost';

export interface GenView {
  phase: Phase;
  requestId: string | null;
  step: number;
  total: number;
  /** (step, elapsed) of the first progress frame: the sampling rate is measured from there */
  firstProgress: { step: number; elapsed: number } | null;
  elapsed: number;
  /** a hires request's pass the frames are of: 'base' or 'hires' (null: one pass) */
  pass: string | null;
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

export const IDLE: GenView = {
  phase: 'idle',
  requestId: null,
  step: 0,
  total: 0,
  firstProgress: null,
  elapsed: 0,
  pass: null,
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

export const ACTIVE_PHASES: ReadonlySet<Phase> = new Set(['submitting', 'running', 'reattaching']);

const MAX_STATUS_LINES = 8;

export function withStatusLine(v: GenView, line: string): GenView {
  return { ...v, statusLines: [...v.statusLines, line].slice(-MAX_STATUS_LINES) };
}

/** "at step 3/8" ("at step 3/8 of the hires pass"), or "before sampling started". */
export function stepText(v: Pick<GenView, 'step' | 'total'> & { pass?: string | null }): string {
  return v.total ? `at step ${v.step}/${v.total}${v.pass ? ` of the ${v.pass} pass` : ''}` : 'before sampling started';
}

/** A hires request's pass in words ("Hires pass"), null for a one-pass request. */
export function passText(pass: string | null | undefined): string | null {
  if (!pass) return null;
  return pass === 'hires' ? 'Hires pass' : pass === 'base' ? 'Base pass' : `${pass} pass`;
}

/** What runs after the last step, from the engine's status stage (docs/engine_api.md, Frames): the VAE
 * decode and the file written take seconds the step count and the ETA do not show. */
const AFTER_STEPS: Record<string, string> = { decoding: 'Decoding…', saving: 'Saving…' };

/** "Decoding…" / "Saving…" while the request is in that stage after its steps, else null. */
export function afterStepsText(v: Pick<GenView, 'phase' | 'stage'>): string | null {
  return ACTIVE_PHASES.has(v.phase) && v.stage ? (AFTER_STEPS[v.stage] ?? null) : null;
}

/** Seconds left, from the sampling rate since the first progress frame. */
export function etaSeconds(v: Pick<GenView, 'step' | 'total' | 'elapsed' | 'firstProgress'>): number | null {
  const f = v.firstProgress;
  if (!f || v.step <= f.step || !v.total) return null;
  return ((v.elapsed - f.elapsed) / (v.step - f.step)) * (v.total - v.step);
}

/**
 * The view after one frame. A latent frame's pixels are projected by the caller and passed
 * in `latent` (projection can fail; then only the note changes).
 */
export function applyFrame(v: GenView, h: FrameHeader, latent?: { image: PreviewImage | null; note: string | null }, now = Date.now()): GenView {
  switch (h.type) {
    case 'start':
      // a re-attach replays the request from its start frame: begin the lists afresh
      return { ...v, phase: 'running', modality: String(h.modality ?? ''), preview: (h.preview as PreviewSpec) ?? null, statusLines: [], results: [], pass: null };
    case 'status': {
      const next = { ...withStatusLine(v, String(h.message ?? '')), stage: String(h.stage ?? '') };
      // a pass begins: its steps count afresh, at its own rate (the ETA is measured again)
      return h.stage === 'pass' && typeof h.pass === 'string' && h.pass !== v.pass ? { ...next, pass: h.pass, firstProgress: null } : next;
    }
    case 'progress': {
      const step = Number(h.step);
      const elapsed = Number(h.elapsed);
      const pass = typeof h.pass === 'string' ? h.pass : null;
      // a new pass counts its steps afresh, at its own rate: the ETA is measured again
      const first = pass !== v.pass ? null : v.firstProgress;
      return { ...v, step, total: Number(h.total), elapsed, pass, firstProgress: first ?? { step, elapsed } };
    }
    case 'latent':
    case 'preview': // the engine's decoded image (decoded by the caller, possibly after a newer one)
      if (!latent?.image) return { ...v, previewNote: latent?.note ?? v.previewNote };
      if (h.type === 'preview' && Number(h.step) < (v.latentStep ?? 0)) return v;
      return { ...v, image: latent.image, latentStep: Number(h.step), previewNote: latent.note };
    case 'result':
      return { ...v, results: [...v.results, h as unknown as ResultInfo] };
    case 'error': {
      const cancelled = h.cancelled === true;
      const why = String(h.message ?? 'unknown error');
      return { ...v, message: cancelled ? `Cancelled ${stepText(v)}.` : `Generation failed ${stepText(v)}: ${why}` };
    }
    case 'end': {
      const status = String(h.status);
      const phase: Phase = status === 'ok' ? 'done' : status === 'cancelled' ? 'cancelled' : 'error';
      // the run apart from the queue wait before it (the engine's elapsed at the last step)
      const took = v.startedAt ? ` in ${runAndWaitText(v.firstProgress ? v.elapsed : null, (now - v.startedAt) / 1000)}` : '';
      const n = v.results.length;
      const message =
        phase === 'done'
          ? `Done${took}: ${n} file${n === 1 ? '' : 's'}.`
          : (v.message ?? (phase === 'cancelled' ? `Cancelled ${stepText(v)}.` : `Generation failed ${stepText(v)}.`));
      return { ...v, phase, message, finishedAt: now, cancelling: false, stage: null };
    }
    default:
      return v; // a frame type this page does not know
  }
}
