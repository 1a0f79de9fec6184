// The UI's own /api routes: auth on every handler, the jobs API, and the files route.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as jobsRoute from '@/app/api/jobs/route';
import * as jobRoute from '@/app/api/jobs/[id]/route';
import * as startRoute from '@/app/api/jobs/[id]/start/route';
import * as stopRoute from '@/app/api/jobs/[id]/stop/route';
import * as logRoute from '@/app/api/jobs/[id]/log/route';
import * as filesRoute from '@/app/api/files/[...path]/route';
import { getDb } from '@/server/db';
import { useTempEnv, writeEngineJson } from './helpers';

const API_DIR = path.join(__dirname, '..', 'src', 'app', 'api');
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

let env: ReturnType<typeof useTempEnv>;
beforeAll(() => {
  env = useTempEnv('api');
});
afterAll(() => env.cleanup());

function routeFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    return e.isDirectory() ? routeFiles(full) : e.name === 'route.ts' ? [full] : [];
  });
}

const ctx = <T,>(params: T) => ({ params: Promise.resolve(params) });
const req = (method: string, url: string, body?: unknown, headers: Record<string, string> = {}) =>
  new Request(`http://localhost${url}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

describe('auth', () => {
  it('every handler of every /api route answers 401 without the token when AI_TOOLKIT_AUTH is set', async () => {
    const files = routeFiles(API_DIR);
    expect(files.length).toBeGreaterThanOrEqual(8);
    process.env.AI_TOOLKIT_AUTH = 'let-me-in';
    try {
      for (const file of files) {
        const mod = await import(file);
        const handlers = METHODS.filter((m) => typeof mod[m] === 'function');
        expect(handlers.length, file).toBeGreaterThan(0);
        for (const m of handlers) {
          expect(mod[m].authWrapped, `${m} ${file} is not wrapped with withAuth`).toBe(true);
          const res = await mod[m](req(m, '/api/x', m === 'GET' || m === 'DELETE' ? undefined : {}), ctx({ id: 'x', path: ['x'] }));
          expect(res.status, `${m} ${file}`).toBe(401);
        }
      }
      const ok = await jobsRoute.GET(req('GET', '/api/jobs', undefined, { authorization: 'Bearer let-me-in' }), ctx({}));
      expect(ok.status).toBe(200);
    } finally {
      delete process.env.AI_TOOLKIT_AUTH;
    }
  });
});

describe('jobs API', () => {
  it('creates, lists, starts, stops and deletes a job', async () => {
    const config = { job: 'extension', config: { name: 'x', process: [{ type: 'InferenceEngine', device: 'cuda', engine: {} }] } };
    const created = await jobsRoute.POST(req('POST', '/api/jobs', { name: 'inference_engine_cpu', gpu_ids: 'cpu', job_type: 'inference', job_config: config }), ctx({}));
    expect(created.status).toBe(201);
    const { job } = await created.json();
    expect(job).toMatchObject({ name: 'inference_engine_cpu', gpu_ids: 'cpu', status: 'stopped', job_type: 'inference', stop: 0, step: 0 });
    const proc = job.job_config.config.process[0];
    expect(proc).toMatchObject({ device: 'cpu', sqlite_db_path: process.env.AITK_DB_PATH });
    expect(proc.engine.job_folder).toBe(path.join(process.env.AITK_TRAINING_FOLDER as string, 'inference_engine_cpu'));

    const dup = await jobsRoute.POST(req('POST', '/api/jobs', { name: 'inference_engine_cpu', job_config: config }), ctx({}));
    expect(dup.status).toBe(409);
    const bad = await jobsRoute.POST(req('POST', '/api/jobs', { name: '../evil', job_config: config }), ctx({}));
    expect(bad.status).toBe(400);
    const badCfg = await jobsRoute.POST(req('POST', '/api/jobs', { name: 'x2', job_config: { nope: 1 } }), ctx({}));
    expect((await badCfg.json()).message).toMatch(/job_config must look like/);

    const list = await (await jobsRoute.GET(req('GET', '/api/jobs?job_type=inference'), ctx({}))).json();
    expect(list.jobs.map((j: { id: string }) => j.id)).toEqual([job.id]);

    const started = await (await startRoute.POST(req('POST', `/api/jobs/${job.id}/start`), ctx({ id: job.id }))).json();
    expect(started.job.status).toBe('queued');
    expect((await startRoute.POST(req('POST', `/api/jobs/${job.id}/start`), ctx({ id: job.id }))).status).toBe(409);
    // running: delete refused, stop sets the flag
    getDb().$client.prepare(`UPDATE "Job" SET status='running', pid=1 WHERE id=?`).run(job.id);
    expect((await jobRoute.DELETE(req('DELETE', `/api/jobs/${job.id}`), ctx({ id: job.id }))).status).toBe(409);
    const stopping = await (await stopRoute.POST(req('POST', `/api/jobs/${job.id}/stop`), ctx({ id: job.id }))).json();
    expect(stopping.job).toMatchObject({ status: 'stopping', stop: 1 });
    getDb().$client.prepare(`UPDATE "Job" SET status='stopped', pid=NULL WHERE id=?`).run(job.id);
    expect((await jobRoute.DELETE(req('DELETE', `/api/jobs/${job.id}`), ctx({ id: job.id }))).status).toBe(200);
    expect((await jobRoute.GET(req('GET', `/api/jobs/${job.id}`), ctx({ id: job.id }))).status).toBe(404);
  });

  it('a queued job stops at once', async () => {
    const config = { job: 'extension', config: { process: [{ type: 'Generate' }] } };
    const { job } = await (await jobsRoute.POST(req('POST', '/api/jobs', { name: 'gen1', gpu_ids: '0', job_config: config }), ctx({}))).json();
    await startRoute.POST(req('POST', '/'), ctx({ id: job.id }));
    const res = await (await stopRoute.POST(req('POST', '/'), ctx({ id: job.id }))).json();
    expect(res.job.status).toBe('stopped');
  });

  it('serves the log tail, with an engine token redacted', async () => {
    const config = { job: 'extension', config: { process: [{ type: 'InferenceEngine' }] } };
    const { job } = await (await jobsRoute.POST(req('POST', '/api/jobs', { name: 'eng_log', job_type: 'inference', job_config: config }), ctx({}))).json();
    const token = 'tok-0123456789abcdef';
    writeEngineJson('eng_log', { port: 1, token, pid: process.pid });
    fs.writeFileSync(path.join(process.env.AITK_TRAINING_FOLDER as string, 'eng_log', 'log.txt'), `line 1\nprogress 10%\rprogress 50%\nendpoint token=${token}\n`);
    const { log } = await (await logRoute.GET(req('GET', `/api/jobs/${job.id}/log`), ctx({ id: job.id }))).json();
    expect(log).toBe('line 1\nprogress 50%\nendpoint token=<engine token>');
  });
});

describe('files API', () => {
  it('serves a file under the training folder, with ranges, and refuses engine.json and escapes', async () => {
    const folder = path.join(process.env.AITK_TRAINING_FOLDER as string, 'eng', 'outputs');
    fs.mkdirSync(folder, { recursive: true });
    fs.writeFileSync(path.join(folder, 'a.png'), Buffer.from('0123456789'));
    writeEngineJson('eng', { port: 1, token: 'secret-token', pid: 1 });

    const res = await filesRoute.GET(req('GET', '/api/files/eng/outputs/a.png'), ctx({ path: ['eng', 'outputs', 'a.png'] }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(await res.text()).toBe('0123456789');

    const part = await filesRoute.GET(req('GET', '/x', undefined, { range: 'bytes=2-4' }), ctx({ path: ['eng', 'outputs', 'a.png'] }));
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 2-4/10');
    expect(await part.text()).toBe('234');

    expect((await filesRoute.GET(req('GET', '/x'), ctx({ path: ['eng', 'engine.json'] }))).status).toBe(403);
    expect((await filesRoute.GET(req('GET', '/x'), ctx({ path: ['..', '..', 'etc', 'passwd'] }))).status).toBe(400);
    expect((await filesRoute.GET(req('GET', '/x'), ctx({ path: ['eng', 'outputs', 'nope.png'] }))).status).toBe(404);

    expect((await filesRoute.DELETE(req('DELETE', '/x'), ctx({ path: ['eng', 'engine.json'] }))).status).toBe(403);
    expect((await filesRoute.DELETE(req('DELETE', '/x'), ctx({ path: ['eng', 'outputs', 'a.png'] }))).status).toBe(200);
    expect(fs.existsSync(path.join(folder, 'a.png'))).toBe(false);
  });
});
