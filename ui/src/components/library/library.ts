// The model library (the engine's GET /library): entries grouped by source, a filter, sizes, and the
// link that opens /generate with an entry's `model` filled in (read back by parseModelParam).

/** loaded: the model the engine holds now; tiny: `tiny:<arch>`, random weights built offline on first use */
export type LibrarySource = 'loaded' | 'tiny' | 'hub' | 'folder' | 'profile';

/** A component found in a checkpoint or denoiser file: its layout and the known config it is. */
export interface LibraryPart {
  kind: string | null;
  label: string | null;
  known: string | null;
  error: string | null;
}

/** A file (or tokenizer) of the model folders a model will use for one role. */
export interface LibraryCompanion {
  path: string | null;
  name: string;
  kind: string;
  label: string;
  alternatives?: string[];
}

export interface LibraryEntry {
  name: string;
  source: LibrarySource;
  path: string | null;
  repo: string | null;
  /** checkpoint: an all-in-one file; single_file: a denoiser alone (its companions from the folders) */
  kind: 'pipeline' | 'checkpoint' | 'single_file' | 'component' | 'lora';
  /** a model folder's tree: comfyui | a1111 | plain */
  tree?: string;
  arch: string | null;
  variant: string | null;
  role: string | null;
  dtype: string | null;
  format: string | null;
  bytes: number;
  complete: boolean;
  missing: string[];
  /** a tiny model: whether its folder is built already (else it is built on first use) */
  built?: boolean;
  /** the `model` of a POST /generate for it; null when it cannot load on its own */
  model: Record<string, unknown> | null;
  /** a checkpoint or denoiser file: the components in it, the files it takes from the folders, the roles it lacks */
  parts?: Record<string, LibraryPart>;
  companions?: Record<string, LibraryCompanion>;
  missing_roles?: string[];
  /** a component file: its layout, and the (arch, role) pairs it can fill */
  component_kind?: string;
  label?: string;
  fits?: { arch: string; role: string }[];
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
  { source: 'loaded', label: 'Loaded now' },
  { source: 'tiny', label: 'Tiny test models (random weights: they draw noise)' },
  { source: 'hub', label: 'Hub cache' },
  { source: 'folder', label: 'Model folders' },
  { source: 'profile', label: 'Profiles' },
];

/** Entries matching every word of `query` (name, path, repo, arch, kind, format; case-insensitive). */
export function filterEntries(entries: LibraryEntry[], query: string): LibraryEntry[] {
  const w = words(query);
  if (!w.length) return entries;
  return entries.filter((e) => {
    const text = [e.name, e.path, e.repo, e.arch, e.variant, e.kind, e.role, e.format, e.source].filter(Boolean).join(' ').toLowerCase();
    return w.every((x) => text.includes(x));
  });
}

/** The query's words (lower case). */
function words(query: string): string[] {
  return query.toLowerCase().split(/\s+/).filter(Boolean);
}

/** Missing default repos matching every word of `query` (arch, variant, repo). */
export function filterArchs(archs: ArchPresence[], query: string): ArchPresence[] {
  const w = words(query);
  return archs.filter((a) => {
    const text = [a.arch, a.variant, a.repo].filter(Boolean).join(' ').toLowerCase();
    return w.every((x) => text.includes(x));
  });
}

/** What the page says when no list has a row: nothing listed at all, or nothing matching the filter. */
export function emptyMessage(query: string): string {
  return words(query).length ? `No model matches "${query.trim()}".` : 'No models are listed on this machine.';
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

// -- the Generate page's model picker ---------------------------------------------------------------
export interface PickerOption {
  key: string;
  label: string;
  entry: LibraryEntry;
  /** why it cannot load as it is (what is missing), else null */
  why: string | null;
}

export const PICKER_GROUPS: { label: string; test: (e: LibraryEntry) => boolean }[] = [
  { label: 'Checkpoints', test: (e) => e.kind === 'checkpoint' },
  { label: 'Model files (with their text encoders and VAE)', test: (e) => e.kind === 'single_file' },
  // the files found here: the tiny and loaded models are named in the form as they are
  { label: 'Diffusers folders and repos', test: (e) => e.kind === 'pipeline' && (e.source === 'hub' || e.source === 'folder') },
];

/** A stable key of an entry (its source and path). */
export function entryKey(e: LibraryEntry): string {
  return `${e.source}:${e.path ?? e.repo ?? e.name}`;
}

/** The last segment of a folder entry's name under its tree's sub-folder (what A1111 lists). */
export function entryTitle(e: LibraryEntry): string {
  return e.tree && e.tree !== 'plain' && e.name.includes('/') ? e.name.slice(e.name.indexOf('/') + 1) : e.name;
}

/** The models the picker offers, grouped: loadable ones first in each group (names sorted), then those that
 * lack something, with what. Only archs the engine serves (`archs`) appear. */
export function pickerGroups(entries: LibraryEntry[], archs: string[]): { label: string; options: PickerOption[] }[] {
  const served = new Set(archs);
  return PICKER_GROUPS.map((g) => {
    const options = entries
      .filter((e) => g.test(e) && e.arch && served.has(e.arch) && (e.model !== null || e.missing.length > 0))
      .map((e) => {
        const loadable = e.model !== null && e.complete;
        const detail = [e.arch, e.variant, e.format].filter(Boolean).join(', ');
        return {
          key: entryKey(e),
          label: `${entryTitle(e)} (${detail})${loadable ? '' : ` — missing ${(e.missing_roles?.length ? e.missing_roles : e.missing).join(', ')}`}`,
          entry: e,
          why: loadable ? null : e.missing.join('; ') || 'incomplete',
        };
      })
      .sort((a, b) => Number(a.why !== null) - Number(b.why !== null) || a.label.localeCompare(b.label));
    return { label: g.label, options };
  }).filter((g) => g.options.length > 0);
}

/** The picker entry the model form names (same arch and weights), else null. */
export function pickedEntry(entries: LibraryEntry[], model: { profile: string; arch: string; name_or_path: string }): LibraryEntry | null {
  if (model.profile) return null;
  const path = model.name_or_path.trim();
  if (!path) return null;
  return entries.find((e) => e.model && e.model.arch === model.arch && e.model.name_or_path === path) ?? null;
}

/** The model folders' VAE files that fit `arch` (for the VAE override), by name. */
export function vaeChoices(entries: LibraryEntry[], arch: string): { name: string; path: string }[] {
  return entries
    .filter((e) => e.kind === 'component' && e.complete && e.path && (e.fits ?? []).some((f) => f.arch === arch && f.role === 'vae'))
    .map((e) => ({ name: entryTitle(e), path: e.path as string }))
    .sort((a, b) => a.name.localeCompare(b.name));
}
