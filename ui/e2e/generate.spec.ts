// The Generate page end to end, against the real engine on the tiny zimage model:
// start the engine from the page, generate with a live latent preview, find the result in the
// gallery, cancel a second run mid-way, stop the engine. Then input images on tiny sd1 (img2img,
// a painted inpaint mask, a batch), reference slots, a sampler, and settings from a dropped file;
// LoRAs from the engine's lora_folder, applied without reloading the model.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { encodePng } from '../src/components/generate/maskPng';
import { E2E_DIR, TRAINING_FOLDER } from './env';
import { dropFile, ENGINE_START_MS, fillNumber, setRange, galleryItems, shot, startEngineOnPage, type HistoryItem as StoredItem, widerThanWindow, stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const ENGINE_JOB = 'inference_engine_cpu';
// long runs (to cancel, to block, to kill) must still be sampling seconds later, on any machine
const LONG = 1000;
const stepOfLong = /Step (\d+)\/1000/;
const pastStep2OfLong = /Step ([2-9]|\d\d+)\/1000/;

interface CanvasSample {
  step: string;
  width: number;
  height: number;
  pixels: number[];
}

interface JobRow {
  id: string;
  name: string;
  status: string;
  info: string;
  pid: number | null;
}

async function engineJob(page: Page): Promise<JobRow | undefined> {
  const res = await page.request.get('/api/jobs?job_type=inference');
  expect(res.ok()).toBe(true);
  return ((await res.json()).jobs as JobRow[]).find((j) => j.name === ENGINE_JOB);
}

/** Record the canvas pixels each time the page draws a new latent step (data-step changes). */
async function recordCanvas(page: Page) {
  await page.evaluate(() => {
    const canvas = document.querySelector('[data-testid=preview-canvas]') as HTMLCanvasElement;
    const w = window as unknown as { __canvasSamples: unknown[]; __canvasObserver?: MutationObserver };
    w.__canvasObserver?.disconnect();
    w.__canvasSamples = [];
    w.__canvasObserver = new MutationObserver(() => {
      const ctx = canvas.getContext('2d') as CanvasRenderingContext2D;
      const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      w.__canvasSamples.push({ step: canvas.dataset.step, width: canvas.width, height: canvas.height, pixels: Array.from(data) });
    });
    w.__canvasObserver.observe(canvas, { attributes: true, attributeFilter: ['data-step'] });
  });
}

async function canvasSamples(page: Page): Promise<CanvasSample[]> {
  return page.evaluate(() => (window as unknown as { __canvasSamples: CanvasSample[] }).__canvasSamples);
}

test('Generate page: engine start, live preview, gallery, cancel, engine stop', async ({ page }) => {
  page.on('console', (msg) => {
    if (msg.type() === 'error') console.log(`[browser] ${msg.text()}`);
  });

  await test.step('1. start the engine from the page; its job row turns running', async () => {
    await page.goto('/generate');
    const strip = page.getByTestId('engine-strip');
    await expect(strip).toHaveAttribute('data-state', 'none');
    await expect(page.getByTestId('models-missing')).toBeVisible();
    await page.getByTestId('engine-start').click();
    await expect(strip).toHaveAttribute('data-state', /queued|starting|ready/);
    await shot(page, '01-engine-starting');
    await expect(strip).toHaveAttribute('data-state', 'ready', { timeout: ENGINE_START_MS });
    await expect(page.getByTestId('engine-health')).toContainText('Pool:');
    expect((await engineJob(page))?.status).toBe('running');
    expect(fs.existsSync(path.join(TRAINING_FOLDER, ENGINE_JOB, 'engine.json'))).toBe(true);

    // the jobs page shows it as the inference engine, linking to /generate
    await page.goto('/jobs');
    const row = page.getByTestId(`job-row-${ENGINE_JOB}`);
    await expect(row).toHaveAttribute('data-status', 'running');
    await expect(row).toContainText('Inference engine');
    await shot(page, '02-jobs-page-running');

    // its log can be viewed; the engine's token never reaches the browser
    const { token } = JSON.parse(fs.readFileSync(path.join(TRAINING_FOLDER, ENGINE_JOB, 'engine.json'), 'utf8')) as { token: string };
    await row.getByRole('link', { name: 'Log' }).click();
    await expect(page.getByTestId('job-log')).toContainText('inference engine listening');
    expect(await page.content()).not.toContain(token);
    expect((await page.request.get(`/api/files/${ENGINE_JOB}/engine.json`)).status()).toBe(403);
    await page.goto('/jobs');
    await row.getByRole('link', { name: 'Inference engine' }).click();
    await expect(page).toHaveURL(/\/generate\?job=/);
    await expect(page.getByTestId('engine-strip')).toHaveAttribute('data-state', 'ready');
    await expect(page.getByTestId('arch-select')).toBeVisible();
    expect(await page.content()).not.toContain(token);
  });

  await test.step('2. generate: the canvas pixels change between latent frames', async () => {
    // the arch list comes from the engine's /models
    const models = await (await page.request.get('/api/inference/models')).json();
    const archNames = (models.archs as { name: string }[]).map((a) => a.name);
    const select = page.getByTestId('arch-select');
    await expect(select).toBeVisible();
    await expect(select.locator('option')).toHaveCount(archNames.length);
    await select.selectOption('zimage');
    await page.getByTestId('name-or-path').fill('tiny:zimage');
    await page.getByTestId('prompt').fill('a red fox in fresh snow');
    // a width the arch refuses is never changed behind the person's back: the field keeps 70, a
    // note says why, Generate (and Ctrl+Enter) stays off until the offered fix (or a typed value)
    await fillNumber(page, 'width', 70);
    await expect(page.getByTestId('width')).toHaveValue('70');
    await expect(page.getByTestId('note-width')).toContainText('70 is not a multiple of 16');
    await expect(page.getByTestId('width')).toHaveAttribute('aria-invalid', 'true');
    await expect(page.getByTestId('generate-button')).toBeDisabled();
    await expect(page.getByTestId('why-not')).toContainText('Fix this field first');
    await page.getByTestId('width').press('Control+Enter');
    await expect(page.getByTestId('gen-message')).toHaveCount(0);
    await page.getByTestId('fix-width').click();
    await expect(page.getByTestId('width')).toHaveValue('64');
    await expect(page.getByTestId('note-width')).toHaveCount(0);
    await fillNumber(page, 'height', 64);
    // 24 steps: latent frames are newest-only, and 8 fast steps could end before the page drew a second one
    await fillNumber(page, 'steps', 24);
    await fillNumber(page, 'seed', 42);
    // this engine has no LoRA folder: the picker says how to set one; a typed path still goes out
    await expect(page.getByTestId('lora-empty')).toContainText('engine.lora_folder');
    // a request the engine refuses (4xx) is explained on the page
    await page.getByLabel('LoRA path').fill('/nonexistent/lora.safetensors');
    await page.getByTestId('lora-path-add').click();
    await expect(page.getByTestId('lora-pick')).toHaveAttribute('data-path', '/nonexistent/lora.safetensors');
    await page.getByTestId('generate-button').click();
    await expect(page.getByTestId('gen-message')).toContainText('HTTP 422');
    await expect(page.getByTestId('gen-message')).toContainText(/model\.lora/);
    await shot(page, '03a-engine-refused');
    await page.getByTestId('lora-remove').click();
    await expect(page.getByTestId('lora-pick')).toHaveCount(0);
    await recordCanvas(page);
    await page.getByTestId('generate-button').click();
    const progress = page.getByTestId('progress-text');
    await expect(progress).toHaveAttribute('data-phase', 'done', { timeout: 180_000 });
    await expect(page.getByTestId('gen-message')).toContainText('Done');
    await expect(progress).toContainText('Step 24/24');

    const samples = await canvasSamples(page);
    const steps = samples.map((s) => s.step);
    expect(new Set(steps).size, `latent steps drawn: ${steps}`).toBeGreaterThanOrEqual(2);
    expect(samples.every((s) => s.width === 8 && s.height === 8)).toBe(true); // 64 px / VAE scale 8
    const changed = samples.slice(1).filter((s, i) => s.pixels.some((v, k) => v !== samples[i].pixels[k]));
    expect(changed.length, 'canvas pixels changed between latent frames').toBeGreaterThanOrEqual(1);
    const opaque = samples[samples.length - 1].pixels.filter((_, k) => k % 4 === 3).every((a) => a === 255);
    expect(opaque).toBe(true);
    await shot(page, '03-generated');
  });

  await test.step('3. the result is in the gallery and its file loads', async () => {
    const item = page.getByTestId('gallery-item').first();
    await expect(item).toBeVisible();
    await expect(item).toHaveAttribute('data-kind', 'image');
    await expect(item).toContainText('a red fox in fresh snow');
    await expect(item).toContainText('seed 42');
    const img = item.getByTestId('gallery-media');
    await expect.poll(() => img.evaluate((el) => (el as HTMLImageElement).naturalWidth)).toBe(64);
    const src = (await img.getAttribute('src')) as string;
    const file = await page.request.get(src);
    expect(file.status()).toBe(200);
    expect(file.headers()['content-type']).toBe('image/png');
    expect((await file.body()).subarray(1, 4).toString()).toBe('PNG');
    // the gallery survives a reload
    await page.reload();
    await expect(page.getByTestId('gallery-item')).toHaveCount(1);
    await shot(page, '04-gallery');
  });

  await test.step('3b. video and audio: frame scrubber, heatmap, players; delete and reuse', async () => {
    // video: wan21 with 9 frames -> a BCFHW latent with several frames and a scrubber
    await page.getByTestId('arch-select').selectOption('wan21');
    await page.getByTestId('name-or-path').fill('tiny:wan21');
    await fillNumber(page, 'width', 64);
    await fillNumber(page, 'height', 64);
    await fillNumber(page, 'steps', 2);
    await page.getByLabel('Frames', { exact: true }).fill('9');
    await page.getByTestId('generate-button').click();
    await expect(page.getByTestId('progress-text')).toHaveAttribute('data-phase', 'done', { timeout: 180_000 });
    // the latent's frames were drawn (its scrubber stays, hidden under the result); the finished video plays in the preview
    await expect(page.getByLabel('Video frame')).toBeAttached();
    await expect(page.getByTestId('final-result')).toHaveAttribute('data-kind', 'video');
    await expect.poll(() => page.getByTestId('final-media').evaluate((el) => (el as HTMLVideoElement).readyState)).toBeGreaterThanOrEqual(1);
    expect(await page.getByTestId('final-media').evaluate((el) => el.tagName === 'VIDEO' && (el as HTMLVideoElement).controls)).toBe(true);
    const video = page.getByTestId('gallery-item').first();
    await expect(video).toHaveAttribute('data-kind', 'video');
    await expect.poll(() => video.locator('video').evaluate((el) => (el as HTMLVideoElement).readyState)).toBeGreaterThanOrEqual(1);
    await shot(page, '04b-video');

    // audio: ace_step -> a BLC latent drawn as a channel x time heatmap
    await page.getByTestId('arch-select').selectOption('ace_step');
    await page.getByTestId('name-or-path').fill('tiny:ace_step');
    await fillNumber(page, 'steps', 2);
    await page.getByLabel('Duration (s)').fill('2');
    await page.getByTestId('prompt').press('Control+Enter'); // the keyboard shortcut
    await expect(page.getByTestId('progress-text')).toHaveAttribute('data-phase', 'done', { timeout: 180_000 });
    await expect(page.getByTestId('preview-canvas')).toHaveClass(/heatmap/);
    // the finished audio plays in the preview, with its controls
    await expect(page.getByTestId('final-result')).toHaveAttribute('data-kind', 'audio');
    expect(await page.getByTestId('final-media').evaluate((el) => el.tagName === 'AUDIO' && (el as HTMLAudioElement).controls)).toBe(true);
    const audio = page.getByTestId('gallery-item').first();
    await expect(audio).toHaveAttribute('data-kind', 'audio');
    await expect.poll(() => audio.locator('audio').evaluate((el) => (el as HTMLAudioElement).readyState)).toBeGreaterThanOrEqual(1);
    await expect(page.getByTestId('gallery-item')).toHaveCount(3);
    await shot(page, '04c-audio');

    // delete the video: gone from the gallery and from disk
    const videoSrc = (await page.locator('[data-kind=video] video').getAttribute('src')) as string;
    expect((await page.request.get(videoSrc)).status()).toBe(200);
    await page.locator('[data-kind=video]').getByRole('button', { name: 'Delete' }).click();
    await page.locator('[data-kind=video]').getByRole('button', { name: 'Yes, delete' }).click();
    await expect(page.getByTestId('gallery-item')).toHaveCount(2);
    expect((await page.request.get(videoSrc)).status()).toBe(404);

    // reuse the image's settings: arch, model and seed come back into the forms
    await page.locator('[data-kind=image]').getByRole('button', { name: 'Reuse' }).click();
    await expect(page.getByTestId('arch-select')).toHaveValue('zimage');
    await expect(page.getByTestId('name-or-path')).toHaveValue('tiny:zimage');
    await expect(page.getByTestId('seed')).toHaveValue('42');
    await expect(page.getByTestId('steps')).toHaveValue('24');
    await expect(page.getByTestId('width')).toHaveValue('64');
  });

  await test.step('4. a second generation survives a reload (re-attached), then is cancelled mid-run', async () => {
    await expect(page.getByTestId('arch-select')).toHaveValue('zimage');
    await fillNumber(page, 'steps', LONG);
    await page.getByTestId('generate-button').click();
    const progress = page.getByTestId('progress-text');
    await expect(progress).toContainText(pastStep2OfLong, { timeout: 120_000 });
    const before = Number(stepOfLong.exec((await progress.textContent()) ?? '')?.[1]);
    // a reload drops the stream; the page re-attaches through /stream/{request_id} and follows on
    await page.reload();
    await expect(progress).toHaveAttribute('data-phase', 'running', { timeout: 30_000 });
    await expect
      .poll(async () => Number(stepOfLong.exec((await progress.textContent()) ?? '')?.[1] ?? 0), { timeout: 60_000 })
      .toBeGreaterThan(before);
    await expect(page.getByTestId('preview-canvas')).toHaveAttribute('data-step', /\d+/);
    await shot(page, '05a-reattached');
    await page.getByTestId('cancel-button').click();
    await expect(progress).toHaveAttribute('data-phase', 'cancelled', { timeout: 60_000 });
    const message = page.getByTestId('gen-message');
    await expect(message).toContainText(/Cancelled at step \d+\/1000/);
    const stoppedAt = Number(/step (\d+)\/1000/.exec((await message.textContent()) ?? '')?.[1]);
    expect(stoppedAt).toBeGreaterThanOrEqual(2);
    expect(stoppedAt).toBeLessThan(LONG);
    // the engine agrees, and nothing was added to the gallery
    const queue = await (await page.request.get('/api/inference/queue')).json();
    expect(queue.finished[0].status).toBe('cancelled');
    expect(queue.running).toBeNull();
    await expect(page.getByTestId('gallery-item')).toHaveCount(2);
    await shot(page, '05b-cancelled');
  });

  await test.step('4b. a busy engine: the page says it waits behind another request', async () => {
    // another client's request holds the engine (detached, so it runs without a reader)
    const blocker = page.request.post('/api/inference/generate', {
      data: {
        model: { arch: 'zimage', name_or_path: 'tiny:zimage' },
        sample: { prompt: 'blocker', width: 64, height: 64, num_inference_steps: LONG },
        request_id: 'e2e-blocker',
        stream: { latents: 'none', detach: true },
      },
      timeout: 120_000,
    });
    await expect
      .poll(async () => (await (await page.request.get('/api/inference/queue')).json()).running?.request_id ?? null, { timeout: 30_000 })
      .toBe('e2e-blocker');
    await page.getByTestId('generate-button').click();
    await expect(page.getByTestId('status-lines')).toContainText('The engine is busy with another request', { timeout: 20_000 });
    await shot(page, '05c-busy');
    await page.getByTestId('cancel-button').click();
    await expect(page.getByTestId('gen-message')).toContainText('Cancelled before sampling started');
    expect((await page.request.post('/api/inference/cancel/e2e-blocker')).status()).toBe(200);
    expect((await blocker).status()).toBe(200);
    await expect.poll(async () => (await (await page.request.get('/api/inference/queue')).json()).running).toBeNull();
  });

  await test.step('4c. a client that goes away cancels its request (not detached): the abort crosses the proxy', async () => {
    await page.evaluate(async (steps) => {
      const ctrl = new AbortController();
      const res = await fetch('/api/inference/generate', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: { arch: 'zimage', name_or_path: 'tiny:zimage' },
          sample: { prompt: 'a closed tab', width: 64, height: 64, num_inference_steps: steps },
          request_id: 'e2e-abort',
          stream: { latents: 'none', detach: false },
        }),
        signal: ctrl.signal,
      });
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const t0 = Date.now();
      while (Date.now() - t0 < 60_000) {
        const { value, done } = await reader.read();
        if (done || new TextDecoder().decode(value).includes('"type":"progress"')) break;
      }
      ctrl.abort();
    }, LONG);
    const statusOf = async () => {
      const q = await (await page.request.get('/api/inference/queue')).json();
      return (q.finished as { request_id: string; status: string }[]).find((r) => r.request_id === 'e2e-abort')?.status ?? null;
    };
    await expect.poll(statusOf, { timeout: 30_000 }).toBe('cancelled');
  });

  await test.step('5. stop the engine from the page: engine.json is gone, the row is stopped', async () => {
    await page.getByTestId('engine-stop').click();
    const strip = page.getByTestId('engine-strip');
    await expect(strip).toHaveAttribute('data-state', 'stopped', { timeout: 60_000 });
    expect((await engineJob(page))?.status).toBe('stopped');
    expect(fs.existsSync(path.join(TRAINING_FOLDER, ENGINE_JOB, 'engine.json'))).toBe(false);
    // and its process is gone (the worker clears the pid once it has exited)
    await expect.poll(async () => (await engineJob(page))?.pid ?? null, { timeout: 30_000 }).toBeNull();
    // with the engine gone, the proxy answers with a readable 503, and the page says so
    const res = await page.request.get('/api/inference/health');
    expect(res.status()).toBe(503);
    // the form stays (from the last model list), and Generate starts the engine first
    await expect(page.getByTestId('models-cached')).toBeVisible();
    await expect(page.getByTestId('arch-select')).toBeVisible();
    await expect(page.getByTestId('generate-button')).toBeEnabled();
    await expect(page.getByTestId('generate-button')).toHaveText('Start engine and generate');
    await shot(page, '06-engine-stopped');

    // the jobs page deletes the stopped row (its folder stays)
    await page.goto('/jobs');
    const row = page.getByTestId(`job-row-${ENGINE_JOB}`);
    await expect(row).toHaveAttribute('data-status', 'stopped');
    page.once('dialog', (d) => d.accept()); // the jobs page asks first
    await row.getByRole('button', { name: 'Delete' }).click();
    await expect(row).toHaveCount(0);
    expect(await engineJob(page)).toBeUndefined();
    expect(fs.existsSync(path.join(TRAINING_FOLDER, ENGINE_JOB, 'log.txt'))).toBe(true);
  });
});

