// Downloads on the /library page (the engine's POST/GET/DELETE /downloads): what the Download box
// sends, and how a download's row reads. The engine checks the body and names the field it refuses.
import { formatBytes } from './library';

export type DownloadStatus = 'running' | 'done' | 'failed' | 'cancelled';

export interface DownloadRow {
  id: string;
  kind: 'hub' | 'url';
  source: string;
  revision: string | null;
  dest: string;
  path: string | null;
  status: DownloadStatus;
  bytes_done: number;
  bytes_total: number | null;
  bytes_left: number | null;
  error: string | null;
}

/** GET /downloads: the downloads, and where a URL's file may go (the engine's model folders, the kinds). */
export interface DownloadsResponse {
  downloads: DownloadRow[];
  model_folders: string[];
  kinds: string[];
}

export interface DownloadForm {
  /** a hub repo id (owner/name) or an http(s) URL */
  source: string;
  /** a URL's model folder (one of model_folders) */
  folder: string;
  /** a URL's kind: the tree's sub-folder it goes in */
  kind: string;
  /** a repo's revision (branch, tag, commit); empty: main */
  revision: string;
}

const REPO_ID = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;

/** The POST /downloads body for the form, or `{error}` when the source is neither a repo id nor a URL. */
export function downloadBody(f: DownloadForm): { body: Record<string, string> } | { error: string } {
  const source = f.source.trim();
  if (!source) return { error: 'Give a hub repo id (owner/name) or a URL.' };
  if (/^https?:\/\//i.test(source)) {
    const body: Record<string, string> = { url: source };
    if (f.folder) body.dest = f.folder;
    if (f.kind) body.kind = f.kind;
    return { body };
  }
  if (!REPO_ID.test(source)) return { error: `"${source}" is neither a hub repo id (owner/name) nor an http(s) URL.` };
  return { body: f.revision.trim() ? { repo_id: source, revision: f.revision.trim() } : { repo_id: source } };
}

/** Whether the form names a URL (then it offers the folder and kind). */
export function isUrl(source: string): boolean {
  return /^https?:\/\//i.test(source.trim());
}

/** A row's progress, 0..1, or null while the total is not known. */
export function progressFraction(d: DownloadRow): number | null {
  if (d.status === 'done') return 1;
  if (!d.bytes_total) return null;
  return Math.min(d.bytes_done / d.bytes_total, 1);
}

/** "3.0 MiB of 10 MiB, 7.0 MiB left", or what the row's state is. */
export function progressText(d: DownloadRow): string {
  if (d.status === 'done') return d.bytes_total ? `done, ${formatBytes(d.bytes_total)}` : 'done (nothing left to fetch)';
  if (d.status === 'failed') return `failed: ${d.error ?? 'unknown error'}`;
  const of = d.bytes_total === null ? `${formatBytes(d.bytes_done)} so far` : `${formatBytes(d.bytes_done)} of ${formatBytes(d.bytes_total)}, ${formatBytes(d.bytes_left ?? 0)} left`;
  return d.status === 'cancelled' ? `cancelled at ${of}` : of;
}

/** Ids of downloads that were running in `before` and are done in `after` (the library is listed again then). */
export function newlyDone(before: DownloadRow[], after: DownloadRow[]): string[] {
  const was = new Map(before.map((d) => [d.id, d.status]));
  return after.filter((d) => d.status === 'done' && was.get(d.id) !== 'done').map((d) => d.id);
}
