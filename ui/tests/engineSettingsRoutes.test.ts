// The engine settings routes against the engine's real Python (no engine running): the description,
// the check (a 422 naming the key), and saving into the job's config with the UI-owned keys kept.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as describeRoute from '@/app/api/engine-settings/route';
import * as checkRoute from '@/app/api/engine-settings/check/route';
import * as settingsRoute from '@/app/api/jobs/[id]/settings/route';
import { findJob } from '@/server/jobs';
import { insertJob, useTempEnv } from './helpers';

let env: ReturnType<typeof useTempEnv>;
beforeAll(() => {
  env = useTempEnv('settings');
});
afterAll(() => env.cleanup());

const ctx = (id: string) => ({ params: Promise.resolve({ id }) });
const req = (method: string, body?: unknown) =>
  new Request('http://localhost/api/x', { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
const engineOf = (id: string) => JSON.parse(findJob(id)!.job_config).config.process[0].engine;

describe('GET /api/engine-settings', () => {
  it('serves the engine description, less the keys the UI fills in', async () => {
    const res = await describeRoute.GET(req('GET'), ctx(''));
    expect(res.status).toBe(200);
    const { fields } = await res.json();
    expect(fields.lora_folder).toEqual({ type: 'str', nullable: true, doc: 'where relative LoRA paths point' });
    expect(fields.limits.fields.max_steps.min).toBe(1);
    expect(fields).not.toHaveProperty('job_folder');
  });
});

describe('POST /api/engine-settings/check', () => {
  it('passes a good block and names the key of a bad one', async () => {
    const ok = await checkRoute.POST(req('POST', { engine: { model_folders: [env.dir] } }), ctx(''));
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ ok: true });
    const bad = await checkRoute.POST(req('POST', { engine: { comfyui_path: env.dir } }), ctx(''));
    expect(bad.status).toBe(422);
    const body = await bad.json();
    expect(body.key).toBe('engine.comfyui_path');
    expect(body.message).toMatch(/^engine\.comfyui_path: must be a ComfyUI install/);
  });

  it('refuses a body without an engine object with a 400 naming it', async () => {
    const res = await checkRoute.POST(req('POST', { engine: [1] }), ctx(''));
    expect(res.status).toBe(400);
    expect((await res.json()).message).toMatch(/^engine: must be an object/);
  });
});

describe('GET/PUT /api/jobs/<id>/settings', () => {
  it('reads the block, saves a checked one into the job config, keeps the UI-owned keys', async () => {
    const job = insertJob({
      name: 'eng_settings',
      status: 'stopped',
      job_config: JSON.stringify({ job: 'extension', config: { name: 'eng_settings', process: [{ type: 'InferenceEngine', engine: { job_folder: '/x', max_batch: 2 } }] } }),
    });
    const got = await settingsRoute.GET(req('GET'), ctx(job.id));
    expect((await got.json()).engine).toEqual({ max_batch: 2 });

    const loras = path.join(env.dir, 'loras');
    fs.mkdirSync(loras);
    const put = await settingsRoute.PUT(req('PUT', { engine: { lora_folder: loras, limits: { max_steps: 40 } } }), ctx(job.id));
    expect(put.status).toBe(200);
    expect((await put.json()).engine).toEqual({ lora_folder: loras, limits: { max_steps: 40 } });
    const saved = engineOf(job.id);
    expect(saved.lora_folder).toBe(loras);
    expect(saved.job_folder).toBe(path.join(process.env.AITK_TRAINING_FOLDER as string, 'eng_settings'));
    expect(saved).not.toHaveProperty('max_batch');
  });

  it('a refused block is a 422 naming the key, and the config stays as it was', async () => {
    const job = insertJob({ name: 'eng_refused', status: 'running' });
    const before = findJob(job.id)!.job_config;
    const res = await settingsRoute.PUT(req('PUT', { engine: { lora_folder: path.join(env.dir, 'missing') } }), ctx(job.id));
    expect(res.status).toBe(422);
    const body = await res.json();
    expect(body).toMatchObject({ error: 'bad_setting', key: 'engine.lora_folder' });
    expect(body.message).toContain('engine.lora_folder: must be an existing folder');
    expect(findJob(job.id)!.job_config).toBe(before);
  });

  it('a job that runs no engine has no settings (400); an unknown one is a 404', async () => {
    const train = insertJob({ name: 'a_training', job_type: 'train', job_config: JSON.stringify({ job: 'extension', config: { process: [{ type: 'Generate' }] } }) });
    const res = await settingsRoute.GET(req('GET'), ctx(train.id));
    expect(res.status).toBe(400);
    expect((await res.json()).error).toBe('not_an_engine');
    expect((await settingsRoute.PUT(req('PUT', { engine: {} }), ctx(train.id))).status).toBe(400);
    expect((await settingsRoute.GET(req('GET'), ctx('nope'))).status).toBe(404);
  });
});
