// POST /api/grids: a grid PNG saved under the job's outputs/grids (atomically, no temp file left),
// served back by /api/files; not a PNG, too large, no job, an unknown job: refused with a message.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as gridsRoute from '@/app/api/grids/route';
import * as filesRoute from '@/app/api/files/[...path]/route';
import { encodePng } from '@/components/generate/maskPng';
import { MAX_GRID_BYTES } from '@/server/gridFiles';
import { pngSize } from '@/server/pngInfo';
import { insertJob, useTempEnv } from './helpers';

let env: ReturnType<typeof useTempEnv>;
beforeAll(() => {
  env = useTempEnv('grids');
});
afterAll(() => env.cleanup());

const ctx = { params: Promise.resolve({}) };
const post = (query: string, body: BodyInit | null, headers: Record<string, string> = {}) =>
  gridsRoute.POST(new Request(`http://localhost/api/grids${query}`, { method: 'POST', body, headers: { 'content-type': 'image/png', ...headers } }), ctx);

describe('POST /api/grids', () => {
  it('saves the PNG under <job>/outputs/grids and /api/files serves it', async () => {
    const job = insertJob({ name: 'inference_engine_cpu' });
    const png = await encodePng(150, 90, 3, new Uint8Array(150 * 90 * 3).fill(200));
    const res = await post(`?job=${job.id}`, Buffer.from(png));
    expect(res.status).toBe(201);
    const saved = await res.json();
    expect(saved).toMatchObject({ width: 150, height: 90, bytes: png.length });
    expect(saved.relpath).toMatch(/^grids\/grid-\d{8}-\d{6}-[0-9a-f]{6}\.png$/);
    expect(saved.url).toBe(`/api/files/inference_engine_cpu/outputs/${saved.relpath}`);
    const dir = path.join(process.env.AITK_TRAINING_FOLDER as string, 'inference_engine_cpu', 'outputs', 'grids');
    expect(fs.readdirSync(dir)).toEqual([path.basename(saved.relpath)]); // no temp file left
    expect(Buffer.compare(fs.readFileSync(path.join(dir, path.basename(saved.relpath))), Buffer.from(png))).toBe(0);

    const segments = saved.url.replace('/api/files/', '').split('/');
    const served = await filesRoute.GET(new Request(`http://localhost${saved.url}`), { params: Promise.resolve({ path: segments }) });
    expect(served.status).toBe(200);
    expect(pngSize(new Uint8Array(await served.arrayBuffer()))).toEqual({ width: 150, height: 90 });

    // by job name too; a second grid gets its own name
    const again = await (await post('?job=inference_engine_cpu', Buffer.from(png))).json();
    expect(again.relpath).not.toBe(saved.relpath);
  });

  it('refuses what is not a PNG, too large a body, no job and an unknown job', async () => {
    const job = insertJob({ name: 'eng_refuse' });
    const notPng = await post(`?job=${job.id}`, Buffer.from('GIF89a not a png at all, just some bytes here'));
    expect(notPng.status).toBe(400);
    expect(await notPng.json()).toMatchObject({ error: 'not_png', message: expect.stringContaining('must be a PNG') });
    // the signature alone, without an IHDR, is not enough
    const sigOnly = await post(`?job=${job.id}`, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, ...new Array(40).fill(0)]));
    expect(sigOnly.status).toBe(400);

    const declared = await post(`?job=${job.id}`, Buffer.from('x'), { 'content-length': String(MAX_GRID_BYTES + 1) });
    expect(declared.status).toBe(413);
    // a streamed body with no length is cut off once past the bound
    const big = new ReadableStream<Uint8Array>({
      pull(c) {
        c.enqueue(new Uint8Array(8 << 20));
      },
    });
    const streamed = await gridsRoute.POST(new Request(`http://localhost/api/grids?job=${job.id}`, { method: 'POST', body: big, duplex: 'half' } as RequestInit), ctx);
    expect(streamed.status).toBe(413);
    expect((await streamed.json()).message).toContain('at most 64 MiB');

    expect((await post('', Buffer.from('x'))).status).toBe(400);
    const unknown = await post('?job=nope', Buffer.from('x'));
    expect(unknown.status).toBe(404);
    expect(fs.existsSync(path.join(process.env.AITK_TRAINING_FOLDER as string, 'eng_refuse', 'outputs', 'grids'))).toBe(false);
  });
});

describe('pngSize', () => {
  it('reads the IHDR size and refuses other bytes', async () => {
    expect(pngSize(await encodePng(3, 5, 1, new Uint8Array(15)))).toEqual({ width: 3, height: 5 });
    expect(pngSize(new Uint8Array(10))).toBeNull();
  });
});
