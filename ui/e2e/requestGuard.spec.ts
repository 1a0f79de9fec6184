// The UI obeys its own pages only (src/proxy.ts, src/server/requestGuard.ts), against the real
// running server: another page's request (a foreign Origin, Referer, `Origin: null`) and a
// DNS-rebinding page (a foreign Host) get 403 on every route family, a text/plain JSON body gets 415,
// with AI_TOOLKIT_AUTH on too; and the UI's own pages, a bookmark and a large upload still work.
import http from 'node:http';
import { chromium, expect, test } from '@playwright/test';

const PORT = Number(process.env.AITK_E2E_PORT);
const AUTH_PORT = Number(process.env.AITK_E2E_AUTH_PORT);
const TOKEN = process.env.AITK_E2E_AUTH_TOKEN as string;
const EVIL = 'http://evil.example';
const ENGINE = { job: 'extension', config: { process: [{ type: 'InferenceEngine', engine: {} }] } };

interface Answer {
  status: number;
  body: { error?: string; message?: string } & Record<string, unknown>;
}

/** One request with exactly these headers (node:http: Playwright's client would set Host itself). */
function raw(port: number, method: string, path: string, headers: Record<string, string>, body?: string | Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: { host: `127.0.0.1:${port}`, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let parsed: Answer['body'] = {};
        try {
          parsed = JSON.parse(text);
        } catch {
          // a page or a file
        }
        resolve({ status: res.statusCode as number, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function jobNames(port = PORT, auth?: string): Promise<string[]> {
  const res = await raw(port, 'GET', '/api/jobs', auth ? { authorization: `Bearer ${auth}` } : {});
  expect(res.status).toBe(200);
  return (res.body.jobs as { name: string }[]).map((j) => j.name);
}

let target: { id: string; name: string };

test.beforeAll(async () => {
  // made once (a worker that starts again after a failure finds it)
  const made = await raw(PORT, 'POST', '/api/jobs', { 'content-type': 'application/json' }, JSON.stringify({ name: 'e2e_guard_target', gpu_ids: 'cpu', job_type: 'inference', job_config: ENGINE }));
  expect([201, 409]).toContain(made.status);
  const jobs = (await raw(PORT, 'GET', '/api/jobs', {})).body.jobs as { id: string; name: string }[];
  target = jobs.find((j) => j.name === 'e2e_guard_target') as { id: string; name: string };
});

/** One request per route family: [method, path, content type, body]. */
function families(): [string, string, string | null, string | Buffer | undefined][] {
  const jobJson = JSON.stringify({ name: 'e2e_guard_foreign', gpu_ids: 'cpu', job_type: 'inference', job_config: ENGINE });
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 8, 0, 0, 0, 8, 8, 2, 0, 0, 0, 0, 0, 0, 0]);
  return [
    ['GET', '/api/jobs', null, undefined],
    ['POST', '/api/jobs', 'application/json', jobJson],
    ['GET', `/api/jobs/${target.id}`, null, undefined],
    ['DELETE', `/api/jobs/${target.id}`, null, undefined],
    ['POST', `/api/jobs/${target.id}/start`, null, undefined],
    ['POST', `/api/jobs/${target.id}/stop`, null, undefined],
    ['GET', `/api/jobs/${target.id}/log`, null, undefined],
    ['GET', '/api/inference/queue?job=auto', null, undefined],
    ['POST', '/api/inference/generate?job=auto', 'application/json', JSON.stringify({ model: { arch: 'zimage' }, sample: { prompt: 'x' } })],
    ['POST', '/api/inference/assets?name=a.png&job=auto', 'image/png', png],
    ['GET', '/api/history', null, undefined],
    ['DELETE', '/api/history/some-key', null, undefined],
    ['GET', '/api/history/models', null, undefined],
    ['POST', `/api/grids?job=${target.id}`, 'image/png', png],
    ['GET', `/api/files/${target.name}/config.yaml`, null, undefined],
    ['GET', '/api/engines', null, undefined],
    ['GET', '/api/gpus', null, undefined],
    ['GET', '/generate', null, undefined],
    ['GET', '/jobs', null, undefined],
  ];
}

function foreignCases(port: number): { name: string; headers: Record<string, string>; code: string }[] {
  return [
    { name: 'foreign Origin', headers: { origin: EVIL }, code: 'foreign_origin' },
    { name: 'Origin: null', headers: { origin: 'null' }, code: 'foreign_origin' },
    { name: 'another port of this host', headers: { origin: `http://127.0.0.1:${port + 1}` }, code: 'foreign_origin' },
    { name: 'foreign Referer', headers: { referer: `${EVIL}/page.html` }, code: 'foreign_origin' },
    { name: 'Sec-Fetch-Site: cross-site', headers: { 'sec-fetch-site': 'cross-site' }, code: 'foreign_origin' },
    { name: 'foreign Host', headers: { host: `evil.example:${port}` }, code: 'foreign_host' },
    { name: 'foreign Host, no port', headers: { host: 'evil.example' }, code: 'foreign_host' },
    { name: 'foreign Host and its own Origin (a rebinding page)', headers: { host: `evil.example:${port}`, origin: `http://evil.example:${port}` }, code: 'foreign_host' },
  ];
}

test('every route family refuses another page (Origin, Referer, null) and a foreign Host with 403', async () => {
  for (const c of foreignCases(PORT)) {
    for (const [method, path, type, body] of families()) {
      const res = await raw(PORT, method, path, { ...(type ? { 'content-type': type } : {}), ...c.headers }, body);
      expect(res.status, `${c.name}: ${method} ${path}`).toBe(403);
      expect(res.body, `${c.name}: ${method} ${path}`).toMatchObject({ error: c.code, message: expect.any(String) });
    }
  }
  // nothing happened: no job made, the target neither started nor deleted
  expect(await jobNames()).not.toContain('e2e_guard_foreign');
  const after = await raw(PORT, 'GET', `/api/jobs/${target.id}`, {});
  expect(after.body.job).toMatchObject({ status: 'stopped' });
});

test('the probe: a text/plain JSON POST is 415 (403 from another page), and makes no job', async () => {
  const body = JSON.stringify({ name: 'e2e_guard_plain', gpu_ids: 'cpu', job_type: 'inference', job_config: ENGINE });
  const plain = await raw(PORT, 'POST', '/api/jobs', { 'content-type': 'text/plain' }, body);
  expect(plain.status).toBe(415);
  expect(plain.body).toMatchObject({ error: 'unsupported_media_type', message: expect.stringContaining('application/json') });
  for (const type of ['application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
    expect((await raw(PORT, 'POST', '/api/jobs', { 'content-type': type }, body)).status, type).toBe(415);
  }
  expect((await raw(PORT, 'POST', '/api/inference/generate?job=auto', { 'content-type': 'text/plain' }, '{}')).status).toBe(415);
  expect((await raw(PORT, 'POST', `/api/grids?job=${target.id}`, { 'content-type': 'text/plain' }, 'x')).status).toBe(415);
  const probe = await raw(PORT, 'POST', '/api/jobs', { 'content-type': 'text/plain', origin: EVIL }, body);
  expect(probe.status).toBe(403);
  expect(await jobNames()).not.toContain('e2e_guard_plain');
});

test('with AI_TOOLKIT_AUTH on: the right token does not let another page in', async () => {
  const auth = { authorization: `Bearer ${TOKEN}` };
  for (const c of foreignCases(AUTH_PORT)) {
    for (const [method, path, type, body] of families()) {
      const res = await raw(AUTH_PORT, method, path, { ...auth, ...(type ? { 'content-type': type } : {}), ...c.headers }, body);
      expect(res.status, `${c.name}: ${method} ${path}`).toBe(403);
      expect(res.body.error).toBe(c.code);
    }
  }
  const plain = await raw(AUTH_PORT, 'POST', '/api/jobs', { ...auth, 'content-type': 'text/plain' }, JSON.stringify({ name: 'e2e_guard_auth', job_config: ENGINE }));
  expect(plain.status).toBe(415);
  // its own origin with the token: served; without the token: 401 still
  expect((await raw(AUTH_PORT, 'GET', '/api/jobs', { ...auth, origin: `http://127.0.0.1:${AUTH_PORT}` })).status).toBe(200);
  expect((await raw(AUTH_PORT, 'GET', '/api/jobs', { origin: `http://127.0.0.1:${AUTH_PORT}` })).status).toBe(401);
  expect(await jobNames(AUTH_PORT, TOKEN)).not.toContain('e2e_guard_auth');
});

test('its own pages still work: a bookmark, loopback names, the page fetches, a 12 MiB upload whole', async ({ page }) => {
  // a bookmark or a typed address: no Origin, no Referer
  for (const host of [`127.0.0.1:${PORT}`, `localhost:${PORT}`, `[::1]:${PORT}`, 'localhost']) {
    expect((await raw(PORT, 'GET', '/jobs', { host })).status, host).toBe(200);
    expect((await raw(PORT, 'GET', '/api/jobs', { host, origin: `http://${host}` })).status, host).toBe(200);
  }
  const nav = await page.goto('/jobs');
  expect(nav?.status()).toBe(200);
  await expect(page.getByTestId('jobs-table')).toBeVisible();

  // the browser's own same-origin requests (Chromium sends Origin on a POST): served
  const made = await page.evaluate(async (config) => {
    const res = await fetch('/api/jobs', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'e2e_guard_own', gpu_ids: 'cpu', job_type: 'inference', job_config: config }),
    });
    return res.status;
  }, ENGINE);
  expect(made).toBe(201);
  expect(await jobNames()).toContain('e2e_guard_own');

  // a grid PNG past Next's default 10 MB proxy body buffer arrives whole
  const saved = await page.evaluate(async (jobId) => {
    const bytes = new Uint8Array(12 * 1024 * 1024);
    bytes.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 8, 0, 0, 0, 8, 8, 2]);
    const res = await fetch(`/api/grids?job=${jobId}`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: bytes });
    return { status: res.status, body: await res.json() };
  }, target.id);
  expect(saved.status).toBe(201);
  expect(saved.body.bytes).toBe(12 * 1024 * 1024);
});

