// The Job table, shared with the Python side (docs/engine_api.md). The DDL below is the
// source of truth for creating and migrating it; the drizzle table mirrors it for typed queries.
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';

export const jobTable = sqliteTable('Job', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  gpu_ids: text('gpu_ids').notNull(),
  job_config: text('job_config').notNull(),
  status: text('status').notNull(),
  stop: integer('stop').notNull(),
  step: integer('step').notNull(),
  info: text('info').notNull(),
  job_type: text('job_type').notNull(),
  pid: integer('pid'),
  created_at: text('created_at').notNull(),
  updated_at: text('updated_at').notNull(),
});

export type JobRow = typeof jobTable.$inferSelect;

export const JOB_STATUSES = ['queued', 'running', 'stopping', 'stopped', 'completed', 'error'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Statuses in which a job owns (or is about to own) a process and its GPU set. */
export const ACTIVE_STATUSES: readonly string[] = ['running', 'stopping'];

/** Column name -> definition used by CREATE TABLE and, for a missing column, ALTER TABLE ADD COLUMN. */
export const JOB_COLUMNS: ReadonlyArray<[string, string]> = [
  ['id', 'TEXT PRIMARY KEY NOT NULL'],
  ['name', 'TEXT NOT NULL UNIQUE'],
  ['gpu_ids', "TEXT NOT NULL DEFAULT ''"],
  ['job_config', "TEXT NOT NULL DEFAULT '{}'"],
  ['status', "TEXT NOT NULL DEFAULT 'stopped'"],
  ['stop', 'INTEGER NOT NULL DEFAULT 0'],
  ['step', 'INTEGER NOT NULL DEFAULT 0'],
  ['info', "TEXT NOT NULL DEFAULT ''"],
  ['job_type', "TEXT NOT NULL DEFAULT 'train'"],
  ['pid', 'INTEGER'],
  ['created_at', "TEXT NOT NULL DEFAULT ''"],
  ['updated_at', "TEXT NOT NULL DEFAULT ''"],
];
