// One better-sqlite3 connection per DB path and process, with the Job table created or
// migrated on first open. Used by the Next route handlers and by the worker.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { dbPath } from './paths';
import { JOB_COLUMNS } from './schema';

export type Db = BetterSQLite3Database<Record<string, never>> & { $client: Database.Database };

const opened = new Map<string, Db>();

/** Create the Job table, or add the columns an older table lacks. Idempotent. */
export function migrate(sqlite: Database.Database): void {
  const cols = JOB_COLUMNS.map(([name, def]) => `"${name}" ${def}`).join(', ');
  sqlite.exec(`CREATE TABLE IF NOT EXISTS "Job" (${cols})`);
  const have = new Set((sqlite.prepare('PRAGMA table_info("Job")').all() as { name: string }[]).map((c) => c.name));
  for (const [name, def] of JOB_COLUMNS) {
    if (have.has(name)) continue;
    // SQLite cannot add PRIMARY KEY / UNIQUE columns; those exist in any Job table we could meet.
    sqlite.exec(`ALTER TABLE "Job" ADD COLUMN "${name}" ${def.replace(/ UNIQUE| PRIMARY KEY/g, '')}`);
  }
  sqlite.exec('CREATE INDEX IF NOT EXISTS "Job_status_idx" ON "Job" ("status")');
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
