// Route tests for /api/inference/[...path] against a small fake engine (a real HTTP server).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as route from '@/app/api/inference/[...path]/route';
import { getDb } from '@/server/db';
import { encodeFrame } from '@/utils/engineStream';
import { deadPid, insertJob, sleep, useTempEnv, writeEngineJson } from './helpers';

const TOKEN = 'engine-token-5f3a9c1e7b2d4f60';
const CHUNK_GAP_MS = 250;
const FRAMES = 5;

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

let server: http.Server;
let port = 0;
const seen: Seen[] = [];
let lastAbortAt = 0;
let env: ReturnType<typeof useTempEnv>;

function frameBytes(i: number): Buffer {
  return Buffer.from(encodeFrame({ type: 'progress', request_id: 'r1', step: i + 1, total: FRAMES, elapsed: i }));
}

beforeAll(async () => {
  env = useTempEnv('proxy');
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      seen.push({ method: req.method as string, url: req.url as string, headers: req.headers, body: Buffer.concat(chunks).toString() });
      if (req.headers['x-engine-token'] !== TOKEN) {
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"detail":"bad token"}');
        return;
      }
      if (req.url?.startsWith('/health')) {
        res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'h1' }).end('{"ok":true,"busy":false}');
      } else if (req.url === '/generate') {
        // a frame every CHUNK_GAP_MS, like an engine sampling steps
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        for (let i = 0; i < FRAMES && !res.destroyed; i++) {
          res.write(frameBytes(i));
          await sleep(CHUNK_GAP_MS);
        }
        res.end();
      } else if (req.url === '/forever') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.write(frameBytes(0));
        res.on('close', () => {
          lastAbortAt = Date.now();
        });
      } else if (req.url === '/bad') {
        res.writeHead(422, { 'content-type': 'application/json' }).end('{"detail":"sample.width: 1000 is not a multiple of 16"}');
      } else {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"not found"}');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  env.cleanup();
});

function call(method: 'GET' | 'POST', pathAndQuery: string, init: RequestInit = {}): Promise<Response> {
  const url = new URL(`http://localhost/api/inference/${pathAndQuery}`);
  const segments = url.pathname.replace('/api/inference/', '').split('/');
  const handler = method === 'GET' ? route.GET : route.POST;
  return Promise.resolve(handler(new Request(url, { method, ...init }), { params: Promise.resolve({ path: segments }) }));
}

let n = 0;
/** A running inference job with a live engine.json pointing at the fake engine. */
function liveEngineJob(extra: { pid?: number; port?: number } = {}) {
  const job = insertJob({ name: `engine_${++n}` });
  writeEngineJson(job.name, { port: extra.port ?? port, token: TOKEN, pid: extra.pid ?? process.pid });
  return job;
}

async function errorOf(res: Response) {
  return { status: res.status, ...(await res.json()) } as { status: number; error: string; message: string };
}

describe('engine resolution', () => {
  it('503 with a clear message when no engine job is running', async () => {
    const res = await errorOf(await call('GET', 'health'));
    expect(res).toMatchObject({ status: 503, error: 'engine_not_running' });
    expect(res.message).toMatch(/not running/);
  });

  it('ignores a stale engine.json whose pid is gone: 503, never a connection attempt', async () => {
    const job = liveEngineJob({ pid: deadPid() });
    const before = seen.length;
    const res = await errorOf(await call('GET', `health?job=${job.id}`));
    expect(res).toMatchObject({ status: 503, error: 'engine_stale' });
    expect(res.message).toMatch(/stale/);
    expect(seen.length).toBe(before);
  });

  it('503 "starting" while the job runs but has not written engine.json', async () => {
    const job = insertJob({ name: 'engine_no_file' });
    const res = await errorOf(await call('GET', `health?job=${job.name}`));
    expect(res).toMatchObject({ status: 503, error: 'engine_starting' });
  });

  it('404 for an unknown ?job=, 503 for a stopped one', async () => {
    expect((await errorOf(await call('GET', 'health?job=nope'))).status).toBe(404);
    const stopped = insertJob({ name: 'engine_stopped', status: 'stopped' });
    expect(await errorOf(await call('GET', `health?job=${stopped.id}`))).toMatchObject({ status: 503, error: 'engine_not_running' });
  });

  it('503 engine_unreachable when engine.json is live but nothing listens', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const freePort = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const job = liveEngineJob({ port: freePort });
    expect(await errorOf(await call('GET', `health?job=${job.id}`))).toMatchObject({ status: 503, error: 'engine_unreachable' });
  });
});

