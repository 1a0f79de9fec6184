// What the engine strip and the engines card say about an engine, in words that fit the page they
// are on (pure): its model (or the one its first request is loading), its memory (only numbers
// the engine reported), and what to do with an engine that is not running.
import { formatBytes } from '@/utils/format';
import type { EngineSummary } from '@/server/engines';
import type { Health } from './types';

/** "Z-Image turbo (tiny:zimage)"; "loading tiny:zimage…" while a request loads it; "none loaded". */
export function healthModelText(health: Pick<Health, 'active'>, loading: string | null | undefined): string {
  const a = health.active;
  if (a) return `${a.profile ? `${a.profile}: ` : ''}${a.arch}${a.variant ? ` ${a.variant}` : ''} (${a.name_or_path})`;
  return loading ? `loading ${loading}…` : 'none loaded';
}

/** The memory line: the engine's numbers once it has measured them (a starting worker reports 0 / 0). */
export function memoryText(memory: Health['memory']): string {
  const known = Number.isFinite(memory.total) && memory.total > 0;
  if (memory.device === 'cpu') {
    // the CPU has no device memory: the worker's resident set of the machine's RAM
    return known ? `Memory: CPU, no device memory · RAM ${formatBytes(memory.used)} of ${formatBytes(memory.total)}` : 'Memory: CPU, no device memory';
  }
  return known ? `Memory (${memory.device}): ${formatBytes(memory.used)} / ${formatBytes(memory.total)}` : `Memory (${memory.device}): —`;
}

/** The engines card's note for an engine that cannot take a request, said for this page: the card is on
 * the Generate page, above the Engine strip that starts it. */
export function engineRowNote(e: Pick<EngineSummary, 'state' | 'message' | 'job'>): string | null {
  const device = e.job.gpu_ids === 'cpu' ? 'cpu' : `GPU ${e.job.gpu_ids}`;
  if (e.state === 'stopped') return `stopped: choose ${device} as the Device above and press Start engine`;
  return e.message ? e.message.replace(/\s*Start it on the Generate page\.?$/, '') : null;
}
