// The model library (the engine's GET /library): entries grouped by source, a filter, sizes, and the
// link that opens /generate with an entry's `model` filled in (read back by parseModelParam).

export type LibrarySource = 'hub' | 'folder' | 'profile';

export interface LibraryEntry {
  name: string;
  source: LibrarySource;
  path: string | null;
  repo: string | null;
  kind: 'pipeline' | 'single_file' | 'component' | 'lora';
  arch: string | null;
  variant: string | null;
  role: string | null;
  dtype: string | null;
  format: string | null;
  bytes: number;
  complete: boolean;
  missing: string[];
  /** the `model` of a POST /generate for it; null when it cannot load on its own */
  model: Record<string, unknown> | null;
}

export interface ArchPresence {
  arch: string;
  variant: string | null;
  repo: string;
  default_present: boolean;
  download?: string;
}

export interface LibraryResponse {
  entries: LibraryEntry[];
  archs: ArchPresence[];
}

export const SOURCES: { source: LibrarySource; label: string }[] = [
  { source: 'hub', label: 'Hub cache' },
  { source: 'folder', label: 'Model folders' },
  { source: 'profile', label: 'Profiles' },
];

/** Entries matching every word of `query` (name, path, repo, arch, kind, format; case-insensitive). */
export function filterEntries(entries: LibraryEntry[], query: string): LibraryEntry[] {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return entries;
  return entries.filter((e) => {
    const text = [e.name, e.path, e.repo, e.arch, e.variant, e.kind, e.role, e.format].filter(Boolean).join(' ').toLowerCase();
    return words.every((w) => text.includes(w));
  });
}

/** Entries by source, in SOURCES order, sorted by name; empty groups left out. */
export function groupBySource(entries: LibraryEntry[]): { source: LibrarySource; label: string; entries: LibraryEntry[] }[] {
  return SOURCES.map((s) => ({
    ...s,
    entries: entries.filter((e) => e.source === s.source).sort((a, b) => a.name.localeCompare(b.name)),
  })).filter((g) => g.entries.length > 0);
}

export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '?';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${v} B` : `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** The archs whose default repo is not here, with the command that fetches it. */
export function missingDefaults(archs: ArchPresence[]): ArchPresence[] {
  return archs.filter((a) => !a.default_present && a.download);
}

/** The download command when the model form names an arch's default repo that is not here (by the
 * library's `archs` rows), else null: a profile, a typed path or an unknown presence gets no note. */
export function missingDownload(archs: ArchPresence[] | null, model: { profile: string; arch: string; name_or_path: string }): string | null {
  if (!archs || model.profile) return null;
  const repo = model.name_or_path.trim();
  const row = archs.find((a) => a.arch === model.arch && a.repo === repo);
  return row && !row.default_present ? (row.download ?? `hf download ${repo}`) : null;
}

/** /generate with the engine job and the entry's model (JSON, URI-encoded). */
export function generateHref(jobId: string | null, model: Record<string, unknown>): string {
  const q = new URLSearchParams();
  if (jobId) q.set('job', jobId);
  q.set('model', JSON.stringify(model));
  return `/generate?${q.toString()}`;
}

/** The `model` query parameter back into a model dict: an object naming an arch or a profile, else null. */
export function parseModelParam(raw: string | null | undefined): Record<string, unknown> | null {
  if (!raw) return null;
  try {
    const v = JSON.parse(raw) as unknown;
    if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
    const m = v as Record<string, unknown>;
    return typeof m.arch === 'string' || typeof m.profile === 'string' ? m : null;
  } catch {
    return null;
  }
}
