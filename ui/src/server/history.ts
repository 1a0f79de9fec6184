// The generation history (the Generation table): add, list (search, model filter, pages),
// the models seen, and delete (the row and its files, only inside the job's outputs folder).
import fs from 'node:fs';
import path from 'node:path';
import type { GalleryItem } from '../components/generate/types';
import { getDb } from './db';
import { ApiError } from './http';
import type { GenerationFile, GenerationRow } from './historySchema';
import { itemFromRow, rowFromItem } from './historyRecord';
import { isSafeJobName, jobFolder, resolveInside } from './paths';

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 200;

export interface HistoryQuery {
  q?: string;
  model?: string;
  /** a source word (historySource.ts) */
  source?: string;
  limit?: number;
  /** a `next` cursor from an earlier page */
  before?: string;
}

export interface HistoryModel {
  model: string;
  arch: string;
  name_or_path: string;
  profile: string | null;
  variant: string | null;
  quantization: string | null;
  count: number;
  last_at: string;
  /** the sources its results came from, most results first */
  sources: string[];
}

export interface HistorySource {
  source: string;
  count: number;
}

/** Insert unless the key is there already; the stored item either way. */
export function addGeneration(body: Record<string, unknown>): { item: GalleryItem; created: boolean } {
  const row = rowFromItem(body);
  const sqlite = getDb().$client;
  const cols = Object.keys(row);
  const info = sqlite
    .prepare(`INSERT INTO "Generation" (${cols.map((c) => `"${c}"`).join(', ')}) VALUES (${cols.map((c) => `@${c}`).join(', ')}) ON CONFLICT("id") DO NOTHING`)
    .run(row);
  const stored = sqlite.prepare('SELECT * FROM "Generation" WHERE "id" = ?').get(row.id) as GenerationRow;
  return { item: itemFromRow(stored), created: info.changes === 1 };
}

/** `%`, `_` and the escape character itself match only themselves. */
export function likePattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

const cursorOf = (row: Pick<GenerationRow, 'created_at' | 'seq'>) => `${row.created_at}|${row.seq}`;

function parseCursor(before: string): { at: string; seq: number } {
  const m = /^(.+)\|(\d+)$/.exec(before);
  if (!m) throw new ApiError(400, 'bad_field', 'before must be the `next` value of an earlier page.');
  return { at: m[1], seq: Number(m[2]) };
}

/** Newest first; `next` is the cursor for the page after this one (null on the last). */
export function listGenerations(query: HistoryQuery): { items: GalleryItem[]; next: string | null } {
  const limit = query.limit ?? DEFAULT_LIMIT;
  const where: string[] = [];
  const params: Record<string, unknown> = { limit: limit + 1 };
  if (query.q) {
    // LIKE is case-insensitive for ASCII letters in SQLite
    where.push(`"prompt" LIKE @q ESCAPE '\\'`);
    params.q = likePattern(query.q);
  }
  if (query.model) {
    where.push('"model_key" = @model');
    params.model = query.model;
  }
  if (query.source) {
    where.push('"source" = @source');
    params.source = query.source;
  }
  if (query.before) {
    const c = parseCursor(query.before);
    where.push('("created_at" < @at OR ("created_at" = @at AND "seq" < @seq))');
    Object.assign(params, c);
  }
  const sql = `SELECT * FROM "Generation" ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY "created_at" DESC, "seq" DESC LIMIT @limit`;
  const rows = getDb().$client.prepare(sql).all(params) as GenerationRow[];
  const page = rows.slice(0, limit);
  return { items: page.map(itemFromRow), next: rows.length > limit ? cursorOf(page[page.length - 1]) : null };
}

/** Every model the history holds, the most recently used first. */
export function listHistoryModels(): HistoryModel[] {
  const sqlite = getDb().$client;
  const models = sqlite
    .prepare(
      `SELECT "model_key" AS model, MAX("arch") AS arch, MAX("name_or_path") AS name_or_path, MAX("profile") AS profile,
              MAX("variant") AS variant, MAX("quantization") AS quantization, COUNT(*) AS count, MAX("created_at") AS last_at
       FROM "Generation" GROUP BY "model_key" ORDER BY last_at DESC`,
    )
    .all() as Omit<HistoryModel, 'sources'>[];
  const bySource = sqlite
    .prepare(`SELECT "model_key" AS model, "source" AS source, COUNT(*) AS n FROM "Generation" WHERE "source" != '' GROUP BY "model_key", "source" ORDER BY n DESC, source`)
    .all() as { model: string; source: string; n: number }[];
  const sources = new Map<string, string[]>();
  for (const r of bySource) sources.set(r.model, [...(sources.get(r.model) ?? []), r.source]);
  return models.map((m) => ({ ...m, sources: sources.get(m.model) ?? [] }));
}

/** Every source the history holds, the most results first. */
export function listHistorySources(): HistorySource[] {
  return getDb()
    .$client.prepare(`SELECT "source" AS source, COUNT(*) AS count FROM "Generation" WHERE "source" != '' GROUP BY "source" ORDER BY count DESC, source`)
    .all() as HistorySource[];
}

function isInside(base: string, p: string): boolean {
  const rel = path.relative(base, p);
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
}

/**
 * A row's files, each inside its job's outputs folder (links resolved: a linked folder inside
 * outputs must not lead the delete elsewhere); `full` null when its folder is gone already.
 */
function outputFiles(row: GenerationRow): { file: GenerationFile; full: string | null }[] {
  const refuse = (what: string) => new ApiError(403, 'outside_outputs', `${what} is not inside ${row.job_name}/outputs; nothing was deleted.`);
  if (!isSafeJobName(row.job_name)) throw refuse(`The job name '${row.job_name}'`);
  const base = path.join(jobFolder(row.job_name), 'outputs');
  return (JSON.parse(row.files) as GenerationFile[]).map((file) => {
    const full = resolveInside(base, file.relpath);
    if (!full) throw refuse(file.relpath);
    let dir: string;
    try {
      dir = fs.realpathSync(path.dirname(full));
    } catch {
      return { file, full: null };
    }
    if (!isInside(fs.realpathSync(base), path.join(dir, path.basename(full)))) throw refuse(file.relpath);
    return { file, full };
  });
}

/** Delete the row and its files; a file already gone is fine. */
export function deleteGeneration(id: string): { deleted: string; files: { relpath: string; removed: boolean }[] } {
  const sqlite = getDb().$client;
  const row = sqlite.prepare('SELECT * FROM "Generation" WHERE "id" = ?').get(id) as GenerationRow | undefined;
  if (!row) throw new ApiError(404, 'not_found', `No history item '${id}'.`);
  const files = outputFiles(row).map(({ file, full }) => {
    if (!full) return { relpath: file.relpath, removed: false };
    try {
      fs.unlinkSync(full);
      return { relpath: file.relpath, removed: true };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { relpath: file.relpath, removed: false };
      throw err;
    }
  });
  sqlite.prepare('DELETE FROM "Generation" WHERE "id" = ?').run(id);
  return { deleted: id, files };
}