test('the engine dies mid-run: the page says the stream was lost, the row turns error', async ({ page }) => {
  await page.goto('/generate');
  const strip = page.getByTestId('engine-strip');
  await expect(strip).toHaveAttribute('data-state', 'none');
  await page.getByTestId('engine-start').click();
  await expect(strip).toHaveAttribute('data-state', 'ready', { timeout: ENGINE_START_MS });
  // a fresh browser: the forms start from the arch's defaults
  await page.getByTestId('arch-select').selectOption('zimage');
  await page.getByTestId('name-or-path').fill('tiny:zimage');
  await fillNumber(page, 'width', 64);
  await fillNumber(page, 'height', 64);
  await fillNumber(page, 'steps', LONG);
  await page.getByTestId('generate-button').click();
  const progress = page.getByTestId('progress-text');
  await expect(progress).toContainText(pastStep2OfLong, { timeout: 120_000 });

  const engineFile = path.join(TRAINING_FOLDER, ENGINE_JOB, 'engine.json');
  const { pid } = JSON.parse(fs.readFileSync(engineFile, 'utf8')) as { pid: number };
  process.kill(pid, 'SIGKILL');

  await expect(progress).toHaveAttribute('data-phase', 'lost', { timeout: 60_000 });
  await expect(page.getByTestId('gen-message')).toContainText(/Lost the (connection|stream)/);
  // the worker notices the silent death; the killed engine's engine.json is left behind and ignored
  await expect(strip).toHaveAttribute('data-state', 'error', { timeout: 30_000 });
  await expect(page.getByTestId('engine-info')).toContainText('Process ended without reporting a status');
  expect(fs.existsSync(engineFile)).toBe(true);
  const res = await page.request.get('/api/inference/health');
  expect(res.status()).toBe(503);
  await shot(page, '07-engine-killed');
});

