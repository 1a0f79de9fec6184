// How far the history has read each engine job's results feed (the HistoryFeed table), and one page
// of entries stored with the cursor in one transaction: a restart neither loses nor repeats a page.
import type { GalleryItem } from '../components/generate/types';
import { getDb } from './db';
import { addGeneration } from './history';

export function feedCursor(jobName: string): number {
  const row = getDb().$client.prepare('SELECT "seq" FROM "HistoryFeed" WHERE "job_name" = ?').get(jobName) as { seq: number } | undefined;
  return row?.seq ?? 0;
}

/**
 * Insert `items` (a key already there is left as it is: the page's own POST of the same result) and
 * move the job's cursor to `seq`. An item the history refuses (`onRefused` says why) does not stop the
 * others or the cursor. Returns how many rows are new.
 */
export function storeFeedPage(jobName: string, seq: number, items: GalleryItem[], onRefused: (item: GalleryItem, why: string) => void): number {
  const sqlite = getDb().$client;
  let created = 0;
  sqlite.transaction(() => {
    for (const item of items) {
      try {
        if (addGeneration(item as unknown as Record<string, unknown>).created) created++;
      } catch (err) {
        onRefused(item, (err as Error).message);
      }
    }
    sqlite
      .prepare('INSERT INTO "HistoryFeed" ("job_name", "seq", "updated_at") VALUES (?, ?, ?) ON CONFLICT("job_name") DO UPDATE SET "seq" = excluded."seq", "updated_at" = excluded."updated_at"')
      .run(jobName, seq, new Date().toISOString());
  })();
  return created;
}
