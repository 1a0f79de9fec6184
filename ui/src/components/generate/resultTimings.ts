// How long a result took, from its request's frames: the engine's elapsed at the last step (its
// run so far, a load included) and the load seconds its "loaded" status reports.
import type { FrameHeader } from '@/utils/engineStream';
import type { GenerationTimings } from './types';

export interface TimingNotes {
  runS: number | null;
  loadS: number | null;
}

export const noTimings = (): TimingNotes => ({ runS: null, loadS: null });

export function noteTiming(t: TimingNotes, h: FrameHeader): void {
  if (h.type === 'progress' && Number.isFinite(Number(h.elapsed))) t.runS = Number(h.elapsed);
  // base_model: "loaded <arch> in 1.2s"
  const loaded = h.type === 'status' && h.stage === 'loaded' ? /\bin ([\d.]+)\s*s\b/.exec(String(h.message ?? '')) : null;
  if (loaded) t.loadS = Number(loaded[1]);
}

/** `total_s` from this page's clock: the request's submit to now (a queue wait included). */
export function timingsAt(t: TimingNotes, startedAt: number, now = Date.now()): GenerationTimings {
  return { total_s: Math.max(0, (now - startedAt) / 1000), run_s: t.runS, load_s: t.loadS };
}
