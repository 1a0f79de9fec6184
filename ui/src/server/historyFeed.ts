// An engine's results feed (GET /results, docs/engine_api.md) as history: each entry's files as the
// gallery items the page itself would POST, keyed the same ("<request id>/<relpath>"), so a result
// the page saved already is the same row. Pure: no DB, no network.
import type { GalleryItem } from '../components/generate/types';
import { clientOf, sourceOf } from '../utils/historySource';

/** One entry of GET /results, as far as the history reads it. */
export interface FeedEntry {
  seq: number;
  request_id: string;
  status: string;
  api?: string;
  client?: string | null;
  model: Record<string, unknown>;
  sample: Record<string, unknown>;
  files: FeedFile[];
  finished_at: number | null;
  timings?: { queue_s?: number | null; run_s?: number | null; load_s?: number | null; total_s?: number | null };
}

export interface FeedFile {
  relpath: string;
  kind: string;
  ext: string;
  bytes: number;
  seed: number;
  index: number;
  width: number | null;
  height: number | null;
  num_frames: number | null;
  fps: number | null;
  duration: number | null;
}

export interface FeedPage {
  entries: FeedEntry[];
  last_seq: number;
  first_seq: number;
  more: boolean;
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);

/** The gallery items of an entry (one per file; none for a request that ended without files). */
export function itemsFromEntry(entry: FeedEntry, job: { id: string; name: string }): GalleryItem[] {
  if (entry.status !== 'ok' || !Array.isArray(entry.files)) return [];
  const at = num(entry.finished_at);
  const t = entry.timings ?? {};
  return entry.files.map((f) => ({
    key: `${entry.request_id}/${f.relpath}`,
    requestId: entry.request_id,
    jobId: job.id,
    jobName: job.name,
    result: {
      relpath: f.relpath,
      url: `/outputs/${f.relpath}`,
      kind: f.kind,
      ext: f.ext,
      bytes: f.bytes,
      seed: f.seed,
      index: f.index ?? 0,
      width: f.width ?? null,
      height: f.height ?? null,
      num_frames: f.num_frames ?? null,
      fps: f.fps ?? null,
      duration: f.duration ?? null,
    },
    model: entry.model,
    sample: entry.sample,
    createdAt: new Date(at === null ? Date.now() : at * 1000).toISOString(),
    timings: { total_s: num(t.total_s), run_s: num(t.run_s), load_s: num(t.load_s) },
    status: 'ok',
    source: sourceOf(entry.api, entry.client),
    client: clientOf(entry.api, entry.client),
  }));
}

/** Where to read from next: `cursor`, or 0 when the feed started over (its file was removed: seqs restart). */
export function readFrom(cursor: number, page: Pick<FeedPage, 'last_seq'>): number {
  return page.last_seq < cursor ? 0 : cursor;
}