describe('token handling', () => {
  it('injects the engine token upstream and keeps it out of the response', async () => {
    const job = liveEngineJob();
    const res = await call('GET', `health?job=${job.id}&x=1`, { headers: { authorization: 'Bearer ui-secret', cookie: 'a=b' } });
    const body = await res.text();
    expect(res.status).toBe(200);
    expect(JSON.parse(body)).toEqual({ ok: true, busy: false });
    const upstream = seen[seen.length - 1];
    expect(upstream.headers['x-engine-token']).toBe(TOKEN);
    expect(upstream.headers.authorization).toBeUndefined(); // the UI's credentials stay here
    expect(upstream.headers.cookie).toBeUndefined();
    expect(upstream.url).toBe('/health?x=1'); // ?job= is the proxy's, not the engine's
    expect(res.headers.get('x-request-id')).toBe('h1');
    const everything = body + JSON.stringify([...res.headers.entries()]);
    expect(everything).not.toContain(TOKEN);
  });

  it('replaces a token the client tries to send itself', async () => {
    const job = liveEngineJob();
    await call('GET', `health?job=${job.id}`, { headers: { 'x-engine-token': 'forged' } });
    expect(seen[seen.length - 1].headers['x-engine-token']).toBe(TOKEN);
  });

  it('requires AI_TOOLKIT_AUTH when set, and still does not forward it', async () => {
    const job = liveEngineJob();
    process.env.AI_TOOLKIT_AUTH = 'ui-secret';
    try {
      expect((await call('GET', `health?job=${job.id}`)).status).toBe(401);
      expect((await call('GET', `health?job=${job.id}`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
      const ok = await call('GET', `health?job=${job.id}`, { headers: { authorization: 'Bearer ui-secret' } });
      expect(ok.status).toBe(200);
      expect(seen[seen.length - 1].headers.authorization).toBeUndefined();
    } finally {
      delete process.env.AI_TOOLKIT_AUTH;
    }
  });

  it('passes an engine 4xx through with its body', async () => {
    const job = liveEngineJob();
    const res = await call('POST', `bad?job=${job.id}`, { body: '{}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(422);
    expect((await res.json()).detail).toMatch(/multiple of 16/);
  });
});

describe('streaming', () => {
  it('streams frames as the engine sends them, byte-exact, with the request body forwarded', async () => {
    const job = liveEngineJob();
    const t0 = Date.now();
    const res = await call('POST', `generate?job=${job.id}`, {
      body: JSON.stringify({ model: { arch: 'zimage' }, sample: { prompt: 'fox' } }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const arrivals: number[] = [];
    const received: number[] = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      arrivals.push(Date.now() - t0);
      received.push(...value);
    }
    const expected = Buffer.concat(Array.from({ length: FRAMES }, (_, i) => frameBytes(i)));
    expect(Buffer.from(received).equals(expected)).toBe(true);
    // the first frame is here long before the engine has finished (buffering would make it ~1.25 s)
    expect(arrivals[0]).toBeLessThan(CHUNK_GAP_MS * 2);
    expect(arrivals[arrivals.length - 1] - arrivals[0]).toBeGreaterThanOrEqual(CHUNK_GAP_MS * (FRAMES - 2));
    expect(arrivals.length).toBeGreaterThanOrEqual(FRAMES - 1);
    const upstream = seen[seen.length - 1];
    expect(upstream.method).toBe('POST');
    expect(JSON.parse(upstream.body)).toEqual({ model: { arch: 'zimage' }, sample: { prompt: 'fox' } });
    expect(upstream.headers['content-length']).toBe(String(upstream.body.length));
  });

  it('forwards the client abort: the engine sees its connection close', async () => {
    const job = liveEngineJob();
    const ctrl = new AbortController();
    lastAbortAt = 0;
    const res = await call('GET', `forever?job=${job.id}`, { signal: ctrl.signal });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    const abortedAt = Date.now();
    ctrl.abort();
    await reader.cancel().catch(() => undefined);
    for (let i = 0; i < 40 && !lastAbortAt; i++) await sleep(50);
    expect(lastAbortAt).toBeGreaterThan(0);
    expect(lastAbortAt - abortedAt).toBeLessThan(2000);
  });
});

describe('picking the engine', () => {
  it('uses the only running engine without ?job=, and asks for ?job= when there are several', async () => {
    getDb().$client.prepare(`UPDATE "Job" SET status = 'stopped'`).run();
    liveEngineJob();
    const res = await call('GET', 'health');
    expect(res.status).toBe(200);
    liveEngineJob();
    expect(await errorOf(await call('GET', 'health'))).toMatchObject({ status: 409, error: 'engine_ambiguous' });
  });
});
