// A history entry in and out: the POST body (a gallery item) checked field by field into a
// Generation row, and a row back into the item the gallery shows. Pure: no DB, no files.
import path from 'node:path';
import type { GalleryItem } from '../components/generate/types';
import { modelIdentity, modelKey } from '../utils/modelIdentity';
import { contentTypeFor } from './contentTypes';
import { ApiError } from './http';
import type { GenerationFile, GenerationRow } from './historySchema';
import { isSafeJobName } from './paths';

/** What one row may hold of settings and result JSON together: far past any real request. */
const MAX_JSON_CHARS = 256 * 1024;
const STATUSES = ['ok', 'error', 'cancelled'];

const bad = (field: string, why: string) => new ApiError(400, 'bad_field', `${field} ${why}.`);

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v);

function obj(v: unknown, field: string): Obj {
  if (!isObj(v)) throw bad(field, 'must be an object');
  return v;
}

function text(v: unknown, field: string, { optional = false, max = 4096 } = {}): string {
  if (v === undefined || v === null) {
    if (optional) return '';
    throw bad(field, 'is required');
  }
  if (typeof v !== 'string') throw bad(field, 'must be a string');
  if (!optional && v.trim() === '') throw bad(field, 'must not be empty');
  if (v.length > max) throw bad(field, `must be at most ${max} characters`);
  return v;
}

function int(v: unknown, field: string): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw bad(field, 'must be an integer or null');
  return v;
}

function seconds(v: unknown, field: string): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw bad(field, 'must be a number of seconds (0 or more) or null');
  return v;
}

/** A path relative to the job's outputs folder that stays inside it. */
function relpath(v: unknown, field: string): string {
  const rel = text(v, field, { max: 1024 });
  const norm = path.posix.normalize(rel.replace(/\\/g, '/'));
  if (path.posix.isAbsolute(norm) || norm === '.' || norm === '..' || norm.startsWith('../') || rel.includes('\0')) {
    throw bad(field, "must be a path inside the job's outputs folder");
  }
  return rel;
}

function createdAt(v: unknown): string {
  if (v === undefined || v === null) return new Date().toISOString();
  const d = typeof v === 'string' ? new Date(v) : new Date(NaN);
  if (Number.isNaN(d.getTime())) throw bad('createdAt', 'must be an ISO date');
  return d.toISOString();
}

/** The POST /api/history body (a GalleryItem) as a row; 400 naming the first bad field. */
export function rowFromItem(body: Obj): Omit<GenerationRow, 'seq'> {
  const key = text(body.key, 'key', { max: 1024 });
  const jobName = text(body.jobName, 'jobName', { max: 128 });
  if (!isSafeJobName(jobName)) throw bad('jobName', 'must be a job name (letters, digits, "_", "-", ".")');
  const result = obj(body.result, 'result');
  const model = obj(body.model, 'model');
  const sample = obj(body.sample, 'sample');
  const rel = relpath(result.relpath, 'result.relpath');
  const kind = text(result.kind, 'result.kind', { max: 32 });
  const arch = text(model.arch, 'model.arch', { max: 128 });
  const loras = model.loras ?? [];
  if (!Array.isArray(loras)) throw bad('model.loras', 'must be a list');
  const timings = body.timings === undefined || body.timings === null ? {} : obj(body.timings, 'timings');
  const status = body.status === undefined ? 'ok' : text(body.status, 'status', { max: 16 });
  if (!STATUSES.includes(status)) throw bad('status', `must be one of ${STATUSES.join(', ')}`);
  const bytes = int(result.bytes, 'result.bytes');
  const settings = JSON.stringify({ model, sample });
  const resultJson = JSON.stringify(result);
  if (settings.length + resultJson.length > MAX_JSON_CHARS) throw bad('sample', `and model together must be under ${MAX_JSON_CHARS / 1024} KiB of JSON`);
  const id = modelIdentity(model);
  const file: GenerationFile = { relpath: rel, kind, mime: contentTypeFor(rel), bytes };
  return {
    id: key,
    request_id: text(body.requestId, 'requestId', { optional: true, max: 256 }),
    batch_index: int(result.index, 'result.index') ?? 0,
    job_id: text(body.jobId, 'jobId', { optional: true, max: 128 }),
    job_name: jobName,
    created_at: createdAt(body.createdAt),
    prompt: text(sample.prompt, 'sample.prompt', { optional: true, max: 100_000 }),
    negative_prompt: text(sample.negative_prompt, 'sample.negative_prompt', { optional: true, max: 100_000 }),
    arch,
    name_or_path: text(model.name_or_path, 'model.name_or_path', { optional: true }),
    profile: text(model.profile, 'model.profile', { optional: true, max: 256 }) || null,
    variant: id.variant,
    quantization: id.quantization,
    loras: JSON.stringify(loras),
    model_key: modelKey(model),
    settings,
    seed: int(result.seed, 'result.seed'),
    width: int(result.width, 'result.width'),
    height: int(result.height, 'result.height'),
    kind,
    files: JSON.stringify([file]),
    result: resultJson,
    total_seconds: seconds(timings.total_s, 'timings.total_s'),
    run_seconds: seconds(timings.run_s, 'timings.run_s'),
    load_seconds: seconds(timings.load_s, 'timings.load_s'),
    status,
    source: sourceField(body.source),
    client: text(body.client, 'client', { optional: true, max: 256 }) || null,
  };
}

/** `source` (historySource.ts): a word; a page that sends none is the Generate page. */
function sourceField(v: unknown): string {
  if (v === undefined || v === null) return 'ui';
  const s = text(v, 'source', { max: 32 });
  if (!/^[A-Za-z0-9_.-]+$/.test(s)) throw bad('source', "must be a word (letters, digits, '_', '.', '-')");
  return s;
}

/** A row as the gallery's item. */
export function itemFromRow(row: GenerationRow): GalleryItem {
  const settings = JSON.parse(row.settings) as { model?: Obj; sample?: Obj };
  return {
    key: row.id,
    requestId: row.request_id,
    jobId: row.job_id,
    jobName: row.job_name,
    result: JSON.parse(row.result) as GalleryItem['result'],
    model: settings.model ?? {},
    sample: settings.sample ?? {},
    createdAt: row.created_at,
    timings: { total_s: row.total_seconds, run_s: row.run_seconds, load_s: row.load_seconds },
    status: row.status,
    source: row.source || undefined,
    client: row.client,
  };
}