test('profiles from the engine: the default profile is preselected and generates', async ({ page }) => {
  // a profiles file naming the tiny zimage that the first test made (a local diffusers folder)
  const tinyCache = process.env.AITK_TINY_CACHE || path.join(os.homedir(), '.cache', 'aitk', 'tiny_models');
  const checkpoint = path.join(tinyCache, 'zimage-seed0');
  expect(fs.existsSync(checkpoint), `the tiny zimage folder ${checkpoint} (made by the first test)`).toBe(true);
  const profilesFile = path.join(E2E_DIR, 'profiles.toml');
  fs.writeFileSync(
    profilesFile,
    `default_model = "tiny-z"\n[model_profiles.tiny-z]\narchitecture = "zimage"\ncheckpoint = ${JSON.stringify(checkpoint)}\n` +
      `[model_profiles.tiny-z.defaults]\nsteps = 3\nwidth = 64\nheight = 64\n`,
  );
  const created = await page.request.post('/api/jobs', {
    data: {
      name: 'inference_engine_profiles',
      gpu_ids: 'cpu',
      job_type: 'inference',
      job_config: { job: 'extension', config: { process: [{ type: 'InferenceEngine', engine: { profiles_file: profilesFile } }] } },
    },
  });
  expect(created.status()).toBe(201);
  const { job } = await created.json();

  await page.goto(`/generate?job=${job.id}`);
  const strip = page.getByTestId('engine-strip');
  await expect(strip).toHaveAttribute('data-state', 'stopped');
  await page.getByTestId('engine-start').click();
  await expect(strip).toHaveAttribute('data-state', 'ready', { timeout: ENGINE_START_MS });
  await expect(page.getByTestId('profile-select')).toHaveValue('tiny-z');
  await expect(page.getByTestId('arch-select')).toBeDisabled();
  await expect(page.getByTestId('steps')).toHaveValue('3');
  // `ready` means the default model is loaded (until then the strip says `warming`): the same /health says both
  await expect(page.getByTestId('engine-health')).toContainText('tiny-z: zimage');

  await page.getByTestId('prompt').fill('from a profile');
  await page.getByTestId('generate-button').click();
  await expect(page.getByTestId('progress-text')).toHaveAttribute('data-phase', 'done', { timeout: 120_000 });
  await expect(page.getByTestId('progress-text')).toContainText('Step 3/3');
  const item = page.getByTestId('gallery-item').first();
  await expect(item).toContainText('from a profile');
  await shot(page, '08-profile');

  await page.getByTestId('engine-stop').click();
  await expect(strip).toHaveAttribute('data-state', 'stopped', { timeout: 60_000 });
});

