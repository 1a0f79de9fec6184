// The history kept by the server: an engine's results feed entry as Generation rows (the same key as
// the page's own POST, so one result is one row whichever lands first), and the worker's follower
// reading a feed over real HTTP into a real SQLite file: paged, from its cursor, nothing twice across
// a restart of the follower, and from the start again when the engine's feed started over.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { galleryItem } from '@/components/generate/requestBook';
import { noTimings } from '@/components/generate/resultTimings';
import { getDb } from '@/server/db';
import { forgetEngineFile } from '@/server/engineEndpoint';
import { addGeneration, listGenerations } from '@/server/history';
import { feedCursor } from '@/server/historyCursor';
import { itemsFromEntry, type FeedEntry } from '@/server/historyFeed';
import { rowFromItem } from '@/server/historyRecord';
import { FEED_PAGE, ResultsFollower } from '@/worker/resultsFollower';
import { insertJob, useTempEnv, writeEngineJson } from './helpers';

let env: ReturnType<typeof useTempEnv>;
beforeAll(() => {
  env = useTempEnv('history-feed');
});
afterAll(() => env.cleanup());

const MODEL = { arch: 'zimage', name_or_path: 'tiny:zimage', quantize: false, loras: [] };

/** Entry `seq` of a feed; `tag` keeps request ids apart between tests (real ones are unique). */
function entry(seq: number, over: Partial<FeedEntry> = {}, tag = 'r'): FeedEntry {
  const rid = `${tag}${seq}`;
  return {
    seq,
    request_id: rid,
    status: 'ok',
    api: 'a1111',
    client: null,
    model: MODEL,
    sample: { prompt: `prompt ${seq}`, negative_prompt: '', width: 64, height: 48, seed: 100 + seq, num_inference_steps: 2 },
    files: [{ relpath: `${rid}.png`, kind: 'image', ext: 'png', bytes: 1234, seed: 100 + seq, index: 0, width: 64, height: 48, num_frames: null, fps: null, duration: null }],
    finished_at: Date.UTC(2026, 0, 2, 3, 4, 5) / 1000 + seq,
    timings: { queue_s: 0.5, run_s: 2, load_s: 1.25, total_s: 2.5 },
    ...over,
  };
}

describe('a feed entry as history', () => {
  const job = { id: 'job-9', name: 'eng_feed' };

  it('is one row per file, with the settings, seed, size, timings and the engine clock', () => {
    const e = entry(1, {
      files: [entry(1).files[0], { ...entry(1).files[0], relpath: 'r1-1.png', seed: 102, index: 1 }],
    });
    const items = itemsFromEntry(e, job);
    expect(items.map((i) => i.key)).toEqual(['r1/r1.png', 'r1/r1-1.png']);
    const row = rowFromItem(items[1] as unknown as Record<string, unknown>);
    expect(row).toMatchObject({
      id: 'r1/r1-1.png', request_id: 'r1', batch_index: 1, job_id: 'job-9', job_name: 'eng_feed', prompt: 'prompt 1',
      arch: 'zimage', name_or_path: 'tiny:zimage', model_key: 'zimage · tiny:zimage', seed: 102, width: 64, height: 48,
      kind: 'image', total_seconds: 2.5, run_seconds: 2, load_seconds: 1.25, status: 'ok',
      created_at: new Date((Date.UTC(2026, 0, 2, 3, 4, 5) / 1000 + 1) * 1000).toISOString(),
    });
    expect(JSON.parse(row.files)).toEqual([{ relpath: 'r1-1.png', kind: 'image', mime: 'image/png', bytes: 1234 }]);
    expect(JSON.parse(row.settings)).toEqual({ model: MODEL, sample: e.sample });
  });

  it('says who asked: the compat API (with its client id), else the native caller\'s X-Client, else native', () => {
    const one = (over: Partial<FeedEntry>) => itemsFromEntry(entry(6, over), job)[0];
    expect(one({ api: 'comfyui', client: 'c0ffee' })).toMatchObject({ source: 'comfyui', client: 'c0ffee' });
    expect(one({ api: 'sdcpp', client: null })).toMatchObject({ source: 'sdcpp', client: null });
    expect(one({ api: 'native', client: 'cli' })).toMatchObject({ source: 'cli', client: null });
    expect(one({ api: 'native', client: 'ui' })).toMatchObject({ source: 'ui', client: null });
    expect(one({ api: 'native', client: null })).toMatchObject({ source: 'native' });
    expect(one({ api: undefined })).toMatchObject({ source: 'native' }); // an older engine's feed
    expect(rowFromItem(one({ api: 'openai' }) as unknown as Record<string, unknown>)).toMatchObject({ source: 'openai', client: null });
  });

  it('has no rows for a request that failed or was cancelled (no files)', () => {
    expect(itemsFromEntry(entry(2, { status: 'error', files: [] }), job)).toEqual([]);
    expect(itemsFromEntry(entry(3, { status: 'cancelled', files: [] }), job)).toEqual([]);
  });

  it("and the page's own POST of the same result are one row, whichever lands first", () => {
    const e = entry(4);
    // what the Generate page makes of the same result frame (requestBook.galleryItem)
    const ctx = { requestId: 'r4', jobId: job.id, jobName: job.name, model: MODEL, sample: e.sample, timing: noTimings(), startedAt: Date.now() - 3000 };
    const fromPage = galleryItem(ctx, { ...e.files[0], url: '/outputs/r4.png' });
    const [fromFeed] = itemsFromEntry(e, job);
    expect(fromFeed.key).toBe(fromPage.key);
    expect(addGeneration(fromFeed as unknown as Record<string, unknown>).created).toBe(true);
    const again = addGeneration(fromPage as unknown as Record<string, unknown>);
    expect(again.created).toBe(false);
    expect(again.item.timings).toEqual({ total_s: 2.5, run_s: 2, load_s: 1.25 }); // the first writer's row stands
    const e5 = entry(5);
    expect(addGeneration(galleryItem({ ...ctx, requestId: 'r5' }, { ...e5.files[0], url: '' }) as unknown as Record<string, unknown>).created).toBe(true);
    expect(addGeneration(itemsFromEntry(e5, job)[0] as unknown as Record<string, unknown>).created).toBe(false);
    const rows = getDb().$client.prepare('SELECT "id" FROM "Generation" WHERE "request_id" IN (?, ?)').all('r4', 'r5');
    expect(rows).toHaveLength(2);
  });
});

