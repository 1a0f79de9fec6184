// Several engines (one per GPU set): GET /api/engines lists each with its health, and ?job=auto sends a
// request to the engine that holds its model, else the least busy, within MAX_IMBALANCE. Two fake
// engines (real HTTP servers) answer /health and /generate.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as enginesRoute from '@/app/api/engines/route';
import * as route from '@/app/api/inference/[...path]/route';
import { MAX_IMBALANCE, holdsModel, pickEngine, type EngineSummary } from '@/server/engines';
import { insertJob, useTempEnv, writeEngineJson } from './helpers';

const TOKEN = 'tok-engines-1';

interface Fake {
  server: http.Server;
  port: number;
  health: Record<string, unknown>;
  generated: string[];
}

function fakeEngine(health: Record<string, unknown>): Promise<Fake> {
  const fake: Fake = { server: http.createServer(), port: 0, health, generated: [] };
  fake.server.on('request', (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (req.headers['x-engine-token'] !== TOKEN) return void res.writeHead(401).end();
      if (req.url === '/health') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(fake.health));
      if (req.url === '/generate') {
        fake.generated.push(Buffer.concat(chunks).toString());
        return void res.writeHead(200, { 'content-type': 'application/octet-stream' }).end();
      }
      res.writeHead(404).end();
    });
  });
  return new Promise((r) => fake.server.listen(0, '127.0.0.1', () => r({ ...fake, port: (fake.server.address() as AddressInfo).port })));
}

const active = (arch: string, name_or_path: string, extra: Partial<EngineSummary['active']> = {}) => ({ arch, name_or_path, profile: null, variant: null, ...extra });

function summary(name: string, over: Partial<EngineSummary>): EngineSummary {
  return { job: { id: name, name, gpu_ids: '0', status: 'running' }, state: 'ready', busy: false, queue: 0, active: null, message: null, ...over };
}

describe('holdsModel', () => {
  it('arch and weights (a local path by its basename), variant where both say; a profile by name', () => {
    expect(holdsModel(active('flux', 'FLUX.1-dev'), { arch: 'flux', name_or_path: '/models/FLUX.1-dev/' })).toBe(true);
    expect(holdsModel(active('flux', 'org/flux'), { arch: 'flux', name_or_path: 'org/flux' })).toBe(true);
    expect(holdsModel(active('flux', 'org/flux'), { arch: 'sd3', name_or_path: 'org/flux' })).toBe(false);
    expect(holdsModel(active('flux', 'org/flux', { variant: 'dev' }), { arch: 'flux', name_or_path: 'org/flux', variant: 'schnell' })).toBe(false);
    expect(holdsModel(active('krea2', 'k', { profile: 'krea2-turbo' }), { profile: 'krea2-turbo' })).toBe(true);
    expect(holdsModel(active('krea2', 'k', { profile: 'krea2-turbo' }), { arch: 'krea2', name_or_path: 'k' })).toBe(false);
    expect(holdsModel(null, { arch: 'flux', name_or_path: 'org/flux' })).toBe(false);
  });
});

describe('pickEngine', () => {
  const model = { arch: 'flux', name_or_path: 'org/flux' };
  it('the engine holding the model, though busier, within the bound', () => {
    const a = summary('a', { queue: 0 });
    const b = summary('b', { busy: true, queue: MAX_IMBALANCE - 1, active: active('flux', 'org/flux') });
    expect(pickEngine([a, b], model)?.job.name).toBe('b');
  });
  it('past the bound, the least busy: a hot model spreads', () => {
    const a = summary('a', { queue: 0 });
    const b = summary('b', { busy: true, queue: MAX_IMBALANCE, active: active('flux', 'org/flux') });
    expect(pickEngine([a, b], model)?.job.name).toBe('a');
  });
  it('no holder: the least busy, ties by name; engines not ready are never picked', () => {
    const a = summary('a', { busy: true });
    const b = summary('b', {});
    const c = summary('c', {});
    expect(pickEngine([c, a, b], model)?.job.name).toBe('b');
    expect(pickEngine([summary('x', { state: 'starting' })], model)).toBeNull();
  });
});

describe('GET /api/engines and ?job=auto', () => {
  let env: ReturnType<typeof useTempEnv>;
  let idle: Fake;
  let holder: Fake;
  const jobs: Record<string, string> = {};

  beforeAll(async () => {
    env = useTempEnv('engines');
    idle = await fakeEngine({ ok: true, busy: false, queue: 0, active: null });
    holder = await fakeEngine({ ok: true, busy: true, queue: 1, active: active('zimage', 'tiny:zimage') });
    for (const [name, fake, gpu] of [['inference_engine_0', idle, '0'], ['inference_engine_1', holder, '1']] as const) {
      const job = insertJob({ name, gpu_ids: gpu });
      writeEngineJson(name, { port: fake.port, token: TOKEN, pid: process.pid });
      jobs[name] = job.id;
    }
    insertJob({ name: 'inference_engine_2', gpu_ids: '2', status: 'stopped' });
  });

  afterAll(async () => {
    for (const f of [idle, holder]) await new Promise((r) => f.server.close(r));
    env.cleanup();
  });

  const generate = (model: Record<string, unknown>) =>
    route.POST(new Request('http://localhost/api/inference/generate?job=auto', { method: 'POST', body: JSON.stringify({ model, sample: {} }) }), {
      params: Promise.resolve({ path: ['generate'] }),
    });

  it('lists every engine job with its health, the stopped one with why', async () => {
    const res = await enginesRoute.GET(new Request('http://localhost/api/engines'), undefined as never);
    const { engines } = (await res.json()) as { engines: EngineSummary[] };
    expect(engines.map((e) => [e.job.name, e.state, e.busy, e.queue])).toEqual([
      ['inference_engine_0', 'ready', false, 0],
      ['inference_engine_1', 'ready', true, 1],
      ['inference_engine_2', 'stopped', false, 0],
    ]);
    expect(engines[1].active).toMatchObject({ arch: 'zimage', name_or_path: 'tiny:zimage' });
    expect(engines[2].message).toMatch(/not running/);
  });

  it('auto: the model an engine holds goes there; another model to the idle one; x-engine-job says which', async () => {
    const held = await generate({ arch: 'zimage', name_or_path: 'tiny:zimage' });
    expect(held.status).toBe(200);
    expect(held.headers.get('x-engine-job')).toBe(jobs.inference_engine_1);
    expect(holder.generated).toHaveLength(1);
    const other = await generate({ arch: 'sd1', name_or_path: 'tiny:sd1' });
    expect(other.headers.get('x-engine-job')).toBe(jobs.inference_engine_0);
    expect(idle.generated).toHaveLength(1);
  });

  it('auto with no engine ready: 503 saying to start one', async () => {
    idle.health = { ok: true, busy: false, queue: 0, active: null };
    for (const f of [idle, holder]) f.server.close();
    for (const f of [idle, holder]) f.server.closeAllConnections();
    const res = await generate({ arch: 'sd1', name_or_path: 'tiny:sd1' });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: string }).error).toBe('engine_not_running');
  });
});
