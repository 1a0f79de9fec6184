// One better-sqlite3 connection per DB path and process, with the Job and Generation tables
// created or migrated on first open. Used by the Next route handlers and by the worker.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { dbPath } from './paths';
import { GENERATION_COLUMNS, GENERATION_INDEXES, HISTORY_FEED_COLUMNS } from './historySchema';
import { JOB_COLUMNS } from './schema';

export type Db = BetterSQLite3Database<Record<string, never>> & { $client: Database.Database };

const opened = new Map<string, Db>();

/** Create a table, or add the columns an older one lacks; then its indexes. Idempotent. */
function ensureTable(sqlite: Database.Database, table: string, columns: ReadonlyArray<[string, string]>, indexes: readonly string[]): void {
  const cols = columns.map(([name, def]) => `"${name}" ${def}`).join(', ');
  sqlite.exec(`CREATE TABLE IF NOT EXISTS "${table}" (${cols})`);
  const have = new Set((sqlite.prepare(`PRAGMA table_info("${table}")`).all() as { name: string }[]).map((c) => c.name));
  for (const [name, def] of columns) {
    if (have.has(name)) continue;
    // SQLite cannot add PRIMARY KEY / UNIQUE columns; those exist in any table we could meet.
    sqlite.exec(`ALTER TABLE "${table}" ADD COLUMN "${name}" ${def.replace(/ UNIQUE| PRIMARY KEY/g, '')}`);
  }
  for (const ddl of indexes) sqlite.exec(ddl);
}

/** The Job table (shared with Python) and the UI's own history tables (Generation, HistoryFeed). Idempotent. */
export function migrate(sqlite: Database.Database): void {
  ensureTable(sqlite, 'Job', JOB_COLUMNS, ['CREATE INDEX IF NOT EXISTS "Job_status_idx" ON "Job" ("status")']);
  ensureTable(sqlite, 'Generation', GENERATION_COLUMNS, GENERATION_INDEXES);
  ensureTable(sqlite, 'HistoryFeed', HISTORY_FEED_COLUMNS, []);
}

export function getDb(file: string = dbPath()): Db {
  let db = opened.get(file);
  if (!db) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const sqlite = new Database(file, { timeout: 10_000 });
    migrate(sqlite);
    db = drizzle({ client: sqlite }) as Db;
    opened.set(file, db);
  }
  return db;
}

/** Close every connection this process opened (tests, shutdown). */
export function closeAllDbs(): void {
  for (const db of opened.values()) db.$client.close();
  opened.clear();
}