/** A real HTTP server answering GET /results the engine's way over `feed.entries` (token checked). */
function feedServer(token: string) {
  const feed = { entries: [] as FeedEntry[], asked: [] as string[] };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    feed.asked.push(url.search);
    if (req.headers['x-engine-token'] !== token) {
      res.writeHead(401).end('{"detail":"bad token","field":"token"}');
      return;
    }
    const after = Number(url.searchParams.get('after'));
    const limit = Number(url.searchParams.get('limit'));
    const newer = feed.entries.filter((e) => e.seq > after);
    const lastSeq = feed.entries.length ? feed.entries[feed.entries.length - 1].seq : 0;
    const page = newer.slice(0, limit);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ entries: page, last_seq: lastSeq, first_seq: feed.entries[0]?.seq ?? 1, more: page.length < newer.length }));
  });
  return { feed, server };
}

describe('the results follower', () => {
  const token = 'feed-token';
  const { feed, server } = feedServer(token);
  let job: { id: string; name: string };
  const logs: string[] = [];
  const follower = () => new ResultsFollower({ tickMs: 1000, log: (m) => logs.push(m) });
  const rowsOf = () => getDb().$client.prepare('SELECT "id" FROM "Generation" WHERE "job_name" = ?').all(job.name);

  beforeAll(async () => {
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    job = insertJob({ name: 'eng_follow' });
    writeEngineJson(job.name, { port: (server.address() as AddressInfo).port, token, pid: process.pid });
  });
  afterAll(() => new Promise<void>((ok) => server.close(() => ok())));

  it('reads every page from its cursor and remembers it; a new follower (a restart) adds nothing twice', async () => {
    feed.entries = Array.from({ length: FEED_PAGE + 3 }, (_, i) => entry(i + 1, i === 1 ? { status: 'error', files: [] } : {}, 'f'));
    expect(await follower().tick()).toBe(FEED_PAGE + 2);
    expect(feedCursor(job.name)).toBe(FEED_PAGE + 3);
    expect(feed.asked).toEqual([`?after=0&limit=${FEED_PAGE}`, `?after=${FEED_PAGE}&limit=${FEED_PAGE}`]);
    expect(rowsOf()).toHaveLength(FEED_PAGE + 2);
    const newest = listGenerations({ limit: 200 }).items.find((i) => i.jobName === job.name); // newest first
    expect(newest).toMatchObject({ requestId: `f${FEED_PAGE + 3}`, jobId: job.id, jobName: job.name, status: 'ok' });

    feed.entries.push(entry(FEED_PAGE + 4, {}, 'f'));
    feed.asked.length = 0;
    const again = follower();
    expect(await again.tick()).toBe(1);
    expect(feed.asked).toEqual([`?after=${FEED_PAGE + 3}&limit=${FEED_PAGE}`]);
    expect(await again.tick()).toBe(0);
    expect(rowsOf()).toHaveLength(FEED_PAGE + 3);
  });

  it('reads from the start when the feed started over (its seqs are below the cursor); old keys stay one row', async () => {
    const before = rowsOf().length;
    feed.entries = [entry(1, {}, 'f'), entry(2, {}, 'g')]; // f1 is a row already
    feed.asked.length = 0;
    expect(await follower().tick()).toBe(1);
    expect(feed.asked).toEqual([`?after=${FEED_PAGE + 4}&limit=${FEED_PAGE}`, `?after=0&limit=${FEED_PAGE}`]);
    expect(feedCursor(job.name)).toBe(2);
    expect(rowsOf()).toHaveLength(before + 1);
  });

  it('says an engine it cannot read once, and reads it when it answers again', async () => {
    writeEngineJson(job.name, { port: (server.address() as AddressInfo).port, token: 'wrong', pid: process.pid });
    forgetEngineFile(job.name); // engineEndpoint caches engine.json ~2 s (a failed read forgets it too)
    const f = follower();
    await f.tick();
    await f.tick();
    expect(logs.filter((l) => l.includes('HTTP 401'))).toHaveLength(1);
    writeEngineJson(job.name, { port: (server.address() as AddressInfo).port, token, pid: process.pid });
    feed.entries.push(entry(3, {}, 'g'));
    expect(await f.tick()).toBe(1);
  });
});