// -- input images, the mask, batches, samplers, settings from a file (tiny sd1: txt2img, img2img, inpaint) --

const INPUTS_JOB = 'inference_engine_inputs';
const W = 64;

/** A 64x64 RGB test picture: two ramps and a checkerboard, so every region differs. */
async function inputPng(): Promise<Buffer> {
  const data = new Uint8Array(W * W * 3);
  for (let y = 0; y < W; y++)
    for (let x = 0; x < W; x++) data.set([(x * 4) & 255, (y * 4) & 255, ((x >> 3) + (y >> 3)) % 2 ? 200 : 60], (y * W + x) * 3);
  return Buffer.from(await encodePng(W, W, 3, data));
}

/** The pixels of an image URL of this site, decoded by the browser: [r, g, b, a] per pixel. */
async function pixelsOf(page: Page, url: string): Promise<{ w: number; h: number; rgba: number[] }> {
  return page.evaluate(async (u) => {
    const img = new Image();
    img.src = u;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const ctx = c.getContext('2d') as CanvasRenderingContext2D;
    ctx.drawImage(img, 0, 0);
    return { w: c.width, h: c.height, rgba: Array.from(ctx.getImageData(0, 0, c.width, c.height).data) };
  }, url);
}

const fileOf = (item: StoredItem) => `/api/files/${item.jobName}/outputs/${item.result.relpath.split('/').map(encodeURIComponent).join('/')}`;
const assetOf = (assetPath: unknown) => `/api/files/${INPUTS_JOB}/assets/${encodeURIComponent(String(assetPath).split('/').pop() as string)}`;

/** Distance from a pixel centre to the segment a-b. */
function segmentDistance(px: number, py: number, a: [number, number], b: [number, number]): number {
  const [dx, dy] = [b[0] - a[0], b[1] - a[1]];
  const t = Math.max(0, Math.min(1, ((px - a[0]) * dx + (py - a[1]) * dy) / (dx * dx + dy * dy)));
  return Math.hypot(px - (a[0] + t * dx), py - (a[1] + t * dy));
}

