// The request guard in front of the real route handlers, as Next runs them (src/proxy.ts first,
// then the handler): every handler of every /api route refuses another page and a foreign Host,
// with AI_TOOLKIT_AUTH on too; the probe's text/plain job POST is 415 and makes no job; the UI's own
// requests (JSON, a grid PNG, a bare start, a bookmark) are served.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxy } from '@/proxy';
import * as jobsRoute from '@/app/api/jobs/route';
import * as startRoute from '@/app/api/jobs/[id]/start/route';
import * as gridsRoute from '@/app/api/grids/route';
import * as historyRoute from '@/app/api/history/route';
import { encodePng } from '@/components/generate/maskPng';
import { useTempEnv } from './helpers';

const API_DIR = path.join(__dirname, '..', 'src', 'app', 'api');
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
const OWN = 'http://127.0.0.1:8675';
const CONFIG = { job: 'extension', config: { process: [{ type: 'InferenceEngine', engine: {} }] } };

let env: ReturnType<typeof useTempEnv>;
beforeAll(() => {
  env = useTempEnv('guard');
});
afterAll(() => env.cleanup());

function routeFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    return e.isDirectory() ? routeFiles(full) : e.name === 'route.ts' ? [full] : [];
  });
}

/** The URL path a route file answers, its dynamic segments filled in. */
const routePath = (file: string) =>
  path.relative(path.join(API_DIR, '..'), path.dirname(file)).split(path.sep).map((s) => (s.startsWith('[') ? 'x' : s)).join('/');

type Handler = (req: Request, ctx: unknown) => Promise<Response> | Response;
const ctx = (params: Record<string, unknown>) => ({ params: Promise.resolve(params) });

/** As Next serves a request: the proxy first; the handler only when it lets the request through. */
async function serve(handler: Handler, req: Request, params: Record<string, unknown> = {}): Promise<Response> {
  return proxy(req) ?? handler(req, ctx(params));
}

function req(method: string, url: string, headers: Record<string, string>, body?: BodyInit): Request {
  return new Request(`${OWN}${url}`, { method, headers: { host: '127.0.0.1:8675', ...headers }, body });
}

const FOREIGN: [string, Record<string, string>, string][] = [
  ['a foreign Origin', { origin: 'http://evil.example' }, 'foreign_origin'],
  ['Origin: null', { origin: 'null' }, 'foreign_origin'],
  ['a foreign Referer', { referer: 'http://evil.example/x' }, 'foreign_origin'],
  ['a foreign Host', { host: 'evil.example:8675' }, 'foreign_host'],
];

describe('every /api handler behind the guard', () => {
  for (const auth of [false, true]) {
    it(`refuses another page and a foreign Host with 403, AI_TOOLKIT_AUTH ${auth ? 'on, with the token' : 'off'}`, async () => {
      const files = routeFiles(API_DIR);
      expect(files.length).toBeGreaterThanOrEqual(8);
      if (auth) process.env.AI_TOOLKIT_AUTH = 'let-me-in';
      try {
        for (const file of files) {
          const mod = await import(file);
          for (const m of METHODS.filter((m) => typeof mod[m] === 'function')) {
            for (const [name, headers, code] of FOREIGN) {
              const body = m === 'GET' || m === 'DELETE' ? undefined : '{}';
              const h = { ...(body ? { 'content-type': 'application/json' } : {}), ...(auth ? { authorization: 'Bearer let-me-in' } : {}), ...headers };
              const res = await serve(mod[m], req(m, `/${routePath(file)}`, h, body), { id: 'x', path: ['x'] });
              expect(res.status, `${name}: ${m} ${file}`).toBe(403);
              expect(await res.json(), `${name}: ${m} ${file}`).toMatchObject({ error: code });
            }
          }
        }
      } finally {
        delete process.env.AI_TOOLKIT_AUTH;
      }
    });
  }
});

describe('the probe and the UI\'s own requests', () => {
  const jobBody = (name: string) => JSON.stringify({ name, gpu_ids: 'cpu', job_type: 'inference', job_config: CONFIG });
  const names = async () =>
    ((await (await serve(jobsRoute.GET as Handler, req('GET', '/api/jobs', {}))).json()).jobs as { name: string }[]).map((j) => j.name);

  it('a text/plain JSON POST /api/jobs is 415 (403 from another page) and makes no job; JSON from the UI makes one', async () => {
    const plain = await serve(jobsRoute.POST as Handler, req('POST', '/api/jobs', { 'content-type': 'text/plain' }, jobBody('plain')));
    expect(plain.status).toBe(415);
    expect(await plain.json()).toMatchObject({ error: 'unsupported_media_type', message: expect.stringContaining('application/json') });
    const probe = await serve(jobsRoute.POST as Handler, req('POST', '/api/jobs', { 'content-type': 'text/plain', origin: 'http://evil.example' }, jobBody('probe')));
    expect(probe.status).toBe(403);
    const history = await serve(historyRoute.POST as Handler, req('POST', '/api/history', { 'content-type': 'text/plain', origin: OWN }, '{}'));
    expect(history.status).toBe(415);
    expect(await names()).toEqual([]);

    const own = await serve(jobsRoute.POST as Handler, req('POST', '/api/jobs', { 'content-type': 'application/json', origin: OWN, 'sec-fetch-site': 'same-origin' }, jobBody('own')));
    expect(own.status).toBe(201);
    const { job } = await own.json();
    // a bare POST from the page (no body, no type) and a bookmark GET (no Origin) are served
    const started = await serve(startRoute.POST as Handler, req('POST', `/api/jobs/${job.id}/start`, { origin: OWN }), { id: job.id });
    expect(started.status).toBe(200);
    expect(await names()).toEqual(['own']);
  });

  it('the grid PNG keeps its type: image/png is saved, JSON or text/plain is 415, another page 403', async () => {
    const { job } = await (await serve(jobsRoute.POST as Handler, req('POST', '/api/jobs', { 'content-type': 'application/json' }, jobBody('grids')))).json();
    const png = Buffer.from(await encodePng(8, 8, 3, new Uint8Array(8 * 8 * 3)));
    const post = (headers: Record<string, string>) => serve(gridsRoute.POST as Handler, req('POST', `/api/grids?job=${job.id}`, { 'content-length': String(png.length), ...headers }, png));
    expect((await post({ 'content-type': 'image/png', origin: OWN })).status).toBe(201);
    expect((await post({ 'content-type': 'application/json', origin: OWN })).status).toBe(415);
    expect((await post({ 'content-type': 'text/plain', origin: OWN })).status).toBe(415);
    expect((await post({ 'content-type': 'image/png', origin: 'http://evil.example' })).status).toBe(403);
    expect((await post({ 'content-type': 'image/png', host: 'evil.example:8675' })).status).toBe(403);
    const grids = path.join(process.env.AITK_TRAINING_FOLDER as string, 'grids', 'outputs', 'grids');
    expect(fs.readdirSync(grids)).toHaveLength(1);
  });
});
