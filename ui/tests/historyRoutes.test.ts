// The history routes against a real SQLite file and real files: add (idempotent, 400 naming the
// field), search (case-insensitive, % and _ literal), the model filter, pages, the models list,
// delete (the file goes; a path outside the job's outputs folder is refused, nothing deleted).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as historyRoute from '@/app/api/history/route';
import * as itemRoute from '@/app/api/history/[id]/route';
import * as modelsRoute from '@/app/api/history/models/route';
import { getDb } from '@/server/db';
import { useTempEnv } from './helpers';

let env: ReturnType<typeof useTempEnv>;
beforeAll(() => {
  env = useTempEnv('history');
});
afterAll(() => env.cleanup());

const ctx = <T,>(params: T) => ({ params: Promise.resolve(params) });
const req = (method: string, url: string, body?: unknown) =>
  new Request(`http://localhost${url}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });

const outputs = (job: string) => path.join(process.env.AITK_TRAINING_FOLDER as string, job, 'outputs');

let n = 0;
/** A gallery item as useGeneration makes it, its file written under the job's outputs. */
function item(prompt: string, model: Record<string, unknown> = { arch: 'zimage', name_or_path: 'tiny:zimage' }, job = 'eng') {
  n += 1;
  const relpath = `req${n}.png`;
  fs.mkdirSync(outputs(job), { recursive: true });
  fs.writeFileSync(path.join(outputs(job), relpath), 'png bytes');
  return {
    key: `req${n}/${relpath}`,
    requestId: `req${n}`,
    jobId: 'job-1',
    jobName: job,
    result: { relpath, url: `/outputs/${relpath}`, kind: 'image', ext: 'png', bytes: 9, seed: 40 + n, index: 0, width: 64, height: 64, num_frames: null, fps: null, duration: null },
    model,
    sample: { prompt, negative_prompt: 'blurry', num_inference_steps: 8 },
    createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
    timings: { total_s: 3.5, run_s: 2.25, load_s: 1 },
  };
}

async function post(body: unknown) {
  const res = await historyRoute.POST(req('POST', '/api/history', body), ctx({}));
  return { status: res.status, body: await res.json() };
}

async function list(query = '') {
  const res = await historyRoute.GET(req('GET', `/api/history${query}`), ctx({}));
  return { status: res.status, body: await res.json() };
}

const prompts = (items: { sample: { prompt: string } }[]) => items.map((i) => i.sample.prompt);

describe('history API', () => {
  it('adds an item once, and gives it back whole, newest first', async () => {
    const a = item('A red Fox in snow');
    const first = await post(a);
    expect(first.status).toBe(201);
    expect(first.body.item).toMatchObject({ key: a.key, jobName: 'eng', result: { relpath: a.result.relpath, seed: a.result.seed }, timings: a.timings, status: 'ok' });
    const again = await post({ ...a, sample: { prompt: 'changed' } });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ created: false, item: { sample: { prompt: 'A red Fox in snow' } } });
    const b = item('a blue bird');
    await post(b);
    const { body } = await list();
    expect(prompts(body.items)).toEqual(['a blue bird', 'A red Fox in snow']);
    expect(body.items[1]).toEqual({ ...a, status: 'ok', source: 'ui', client: null }); // the page's own POST: source ui
    const row = getDb().$client.prepare('SELECT * FROM "Generation" WHERE id = ?').get(a.key) as Record<string, unknown>;
    expect(row).toMatchObject({ prompt: 'A red Fox in snow', negative_prompt: 'blurry', arch: 'zimage', name_or_path: 'tiny:zimage', seed: a.result.seed, width: 64, height: 64, total_seconds: 3.5, run_seconds: 2.25, load_seconds: 1 });
    expect(JSON.parse(row.files as string)).toEqual([{ relpath: a.result.relpath, kind: 'image', mime: 'image/png', bytes: 9 }]);
  });

  it('refuses bad bodies with a 400 naming the field', async () => {
    const good = item('fine');
    const cases: [unknown, string][] = [
      [{ ...good, key: '' }, 'key'],
      [{ ...good, key: 5 }, 'key'],
      [{ ...good, jobName: '../etc' }, 'jobName'],
      [{ ...good, result: 'x' }, 'result'],
      [{ ...good, result: { ...good.result, relpath: '../../escape.png' } }, 'result.relpath'],
      [{ ...good, result: { ...good.result, relpath: '/abs.png' } }, 'result.relpath'],
      [{ ...good, result: { ...good.result, seed: 1.5 } }, 'result.seed'],
      [{ ...good, model: { name_or_path: 'x' } }, 'model.arch'],
      [{ ...good, model: { arch: 'zimage', loras: 'x' } }, 'model.loras'],
      [{ ...good, sample: [] }, 'sample'],
      [{ ...good, sample: { prompt: 7 } }, 'sample.prompt'],
      [{ ...good, createdAt: 'yesterday' }, 'createdAt'],
      [{ ...good, timings: { total_s: -1 } }, 'timings.total_s'],
      [{ ...good, status: 'maybe' }, 'status'],
      [{ ...good, sample: { prompt: 'x'.repeat(150 * 1024) } }, 'sample.prompt'],
      [{ ...good, sample: { prompt: 'x', extra: 'x'.repeat(300 * 1024) } }, 'sample'],
    ];
    for (const [body, field] of cases) {
      const res = await post(body);
      expect(res.status, field).toBe(400);
      expect(res.body.message, field).toMatch(new RegExp(`^${field.replace('.', '\\.')} `));
    }
    const notJson = await historyRoute.POST(new Request('http://localhost/api/history', { method: 'POST', body: '{' }), ctx({}));
    expect(notJson.status).toBe(400);
    expect((await list('?limit=0')).status).toBe(400);
    expect((await list('?limit=abc')).body.message).toMatch(/^limit /);
    expect((await list('?before=nonsense')).body.message).toMatch(/^before /);
  });

  it('searches the prompt case-insensitively, with % and _ taken literally', async () => {
    for (const p of ['100% cotton', '100 percent wool', 'snake_case name', 'snakeXcase name', 'back\\slash']) await post(item(p));
    expect(prompts((await list('?q=FOX')).body.items)).toEqual(['A red Fox in snow']);
    expect(prompts((await list(`?q=${encodeURIComponent('100%')}`)).body.items)).toEqual(['100% cotton']);
    expect(prompts((await list(`?q=${encodeURIComponent('%')}`)).body.items)).toEqual(['100% cotton']);
    expect(prompts((await list('?q=snake_case')).body.items)).toEqual(['snake_case name']);
    expect(prompts((await list('?q=_')).body.items)).toEqual(['snake_case name']);
    expect(prompts((await list(`?q=${encodeURIComponent('k\\s')}`)).body.items)).toEqual(['back\\slash']);
    expect((await list('?q=nowhere')).body.items).toEqual([]);
  });

  it('filters by model and lists the models, most recent first', async () => {
    const sd1 = { arch: 'sd1', name_or_path: 'tiny:sd1', quantize: true, qtype: 'qfloat8', loras: [{ path: 'a.safetensors', scale: 1 }] };
    await post(item('an sd1 fox', sd1));
    await post(item('a profile fox', { arch: 'zimage', name_or_path: '/models/z', profile: 'tiny-z', variant: 'turbo' }));
    const { body } = await (await modelsRoute.GET(req('GET', '/api/history/models'), ctx({}))).json().then((b) => ({ body: b }));
    expect(body.models.map((m: { model: string }) => m.model)).toEqual(['zimage · profile tiny-z · turbo', 'sd1 · tiny:sd1 · qfloat8', 'zimage · tiny:zimage']);
    expect(body.models[1]).toMatchObject({ arch: 'sd1', name_or_path: 'tiny:sd1', quantization: 'qfloat8', count: 1 });
    expect(body.models[2].count).toBe(7);
    const bySd1 = (await list(`?model=${encodeURIComponent('sd1 · tiny:sd1 · qfloat8')}`)).body.items;
    expect(prompts(bySd1)).toEqual(['an sd1 fox']);
    expect(bySd1[0].model.loras).toEqual(sd1.loras);
    const foxZimage = (await list(`?q=fox&model=${encodeURIComponent('zimage · tiny:zimage')}`)).body.items;
    expect(prompts(foxZimage)).toEqual(['A red Fox in snow']);
  });

  it('keeps who asked: filters by source and lists the sources, per model too', async () => {
    const comfy = { ...item('a comfy fox'), source: 'comfyui', client: 'c0ffee' };
    const sdcpp = { ...item('an sdcpp fox'), source: 'sdcpp' };
    expect((await post(comfy)).body.item).toMatchObject({ source: 'comfyui', client: 'c0ffee' });
    await post(sdcpp);
    const byComfy = (await list('?source=comfyui')).body.items;
    expect(prompts(byComfy)).toEqual(['a comfy fox']);
    expect(prompts((await list('?q=fox&source=ui')).body.items)).toContain('A red Fox in snow');
    expect(prompts((await list('?q=fox&source=ui')).body.items)).not.toContain('a comfy fox');
    const body = await (await modelsRoute.GET(req('GET', '/api/history/models'), ctx({}))).json();
    const counts = Object.fromEntries(body.sources.map((s: { source: string; count: number }) => [s.source, s.count]));
    expect(counts).toMatchObject({ comfyui: 1, sdcpp: 1 });
    expect(counts.ui).toBeGreaterThan(1);
    const zimage = body.models.find((m: { model: string }) => m.model === 'zimage · tiny:zimage');
    expect(zimage.sources[0]).toBe('ui'); // the most results first
    expect(zimage.sources).toEqual(expect.arrayContaining(['comfyui', 'sdcpp']));
    expect((await post({ ...item('bad'), source: 'a b' })).body.message).toMatch(/^source /);
    expect((await list(`?source=${'x'.repeat(40)}`)).status).toBe(400);
  });

  it('pages with the next cursor, ties on created_at kept in insertion order', async () => {
    const at = new Date(Date.UTC(2027, 0, 1)).toISOString();
    for (const i of [0, 1, 2]) await post({ ...item(`batch ${i}`), createdAt: at });
    const all = prompts((await list('?limit=200')).body.items);
    const seen: string[] = [];
    let next: string | null = null;
    do {
      const page: { body: { items: { sample: { prompt: string } }[]; next: string | null } } = await list(`?limit=2${next ? `&before=${encodeURIComponent(next)}` : ''}`);
      expect(page.body.items.length).toBeLessThanOrEqual(2);
      seen.push(...prompts(page.body.items));
      next = page.body.next;
    } while (next);
    expect(seen).toEqual(all);
    expect(all.slice(0, 3)).toEqual(['batch 2', 'batch 1', 'batch 0']);
  });

  it('deletes the entry and its file; a file already gone is fine', async () => {
    const a = item('to delete');
    await post(a);
    const file = path.join(outputs('eng'), a.result.relpath);
    expect(fs.existsSync(file)).toBe(true);
    const res = await itemRoute.DELETE(req('DELETE', '/'), ctx({ id: a.key }));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ deleted: a.key, files: [{ relpath: a.result.relpath, removed: true }] });
    expect(fs.existsSync(file)).toBe(false);
    expect(prompts((await list('?q=to%20delete')).body.items)).toEqual([]);
    expect((await itemRoute.DELETE(req('DELETE', '/'), ctx({ id: a.key }))).status).toBe(404);

    const gone = item('file gone');
    await post(gone);
    fs.unlinkSync(path.join(outputs('eng'), gone.result.relpath));
    const res2 = await itemRoute.DELETE(req('DELETE', '/'), ctx({ id: gone.key }));
    expect(res2.status).toBe(200);
    expect((await res2.json()).files).toEqual([{ relpath: gone.result.relpath, removed: false }]);
  });

  it('refuses to delete a file outside the job outputs folder (a stored path or a linked folder), deleting nothing', async () => {
    const secret = path.join(env.dir, 'secret.txt');
    fs.writeFileSync(secret, 'keep me');
    const a = item('escape');
    await post(a);
    // a row written by something other than POST (which refuses such a path)
    getDb().$client.prepare('UPDATE "Generation" SET files = ? WHERE id = ?').run(JSON.stringify([{ relpath: '../../../secret.txt', kind: 'image', mime: 'text/plain', bytes: 7 }]), a.key);
    const res = await itemRoute.DELETE(req('DELETE', '/'), ctx({ id: a.key }));
    expect(res.status).toBe(403);
    expect((await res.json()).message).toMatch(/not inside eng\/outputs/);
    expect(fs.readFileSync(secret, 'utf8')).toBe('keep me');
    expect(prompts((await list('?q=escape')).body.items)).toEqual(['escape']);

    // outputs/linked -> a folder outside: the relpath is inside, the file it reaches is not
    fs.symlinkSync(env.dir, path.join(outputs('eng'), 'linked'));
    const b = { ...item('linked'), key: 'linked/secret' };
    b.result = { ...b.result, relpath: 'linked/secret.txt' };
    expect((await post(b)).status).toBe(201);
    const res2 = await itemRoute.DELETE(req('DELETE', '/'), ctx({ id: b.key }));
    expect(res2.status).toBe(403);
    expect(fs.readFileSync(secret, 'utf8')).toBe('keep me');
  });
});

describe('Generation table migration', () => {
  it('adds the columns an older Generation table lacks, keeping its rows', async () => {
    const Database = (await import('better-sqlite3')).default;
    const { migrate } = await import('@/server/db');
    const sqlite = new Database(path.join(env.dir, 'old.db'));
    sqlite.exec(`CREATE TABLE "Generation" ("seq" INTEGER PRIMARY KEY, "id" TEXT NOT NULL UNIQUE, "prompt" TEXT NOT NULL DEFAULT '')`);
    sqlite.prepare('INSERT INTO "Generation" (id, prompt) VALUES (?, ?)').run('old/1.png', 'from before');
    migrate(sqlite);
    migrate(sqlite); // idempotent
    const cols = (sqlite.prepare('PRAGMA table_info("Generation")').all() as { name: string }[]).map((c) => c.name);
    expect(cols).toEqual(expect.arrayContaining(['model_key', 'files', 'load_seconds', 'status']));
    expect(sqlite.prepare('SELECT prompt, status, files FROM "Generation"').get()).toEqual({ prompt: 'from before', status: 'ok', files: '[]' });
    const indexes = (sqlite.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'Generation'`).all() as { name: string }[]).map((i) => i.name);
    expect(indexes).toEqual(expect.arrayContaining(['Generation_created_idx', 'Generation_model_idx']));
    sqlite.close();
  });
});