test('in a real browser: a page on another origin cannot create a job; a rebinding name gets 403', async ({ page }) => {
  // localhost:PORT is another origin than 127.0.0.1:PORT: its page POSTs a "simple" request across
  await page.goto(`http://localhost:${PORT}/jobs`);
  await expect(page.getByTestId('jobs-table')).toBeVisible();
  await page.evaluate(async ({ port, config }) => {
    await fetch(`http://127.0.0.1:${port}/api/jobs`, {
      method: 'POST',
      mode: 'no-cors',
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({ name: 'e2e_guard_csrf', gpu_ids: 'cpu', job_type: 'inference', job_config: config }),
    });
  }, { port: PORT, config: ENGINE });
  expect(await jobNames()).not.toContain('e2e_guard_csrf');

  // DNS rebinding: the browser resolves evil.example to this machine and asks for the UI under that name
  const browser = await chromium.launch({
    executablePath: process.env.AITK_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--host-resolver-rules=MAP evil.example 127.0.0.1'],
  });
  try {
    const rebound = await browser.newPage();
    const res = await rebound.goto(`http://evil.example:${PORT}/api/jobs`);
    expect(res?.status()).toBe(403);
    expect(await res?.json()).toMatchObject({ error: 'foreign_host' });
    expect((await rebound.goto(`http://evil.example:${PORT}/jobs`))?.status()).toBe(403);
  } finally {
    await browser.close();
  }
});
