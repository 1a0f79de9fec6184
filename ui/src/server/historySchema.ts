// The Generation table: the generation history the /generate gallery shows, and HistoryFeed, how far
// it read each engine's results feed. UI-only (Python never reads them); created or migrated with the
// Job table by db.ts's migrate().

/** Column name -> definition used by CREATE TABLE and, for a missing column, ALTER TABLE ADD COLUMN. */
export const GENERATION_COLUMNS: ReadonlyArray<[string, string]> = [
  // rowid: the insertion order, which breaks created_at ties (a batch's files share a millisecond)
  ['seq', 'INTEGER PRIMARY KEY'],
  // the gallery key: "<request id>/<relpath>" (one row per result file)
  ['id', 'TEXT NOT NULL UNIQUE'],
  ['request_id', "TEXT NOT NULL DEFAULT ''"],
  ['batch_index', 'INTEGER NOT NULL DEFAULT 0'],
  ['job_id', "TEXT NOT NULL DEFAULT ''"],
  ['job_name', "TEXT NOT NULL DEFAULT ''"],
  ['created_at', "TEXT NOT NULL DEFAULT ''"],
  ['prompt', "TEXT NOT NULL DEFAULT ''"],
  ['negative_prompt', "TEXT NOT NULL DEFAULT ''"],
  // the model's identity (utils/modelIdentity.ts); model_key is what the filter matches
  ['arch', "TEXT NOT NULL DEFAULT ''"],
  ['name_or_path', "TEXT NOT NULL DEFAULT ''"],
  ['profile', 'TEXT'],
  ['variant', 'TEXT'],
  ['quantization', 'TEXT'],
  ['loras', "TEXT NOT NULL DEFAULT '[]'"],
  ['model_key', "TEXT NOT NULL DEFAULT ''"],
  // {model, sample} as the engine's start frame resolved them
  ['settings', "TEXT NOT NULL DEFAULT '{}'"],
  ['seed', 'INTEGER'],
  ['width', 'INTEGER'],
  ['height', 'INTEGER'],
  ['kind', "TEXT NOT NULL DEFAULT 'image'"],
  // [{relpath, kind, mime, bytes}], relative to <job folder>/outputs
  ['files', "TEXT NOT NULL DEFAULT '[]'"],
  // the result frame as it came
  ['result', "TEXT NOT NULL DEFAULT '{}'"],
  ['total_seconds', 'REAL'],
  ['run_seconds', 'REAL'],
  ['load_seconds', 'REAL'],
  ['status', "TEXT NOT NULL DEFAULT 'ok'"],
  // who asked (historySource.ts): ui, cli, grid, native, a1111, openai, comfyui, sdcpp; '' before it was kept
  ['source', "TEXT NOT NULL DEFAULT ''"],
  // the asking client's own name for itself where it gave one (a ComfyUI client_id, X-Client)
  ['client', 'TEXT'],
];

export const GENERATION_INDEXES: readonly string[] = [
  'CREATE INDEX IF NOT EXISTS "Generation_created_idx" ON "Generation" ("created_at", "seq")',
  'CREATE INDEX IF NOT EXISTS "Generation_model_idx" ON "Generation" ("model_key", "created_at")',
];

/** HistoryFeed: how far the history has read each engine job's results feed (historyCursor.ts). */
export const HISTORY_FEED_COLUMNS: ReadonlyArray<[string, string]> = [
  // the feed lives in the job's folder (outputs/.results.jsonl): its seqs go on across engine restarts
  ['job_name', 'TEXT PRIMARY KEY'],
  ['seq', 'INTEGER NOT NULL DEFAULT 0'],
  ['updated_at', "TEXT NOT NULL DEFAULT ''"],
];

export interface GenerationRow {
  seq: number;
  id: string;
  request_id: string;
  batch_index: number;
  job_id: string;
  job_name: string;
  created_at: string;
  prompt: string;
  negative_prompt: string;
  arch: string;
  name_or_path: string;
  profile: string | null;
  variant: string | null;
  quantization: string | null;
  loras: string;
  model_key: string;
  settings: string;
  seed: number | null;
  width: number | null;
  height: number | null;
  kind: string;
  files: string;
  result: string;
  total_seconds: number | null;
  run_seconds: number | null;
  load_seconds: number | null;
  status: string;
  source: string;
  client: string | null;
}

/** One file of a row (`files`). */
export interface GenerationFile {
  relpath: string;
  kind: string;
  mime: string;
  bytes: number | null;
}