test('input images: img2img, a painted mask (inpaint, a batch of 2), references, sampler, settings from a dropped file', async ({ page }) => {
  page.on('console', (msg) => {
    if (msg.type() === 'error') console.log(`[browser] ${msg.text()}`);
  });
  const { job, strip } = await startEngineOnPage(page, INPUTS_JOB);

  const models = await (await page.request.get(`/api/inference/models?job=${job.id}`)).json();
  const sd1 = (models.archs as { name: string; samplers: { name: string }[]; tasks: { name: string; strength: number | null }[] }[]).find((a) => a.name === 'sd1')!;
  const sd1Tasks = sd1.tasks;
  const png = await inputPng();
  const progress = page.getByTestId('progress-text');
  let inputAsset = '';

  await test.step('a. an input image dropped on its slot -> img2img -> a result image', async () => {
    await page.getByTestId('arch-select').selectOption('sd1');
    await page.getByTestId('name-or-path').fill('tiny:sd1');
    await page.getByTestId('prompt').fill('a red fox');
    await fillNumber(page, 'width', W);
    await fillNumber(page, 'height', W);
    await fillNumber(page, 'steps', 4);
    await fillNumber(page, 'seed', 5);
    // the arch's tasks and samplers, from /models
    await expect(page.getByTestId('task-select').locator('option')).toHaveText(['Automatic (txt2img)', ...sd1.tasks.map((t) => new RegExp(`^${t.name}\\b`))]);
    await expect(page.getByTestId('sampler-select').locator('option')).toHaveCount(1 + sd1.samplers.length);
    await expect(page.getByTestId('batch-size')).toBeVisible();
    await expect(page.getByTestId('strength')).toHaveCount(0); // txt2img takes none

    await dropFile(page, '[data-testid=init-drop]', png, 'input.png');
    await expect(page.getByTestId('init-drop')).toHaveAttribute('data-asset', /^[0-9a-f]{8}_input\.png$/);
    inputAsset = (await page.getByTestId('init-drop').getAttribute('data-asset')) as string;
    await expect.poll(() => page.getByTestId('input-thumb').evaluate((el) => (el as HTMLImageElement).naturalWidth)).toBe(W);
    await expect(page.getByTestId('settings-notice')).toHaveCount(0); // the slot took the drop, not the page
    // the task and its strength are the engine's answer (POST /resolve, the resolver /generate uses):
    // an init image makes it img2img on sd1, at that task's default strength
    const resolved = await (
      await page.request.post(`/api/inference/resolve?job=${job.id}`, { data: { model: { arch: 'sd1', name_or_path: 'tiny:sd1' }, sample: { init_img: 'present' } } })
    ).json();
    expect(resolved).toMatchObject({ task: 'img2img', sample: { task: 'img2img', strength: sd1Tasks.find((x) => x.name === 'img2img')!.strength } });
    await expect(page.getByTestId('task-select')).toHaveAttribute('data-task', resolved.task);
    await expect(page.getByTestId('task-select').locator('option').first()).toHaveText(`Automatic (${resolved.task})`);
    await expect(page.getByTestId('strength-value')).toHaveText(resolved.sample.strength.toFixed(2)); // 0.80, sd1's img2img default
    await expect(page.getByTestId('resize-mode')).toHaveValue('crop');
    // a strength under one step is the engine's refusal, said next to the inputs; back to the default
    await setRange(page, 'strength', 0.1);
    await expect(page.getByTestId('task-notes')).toContainText('less than one step');
    await page.getByRole('button', { name: 'default' }).click();
    await expect(page.getByTestId('strength-value')).toHaveText('0.80');
    await expect(page.getByTestId('task-notes')).toHaveCount(0);

    await page.getByTestId('generate-button').click();
    await expect(progress).toHaveAttribute('data-phase', 'done', { timeout: 180_000 });
    const [item] = await galleryItems(page);
    expect(item.sample).toMatchObject({ task: 'img2img', strength: 0.8, resize_mode: 'crop', batch_size: 1 });
    expect(String(item.sample.init_img).endsWith(inputAsset)).toBe(true);
    expect(item.sample.mask_img).toBeNull();
    const img = page.getByTestId('gallery-item').first().getByTestId('gallery-media');
    await expect.poll(() => img.evaluate((el) => (el as HTMLImageElement).naturalWidth)).toBe(W);
    await shot(page, '10-img2img');
  });

  // the stroke painted, in image pixels, and its brush
  const from: [number, number] = [24, 44];
  const to: [number, number] = [56, 44];
  const brush = 16;

  await test.step('b. paint a mask -> inpaint, a batch of 2: the mask sent is the area painted; the seeds differ inside it', async () => {
    const canvas = page.getByTestId('mask-canvas');
    await expect(canvas).toHaveAttribute('width', String(W));
    await setRange(page, 'brush-size', brush);
    await expect(page.getByTestId('mask-painter')).toContainText(`${brush} px`);
    await canvas.scrollIntoViewIfNeeded();
    const box = (await canvas.boundingBox())!;
    const s = box.width / W;
    await page.mouse.move(box.x + from[0] * s, box.y + from[1] * s);
    await page.mouse.down();
    await page.mouse.move(box.x + to[0] * s, box.y + to[1] * s, { steps: 8 });
    await page.mouse.up();
    await expect(page.getByTestId('task-select')).toHaveAttribute('data-task', 'inpaint');
    await expect(page.getByTestId('strength-value')).toHaveText('1.00'); // sd1's inpaint default
    await fillNumber(page, 'batch-size', 2);
    const before = await page.getByTestId('gallery-item').count(); // the history holds the earlier tests' results too
    await page.getByTestId('generate-button').click();
    await expect(progress).toHaveAttribute('data-phase', 'done', { timeout: 180_000 });
    // the preview shows every image of the batch, each with its seed
    const batch = page.getByTestId('batch-result');
    await expect(batch).toHaveCount(2);
    await expect(batch.nth(0)).toHaveAttribute('data-seed', '5');
    await expect(batch.nth(1)).toHaveAttribute('data-seed', '6');
    await expect(page.getByTestId('gallery-item')).toHaveCount(before + 2);
    await shot(page, '11-inpaint-batch');

    const items = (await galleryItems(page)).filter((i) => i.sample.task === 'inpaint');
    expect(items.map((i) => [i.result.index, i.result.seed]).sort()).toEqual([
      [0, 5],
      [1, 6],
    ]);
    const sample = items[0].sample;
    expect(sample).toMatchObject({ task: 'inpaint', strength: 1, batch_size: 2 });
    expect(String(sample.init_img).endsWith(inputAsset)).toBe(true);

    // (1) the mask the engine ran with: the asset the page uploaded, a PNG at the image's resolution,
    // white where the brush went and black elsewhere (a pixel's centre within the brush radius, give
    // or take one pixel for the pointer's sub-pixel position)
    const mask = await pixelsOf(page, assetOf(sample.mask_img));
    expect([mask.w, mask.h]).toEqual([W, W]);
    let white = 0;
    const inMask: boolean[] = [];
    for (let y = 0; y < W; y++)
      for (let x = 0; x < W; x++) {
        const v = mask.rgba[(y * W + x) * 4];
        expect([0, 255], `mask pixel (${x}, ${y}) is binary`).toContain(v);
        const d = segmentDistance(x + 0.5, y + 0.5, from, to);
        if (d < brush / 2 - 1) expect(v, `(${x}, ${y}) is inside the stroke`).toBe(255);
        if (d > brush / 2 + 1) expect(v, `(${x}, ${y}) is outside the stroke`).toBe(0);
        white += v === 255 ? 1 : 0;
        inMask.push(v === 255);
      }
    const capsule = (to[0] - from[0]) * brush + Math.PI * (brush / 2) ** 2;
    expect(Math.abs(white - capsule) / capsule).toBeLessThan(0.15);

    // (2) the engine applied that mask: the two seeds of the batch differ several times more inside
    // it than outside. sd1's inpaint pipeline blends the init latents back outside the mask at every
    // step, so there both seeds end on the same latents and differ only by the VAE decoder's spatial
    // mixing; inside, each seed samples its own. (Comparing with the input is no check here: the tiny
    // random VAE does not reproduce the input anywhere. An img2img run or no mask differs evenly: a
    // ratio near 1.) Measured on this setup: 3.5 to 4.4 over seeds.
    const [a, b] = await Promise.all(items.sort((p, q) => (p.result.index ?? 0) - (q.result.index ?? 0)).map((i) => pixelsOf(page, fileOf(i))));
    const mean = (inside: boolean) => {
      let sum = 0;
      let n = 0;
      inMask.forEach((m, p) => {
        if (m !== inside) return;
        for (let c = 0; c < 3; c++) sum += Math.abs(a.rgba[p * 4 + c] - b.rgba[p * 4 + c]);
        n += 3;
      });
      return sum / n;
    };
    const [inside, outside] = [mean(true), mean(false)];
    console.log(`inpaint seeds 5/6: mean |diff| inside the mask ${inside.toFixed(1)}, outside ${outside.toFixed(1)}`);
    expect(inside).toBeGreaterThan(2 * outside);
  });

  let generated: Buffer = Buffer.alloc(0);
  await test.step('c. a sampler: the request names it, the file records it', async () => {
    // the input image cleared (its mask goes with it): txt2img
    await page.getByTestId('init-drop-clear').click();
    await expect(page.getByTestId('task-select')).toHaveAttribute('data-task', 'txt2img');
    await expect(page.getByTestId('mask-painter')).toHaveCount(0);
    await page.getByTestId('prompt').fill('restore me');
    await page.getByTestId('sampler-select').selectOption('euler_a');
    await fillNumber(page, 'width', 64);
    await fillNumber(page, 'height', 48);
    await fillNumber(page, 'steps', 3);
    await fillNumber(page, 'seed', 1234);
    await fillNumber(page, 'batch-size', 1);
    await page.getByTestId('generate-button').click();
    await expect(progress).toHaveAttribute('data-phase', 'done', { timeout: 180_000 });
    const [item] = await galleryItems(page);
    expect(item.sample).toMatchObject({ prompt: 'restore me', sampler: 'euler_a', seed: 1234, task: 'txt2img', width: 64, height: 48, batch_size: 1 });
    expect(item.sample.init_img).toBeNull();
    const file = await page.request.get(fileOf(item));
    expect(file.status()).toBe(200);
    generated = await file.body();
  });

  await test.step("c2. a batch of 16, the engine's engine.limits.max_batch: accepted and made; 17 is said before sending", async () => {
    expect(models.limits.max_batch).toBe(16);
    expect((models.archs as { name: string; fields: { batch_size: { max: number } } }[]).find((a) => a.name === 'sd1')!.fields.batch_size.max).toBe(16);
    await expect(page.getByTestId('batch-size')).toHaveAttribute('max', '16');
    await fillNumber(page, 'batch-size', 17);
    await expect(page.getByTestId('note-batch_size')).toContainText('Batch size must be at most 16, not 17.');
    await expect(page.getByTestId('generate-button')).toBeDisabled();
    await page.getByTestId('fix-batch_size').click();
    await expect(page.getByTestId('batch-size')).toHaveValue('16');
    await expect(page.getByTestId('note-batch_size')).toHaveCount(0);
    await page.getByTestId('prompt').fill('a batch of sixteen');
    await fillNumber(page, 'width', 32);
    await fillNumber(page, 'height', 32);
    await fillNumber(page, 'steps', 2);
    await page.getByTestId('generate-button').click();
    await expect(progress).toHaveAttribute('data-phase', 'done', { timeout: 180_000 });
    await expect(page.getByTestId('batch-result')).toHaveCount(16);
    const made = (await galleryItems(page)).filter((i) => i.sample.batch_size === 16);
    expect(made).toHaveLength(16);
    await fillNumber(page, 'batch-size', 1);
  });

  await test.step('d. references: as many slots as the edit task takes, filled in order', async () => {
    await page.getByTestId('arch-select').selectOption('qwen_image_edit');
    await expect(page.getByTestId('init-drop')).toHaveCount(0); // its only task takes references
    const edit = (models.archs as { name: string; tasks: { name: string; needs: string[]; takes: string[] }[] }[]).find((x) => x.name === 'qwen_image_edit')!;
    const slots = edit.tasks[0].needs.length + edit.tasks[0].takes.length; // ctrl_img, ctrl_img_1..
    await expect(page.getByTestId('task-select')).toHaveCount(0); // one task: nothing to choose
    // the engine's refusal, in its words, next to the references
    await expect(page.getByTestId('task-notes')).toContainText('needs ctrl_img');
    for (let i = 0; i < slots; i++) {
      await expect(page.getByTestId(`ref-drop-${i + 1}`)).toHaveCount(0);
      await page.getByTestId(`ref-drop-${i}-file`).setInputFiles({ name: `ref${i}.png`, mimeType: 'image/png', buffer: png });
      await expect(page.getByTestId(`ref-drop-${i}`)).toHaveAttribute('data-asset', new RegExp(`_ref${i}\\.png$`));
    }
    await expect(page.getByTestId(`ref-drop-${slots}`)).toHaveCount(0);
    await expect(page.getByTestId('task-notes')).toHaveCount(0);
    await shot(page, '12-references');
    // clearing the first moves the others up
    await page.getByTestId('ref-drop-0-clear').click();
    await expect(page.getByTestId('ref-drop-0')).toHaveAttribute('data-asset', /_ref1\.png$/);
    await expect(page.getByTestId(`ref-drop-${slots - 1}`)).toHaveAttribute('data-asset', '');
  });

  await test.step('e. drop a generated PNG on the page: the forms are restored', async () => {
    await page.getByTestId('prompt').fill('something else');
    await fillNumber(page, 'seed', 7);
    await fillNumber(page, 'steps', 9);
    await fillNumber(page, 'width', 128);
    await fillNumber(page, 'height', 128);
    await page.getByTestId('sampler-select').selectOption('');
    await dropFile(page, 'h1', generated, 'restore-me.png');
    const notice = page.getByTestId('settings-notice');
    await expect(notice).toContainText('Restored the settings of restore-me.png (made here)');
    await expect(page.getByTestId('prompt')).toHaveValue('restore me');
    await expect(page.getByTestId('seed')).toHaveValue('1234');
    await expect(page.getByTestId('steps')).toHaveValue('3');
    await expect(page.getByTestId('width')).toHaveValue('64');
    await expect(page.getByTestId('height')).toHaveValue('48');
    await expect(page.getByTestId('sampler-select')).toHaveValue('euler_a');
    await expect(page.getByTestId('arch-select')).toHaveValue('sd1');
    await expect(page.getByTestId('name-or-path')).toHaveValue('tiny:sd1');
    await shot(page, '13-settings-restored');

    // the inpaint result's file brings back its input image and its mask, painted again
    const inpaint = (await galleryItems(page)).find((i) => i.sample.task === 'inpaint' && i.result.index === 1)!;
    const inpaintFile = await (await page.request.get(fileOf(inpaint))).body();
    await dropFile(page, '[data-testid=settings-drop]', inpaintFile, 'inpaint.png');
    await expect(notice).toContainText('Restored the settings of inpaint.png');
    await expect(page.getByTestId('init-drop')).toHaveAttribute('data-asset', inputAsset);
    await expect(page.getByTestId('seed')).toHaveValue('6'); // this file's own seed, batch 1
    await expect(page.getByTestId('batch-size')).toHaveValue('1');
    await expect(page.getByTestId('task-select')).toHaveAttribute('data-task', 'inpaint');
    const painted = async () =>
      page.getByTestId('mask-canvas').evaluate((el) => {
        const c = el as HTMLCanvasElement;
        const d = (c.getContext('2d') as CanvasRenderingContext2D).getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 3; i < d.length; i += 4) n += d[i] >= 128 ? 1 : 0;
        return n;
      });
    await expect.poll(painted).toBeGreaterThan(200);
    await shot(page, '14-inpaint-restored');

    // a file without settings: the engine's 422 is shown
    await dropFile(page, 'h1', png, 'plain.png');
    await expect(notice).toContainText('Could not restore the settings of plain.png');
    await expect(notice).toContainText('HTTP 422');

    // a result as the next input image: "Use as input" uploads its file
    const restoreItem = page.getByTestId('gallery-item').filter({ hasText: 'restore me' });
    await restoreItem.getByRole('button', { name: 'Use as input' }).click();
    await expect(page.getByTestId('init-drop')).toHaveAttribute('data-asset', /^[0-9a-f]{8}_ui-[a-z0-9-]+\.png$/);
    await expect(page.getByTestId('mask-canvas')).toHaveAttribute('width', '64');
    await expect(page.getByTestId('mask-canvas')).toHaveAttribute('height', '48');
    await expect.poll(painted).toBe(0); // a new image starts without a mask
    await expect(page.getByTestId('task-select')).toHaveAttribute('data-task', 'img2img');
  });

  await test.step('f. a narrow window: one column, nothing wider than the window', async () => {
    await page.setViewportSize({ width: 400, height: 900 });
    await expect(page.getByTestId('mask-canvas')).toBeVisible();
    expect(await widerThanWindow(page)).toEqual([]);
    await shot(page, '15-narrow');
    await page.setViewportSize({ width: 1400, height: 1000 });
  });

  await page.getByTestId('engine-stop').click();
  await expect(strip).toHaveAttribute('data-state', 'stopped', { timeout: 60_000 });
});

