// The history is kept by the server: the UI worker follows the engine's results feed, so a result
// reaches the gallery whoever asked for it. A request left running by a tab that closed ("keep
// generating") is in the history of a fresh browser context, and so is one made by calling the
// engine's A1111 route directly; an open gallery shows both without a reload.
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from '@playwright/test';
import { TRAINING_FOLDER } from './env';
import { fillNumber, galleryItems, shot, startEngineOnPage, stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const JOB = 'inference_engine_history_server';
// long enough that the tab is closed while it samples (asserted below, not assumed)
const LONG = 400;

interface QueueReq {
  request_id: string;
  prompt: string;
  status: string;
}

test('results made by a closed tab and through /sdapi/v1/txt2img reach the history', async ({ page, browser, baseURL }) => {
  const { job } = await startEngineOnPage(page, JOB);
  const fresh = await (await browser.newContext({ baseURL })).newPage();
  const queue = async () => (await (await fresh.request.get(`/api/inference/queue?job=${job.id}`)).json()) as { running: QueueReq | null; queued: QueueReq[]; finished: QueueReq[] };
  const gallery = fresh.getByTestId('gallery-item');
  let requestId = '';

  await test.step('1. a request with "keep generating" on; its tab closes while it samples', async () => {
    await page.getByTestId('arch-select').selectOption('zimage');
    await page.getByTestId('name-or-path').fill('tiny:zimage');
    await page.getByTestId('prompt').fill('made by a closed tab');
    await fillNumber(page, 'width', 64);
    await fillNumber(page, 'height', 64);
    await fillNumber(page, 'steps', LONG);
    await expect(page.getByTestId('detach').locator('input')).toBeChecked();
    await page.getByTestId('generate-button').click();
    await expect(page.getByTestId('progress-text')).toHaveAttribute('data-phase', 'running', { timeout: 120_000 }); // the engine took it
    await page.close();
    // not ended (queued or sampling): no page is there to save its result
    const q = await queue();
    const live = [q.running, ...q.queued].find((r) => r?.prompt === 'made by a closed tab');
    expect(live, JSON.stringify(q)).toBeTruthy();
    requestId = live!.request_id;
  });

  await test.step('2. a fresh browser context opened meanwhile shows it once it ends, without a reload', async () => {
    await fresh.goto('/generate');
    expect(await fresh.evaluate(() => window.localStorage.length)).toBe(0);
    await expect(gallery.filter({ hasText: 'made by a closed tab' })).toHaveCount(1, { timeout: 180_000 });
    expect((await queue()).finished.find((r) => r.request_id === requestId)?.status).toBe('ok');
    const [item] = await galleryItems(fresh, '&q=made%20by%20a%20closed%20tab');
    // written by the UI worker from the engine's feed: the page's X-Client made its source the page's
    expect(item).toMatchObject({ requestId, jobName: JOB, model: { arch: 'zimage', name_or_path: 'tiny:zimage' }, source: 'ui' });
    expect(item.key).toBe(`${requestId}/${item.result.relpath}`);
    expect(item.sample).toMatchObject({ prompt: 'made by a closed tab', num_inference_steps: LONG, width: 64, height: 64 });
    expect(item.timings!.run_s!).toBeGreaterThan(0);
    expect(item.timings!.total_s!).toBeGreaterThanOrEqual(item.timings!.run_s!);
    expect(fs.existsSync(path.join(TRAINING_FOLDER, JOB, 'outputs', item.result.relpath))).toBe(true);
    await shot(fresh, '45-history-closed-tab');
  });

  await test.step('3. a call to the engine itself (A1111 /sdapi/v1/txt2img, its token from engine.json) is in the gallery shown', async () => {
    const engine = JSON.parse(fs.readFileSync(path.join(TRAINING_FOLDER, JOB, 'engine.json'), 'utf8')) as { host: string; port: number; token: string };
    const res = await fresh.request.post(`http://${engine.host}:${engine.port}/sdapi/v1/txt2img`, {
      headers: { 'x-engine-token': engine.token },
      data: { prompt: 'made through sdapi', steps: 2, width: 64, height: 64, seed: 4321, batch_size: 2 },
      timeout: 180_000,
    });
    expect(res.status()).toBe(200);
    expect((await res.json()).images).toHaveLength(2);
    const made = gallery.filter({ hasText: 'made through sdapi' });
    await expect(made).toHaveCount(2); // one per image, in the page already open
    const items = await galleryItems(fresh, '&q=made%20through%20sdapi');
    expect(items.map((i) => i.result.seed).sort()).toEqual([4321, 4322]);
    expect(new Set(items.map((i) => i.requestId)).size).toBe(1);
    expect(items[0]).toMatchObject({ jobName: JOB, sample: { prompt: 'made through sdapi', num_inference_steps: 2 } });
    await expect.poll(() => made.first().getByTestId('gallery-media').evaluate((el) => (el as HTMLImageElement).naturalWidth)).toBe(64);
    // who asked: the badge, and the source filter shows these two alone
    expect(items[0].source).toBe('a1111');
    await expect(made.first().getByTestId('gallery-source-badge')).toHaveText('A1111 API');
    await expect(gallery.filter({ hasText: 'made by a closed tab' }).getByTestId('gallery-source-badge')).toHaveCount(0);
    await fresh.getByTestId('gallery-source').selectOption('a1111');
    await expect(gallery).toHaveCount(2);
    await expect(gallery.filter({ hasText: 'made through sdapi' })).toHaveCount(2);
    await shot(fresh, '46-history-sdapi');
    await fresh.getByTestId('gallery-source').selectOption('');
    await expect(gallery.filter({ hasText: 'made by a closed tab' })).toHaveCount(1);
  });

  await test.step('3b. a stable-diffusion.cpp job (/sdcpp/v1/img_gen, polled to its end) is in the gallery, marked sd.cpp', async () => {
    const engine = JSON.parse(fs.readFileSync(path.join(TRAINING_FOLDER, JOB, 'engine.json'), 'utf8')) as { host: string; port: number; token: string };
    const base = `http://${engine.host}:${engine.port}/sdcpp/v1`;
    const headers = { authorization: `Bearer ${engine.token}` };
    const res = await fresh.request.post(`${base}/img_gen`, { headers, data: { prompt: 'made through sdcpp', width: 64, height: 64, seed: 99, sample_params: { sample_steps: 2 } } });
    expect(res.status()).toBe(202);
    const { id } = (await res.json()) as { id: string };
    await expect.poll(async () => ((await (await fresh.request.get(`${base}/jobs/${id}`, { headers })).json()) as { status: string }).status, { timeout: 120_000 }).toBe('completed');
    await fresh.getByTestId('gallery-source').selectOption('');
    const made = gallery.filter({ hasText: 'made through sdcpp' });
    await expect(made).toHaveCount(1);
    await expect(made.getByTestId('gallery-source-badge')).toHaveText('sd.cpp API');
  });

  await test.step('4. nothing twice: each result is one row', async () => {
    const all = await galleryItems(fresh);
    const keys = all.map((i) => i.key);
    expect(new Set(keys).size).toBe(keys.length);
    expect(all.filter((i) => i.requestId === requestId)).toHaveLength(1);
  });

  await test.step('5. the library says how often the model made results, and who asked', async () => {
    await fresh.goto(`/library?job=${job.id}`);
    // the loaded model's row and the tiny one are the same model: both say it
    const used = fresh.locator('[data-testid=library-entry][data-name="tiny:zimage"]').getByTestId('library-entry-used');
    await expect(used).toHaveCount(2, { timeout: 60_000 });
    // other specs' results of the same tiny model count too (one history): the count is theirs as well
    for (const row of await used.all()) await expect(row).toHaveText(/^used \d+× via (?=.*A1111 API)(?=.*sd\.cpp API)(?=.*Generate page)/);
  });

  expect((await fresh.request.post(`/api/jobs/${job.id}/stop`)).ok()).toBe(true);
  await expect.poll(async () => (await (await fresh.request.get(`/api/jobs/${job.id}`)).json()).job.pid ?? null, { timeout: 60_000 }).toBeNull();
  await fresh.context().close();
});
