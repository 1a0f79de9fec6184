// The history kept by the server: every running engine job's results feed (GET /results) is read
// from where the history left it (HistoryFeed) and its results become Generation rows, whoever asked
// for them (this UI's pages, a closed tab, the grid, the A1111/OpenAI routes, the CLI).
import { forgetEngineFile, resolveEngine, type EngineFile } from '../server/engineEndpoint';
import { itemsFromEntry, readFrom, type FeedPage } from '../server/historyFeed';
import { feedCursor, storeFeedPage } from '../server/historyCursor';
import { listJobs } from '../server/jobs';

export const FEED_PAGE = 200;
const FETCH_TIMEOUT_MS = 5000;

export interface FollowerOptions {
  /** how often every running engine is read (ms) */
  tickMs: number;
  log: (msg: string) => void;
}

async function readPage(engine: EngineFile, after: number): Promise<FeedPage> {
  const url = `http://${engine.host}:${engine.port}/results?after=${after}&limit=${FEED_PAGE}`;
  const res = await fetch(url, { headers: { 'x-engine-token': engine.token }, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  if (!res.ok) throw new Error(`GET /results answered HTTP ${res.status}`);
  const page = (await res.json()) as FeedPage;
  if (!Array.isArray(page.entries) || !Number.isInteger(page.last_seq)) throw new Error('GET /results answered no feed');
  return page;
}

export class ResultsFollower {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<number> | null = null;
  /** per job: the last error said (said once, not every tick) */
  private said = new Map<string, string>();

  constructor(private opts: FollowerOptions) {}

  start(): void {
    void this.tick();
    this.timer = setInterval(() => void this.tick(), this.opts.tickMs);
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Read every running engine's feed up to its end; the rows added. One pass at a time (a caller during a pass gets that pass). */
  tick(): Promise<number> {
    this.running ??= this.pass().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async pass(): Promise<number> {
    let added = 0;
    for (const job of listJobs({ job_type: 'inference' }).filter((j) => j.status === 'running')) {
      try {
        added += await this.follow(job);
        this.said.delete(job.name);
      } catch (err) {
        forgetEngineFile(job.name); // a restarted engine writes a new engine.json
        const why = (err as Error).message;
        if (this.said.get(job.name) !== why) this.opts.log(`results feed of ${job.name}: ${why}`);
        this.said.set(job.name, why);
      }
    }
    return added;
  }

  private async follow(job: { id: string; name: string }): Promise<number> {
    const target = resolveEngine(job.id);
    if (!target.ok) return 0; // starting, or gone: the next pass reads it
    let cursor = feedCursor(job.name);
    let added = 0;
    for (;;) {
      let page = await readPage(target.engine, cursor);
      if (readFrom(cursor, page) !== cursor) {
        cursor = 0; // the feed started over: read it from its start (keys already there stay one row)
        page = await readPage(target.engine, cursor);
      }
      if (cursor > 0 && page.first_seq > cursor + 1) {
        this.opts.log(`results feed of ${job.name}: ${page.first_seq - cursor - 1} result(s) ended while the history was not reading and are past the engine's ring`);
      }
      const last = page.entries.length ? page.entries[page.entries.length - 1].seq : cursor;
      const items = page.entries.flatMap((e) => itemsFromEntry(e, job));
      if (last !== cursor || items.length) {
        added += storeFeedPage(job.name, last, items, (item, why) => this.opts.log(`results feed of ${job.name}: ${item.key} left out: ${why}`));
      }
      cursor = last;
      if (!page.more || !page.entries.length) return added;
    }
  }
}