// -- LoRAs: tiny sd1 LoRAs in the engine's lora_folder, picked on the page, applied as adapters --

const LORAS_JOB = 'inference_engine_loras';
const REPO = path.join(__dirname, '..', '..');
const PYTHON = process.env.AITK_PYTHON || path.join(REPO, '.venv', 'bin', 'python');

/** A tiny random-weight LoRA for a tiny arch, written by the toolkit's CLI in the given file format. */
function makeTinyLora(arch: string, file: string, format: 'kohya' | 'peft') {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  execFileSync(PYTHON, ['-m', 'toolkit.models.tiny.loras', arch, file, '--format', format], { cwd: REPO, stdio: 'inherit' });
}

interface PoolCounts {
  loads: number;
  adapter_loads: number;
  adapter_hits?: number;
  adapters: { name: string; active: boolean; scale: number | null }[];
}

/** The pool's counters as the engine reports them now (after a request's done frame they are final). */
async function poolCounts(page: Page, jobId: string): Promise<PoolCounts> {
  const health = await (await page.request.get(`/api/inference/health?job=${jobId}`)).json();
  expect(typeof health.pool.loads, 'pool.loads').toBe('number');
  expect(typeof health.pool.adapter_loads, 'pool.adapter_loads').toBe('number');
  return health.pool as PoolCounts;
}

/** The engine strip shows the same counters (it refreshes /health after each request and every 2 s). */
async function expectStrip(page: Page, pool: PoolCounts) {
  await expect(page.getByTestId('engine-pool')).toHaveAttribute('data-loads', String(pool.loads));
  await expect(page.getByTestId('engine-adapters')).toHaveAttribute('data-adapter-loads', String(pool.adapter_loads));
  await expect(page.getByTestId('engine-adapters')).toHaveAttribute('data-adapters', String(pool.adapters.length));
}

test('LoRAs from the engine folder: picked, applied without reloading the model, strength changed without loading anything', async ({ page }) => {
  page.on('console', (msg) => {
    if (msg.type() === 'error') console.log(`[browser] ${msg.text()}`);
  });
  const folder = path.join(E2E_DIR, 'loras');
  makeTinyLora('sd1', path.join(folder, 'styleA.safetensors'), 'kohya');
  const created = await page.request.post('/api/jobs', {
    data: {
      name: LORAS_JOB,
      gpu_ids: 'cpu',
      job_type: 'inference',
      job_config: { job: 'extension', config: { process: [{ type: 'InferenceEngine', engine: { lora_folder: folder } }] } },
    },
  });
  expect(created.status()).toBe(201);
  const { job } = await created.json();
  await page.goto(`/generate?job=${job.id}`);
  const strip = page.getByTestId('engine-strip');
  await page.getByTestId('engine-start').click();
  await expect(strip).toHaveAttribute('data-state', 'ready', { timeout: ENGINE_START_MS });
  const progress = page.getByTestId('progress-text');
  const panel = page.getByTestId('lora-panel');
  const select = page.getByTestId('lora-select');
  /** One generation, finished: its result is in the gallery (the phase alone may still be the last run's). */
  const generate = async () => {
    const before = await page.getByTestId('gallery-item').count();
    await page.getByTestId('generate-button').click();
    await expect(page.getByTestId('gallery-item')).toHaveCount(before + 1, { timeout: 180_000 });
    await expect(progress).toHaveAttribute('data-phase', 'done');
  };

  await test.step('a. the folder lists the sd1 LoRA; a second one appears on Refresh', async () => {
    await page.getByTestId('arch-select').selectOption('sd1');
    await page.getByTestId('name-or-path').fill('tiny:sd1');
    await page.getByTestId('prompt').fill('a fox in snow');
    await fillNumber(page, 'width', W);
    await fillNumber(page, 'height', W);
    await fillNumber(page, 'steps', 4);
    await fillNumber(page, 'seed', 11);
    await expect(panel).toHaveAttribute('data-folder', new RegExp(`${path.basename(E2E_DIR)}[\\\\/]loras$`));
    await expect(select.locator('option[value="styleA.safetensors"]')).toHaveCount(1);
    await expect(page.getByTestId('lora-empty')).toHaveCount(0);

    makeTinyLora('sd1', path.join(folder, 'sub', 'styleB.safetensors'), 'peft');
    await page.getByTestId('lora-refresh').click();
    await expect(select.locator('option[value="sub/styleB.safetensors"]')).toHaveCount(1);
    const listing = await (await page.request.get(`/api/inference/loras?job=${job.id}&arch=sd1`)).json();
    const byPath = Object.fromEntries((listing.loras as { path: string; format: string; trigger_words: string[] }[]).map((l) => [l.path, l]));
    expect(byPath['styleA.safetensors']).toMatchObject({ format: 'kohya' });
    // kohya's metadata names the trigger word the CLI trains into every caption
    expect(byPath['styleA.safetensors'].trigger_words).toContain('styleA_style');
    expect(byPath['sub/styleB.safetensors']).toMatchObject({ format: 'peft' });
    await shot(page, '16-lora-folder');
  });

  let base: PoolCounts;
  await test.step('b. without a LoRA: the model loads (warm from here on)', async () => {
    await generate();
    base = await poolCounts(page, job.id);
    expect(base.adapters).toEqual([]);
    await expectStrip(page, base);
  });

  await test.step('c. pick styleA: generated with it; the pool loads the adapter, no component', async () => {
    await select.selectOption('styleA.safetensors');
    const pick = page.getByTestId('lora-pick');
    await expect(pick).toHaveCount(1);
    await expect(pick).toHaveAttribute('data-path', 'styleA.safetensors');
    await expect(pick.getByTestId('lora-scale')).toHaveValue('1');
    await expect(select.locator('option[value="styleA.safetensors"]')).toBeDisabled(); // picked once

    // its trigger word goes into the prompt with one click, once
    const chip = pick.getByTestId('lora-trigger').filter({ hasText: 'styleA_style' });
    await expect(chip).toBeEnabled();
    await chip.click();
    await expect(page.getByTestId('prompt')).toHaveValue('a fox in snow, styleA_style');
    await expect(chip).toBeDisabled();
    // (taken out again, so every picture here has the same prompt)
    await page.getByTestId('prompt').fill('a fox in snow');
    await expect(chip).toBeEnabled();

    await generate();
    const after = await poolCounts(page, job.id);
    expect(after.loads, 'no component loaded again').toBe(base.loads);
    expect(after.adapter_loads, 'the LoRA loaded once').toBe(base.adapter_loads + 1);
    await expectStrip(page, after);
    const [item] = await galleryItems(page);
    expect(JSON.stringify(item.model.loras)).toContain('styleA.safetensors');
    await expect(page.getByTestId('gallery-item').first()).toContainText('LoRA styleA ×1');
    await shot(page, '17-lora-applied');
    base = after;
  });

  await test.step('d. another strength: nothing is loaded at all, and the picture changes', async () => {
    const pick = page.getByTestId('lora-pick');
    await fillNumber(page, 'lora-scale', -0.5);
    await expect(pick.getByTestId('lora-scale-range')).toHaveValue('-0.5');
    await generate();
    const after = await poolCounts(page, job.id);
    expect(after.loads).toBe(base.loads);
    expect(after.adapter_loads).toBe(base.adapter_loads);
    await expectStrip(page, after);
    await shot(page, '18-lora-strength');

    // same seed and prompt: strength -0.5 differs from strength 1, and that from no LoRA
    const [minus, one, none] = await galleryItems(page);
    expect(new Set([minus, one, none].map((i) => i.result.seed)).size).toBe(1);
    const [pm, p1, p0] = await Promise.all([minus, one, none].map((i) => pixelsOf(page, fileOf(i))));
    const differs = (a: { rgba: number[] }, b: { rgba: number[] }) => a.rgba.some((v, k) => v !== b.rgba[k]);
    expect(differs(pm, p1), 'strength -0.5 vs 1').toBe(true);
    expect(differs(p1, p0), 'LoRA vs none').toBe(true);
    base = after;
  });

  await test.step('e. two LoRAs at once: only the new one loads; Reuse and a dropped file bring the picks back', async () => {
    await select.selectOption('sub/styleB.safetensors');
    await expect(page.getByTestId('lora-pick')).toHaveCount(2);
    await generate();
    const after = await poolCounts(page, job.id);
    expect(after.loads).toBe(base.loads);
    expect(after.adapter_loads).toBe(base.adapter_loads + 1);
    await expectStrip(page, after);
    await expect(page.getByTestId('engine-adapters')).toHaveAttribute('data-adapters', '2');
    await shot(page, '19-two-loras');

    // back to the strength-1 picture's settings: one LoRA at 1
    await page.getByTestId('gallery-item').nth(2).getByRole('button', { name: 'Reuse' }).click();
    const pick = page.getByTestId('lora-pick');
    await expect(pick).toHaveCount(1);
    await expect(pick).toHaveAttribute('data-path', /styleA\.safetensors$/);
    await expect(pick.getByTestId('lora-scale')).toHaveValue('1');

    // the two-LoRA picture's file: it keeps the LoRAs' file names, not their paths; the folder's
    // files of those names are picked again, at the strengths the picture was made with
    const [two] = await galleryItems(page);
    const bytes = await (await page.request.get(fileOf(two))).body();
    await dropFile(page, 'h1', bytes, 'two-loras.png');
    await expect(page.getByTestId('settings-notice')).toContainText('Restored the settings of two-loras.png');
    await expect(pick).toHaveCount(2);
    await expect(pick.nth(0)).toHaveAttribute('data-path', 'styleA.safetensors');
    await expect(pick.nth(0).getByTestId('lora-scale')).toHaveValue('-0.5');
    await expect(pick.nth(1)).toHaveAttribute('data-path', 'sub/styleB.safetensors');
    await expect(pick.nth(1).getByTestId('lora-scale')).toHaveValue('1');
    await shot(page, '20-loras-restored');
  });

  await page.getByTestId('engine-stop').click();
  await expect(strip).toHaveAttribute('data-state', 'stopped', { timeout: 60_000 });
});
