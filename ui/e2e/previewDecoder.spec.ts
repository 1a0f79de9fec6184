// The live preview decoded by a tiny autoencoder: an engine whose ComfyUI folder has a (tiny, random)
// vae_approx/taesd_decoder.safetensors serves sd1's previews decoded; the Generate page asks for the
// engine's JPEG frames instead of latents and draws them at the picture's size, not the latent's.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from '@playwright/test';
import { E2E_DIR } from './env';
import { fillNumber, removeJobsAndHistory, shot, startEngineOnPage, stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const REPO = path.join(__dirname, '..', '..');
const PYTHON = process.env.AITK_PYTHON || path.join(REPO, '.venv', 'bin', 'python');

test('a TAESD file in vae_approx/ decodes the live preview', async ({ page }) => {
  const comfy = path.join(E2E_DIR, 'ComfyUI');
  fs.mkdirSync(path.join(comfy, 'models', 'checkpoints'), { recursive: true });
  execFileSync(PYTHON, ['-m', 'toolkit.models.tiny.taesd', path.join(comfy, 'models', 'vae_approx'), 'taesd', '4'], { cwd: REPO, stdio: 'inherit' });

  const { job } = await startEngineOnPage(page, 'inference_engine_taesd', { model_folders: [comfy] });
  const models = await (await page.request.get(`/api/inference/models?job=${job.id}`)).json();
  const sd1 = (models.archs as { name: string; preview: { decoder: string; tae: string } }[]).find((a) => a.name === 'sd1');
  expect(sd1?.preview).toMatchObject({ tae: 'taesd', decoder: 'taesd' });

  await page.getByTestId('arch-select').selectOption('sd1');
  await page.getByTestId('name-or-path').fill('tiny:sd1');
  await page.getByTestId('prompt').fill('a red fox in fresh snow');
  await fillNumber(page, 'width', 64);
  await fillNumber(page, 'height', 64);
  await fillNumber(page, 'steps', 500); // long enough to cancel; PNDM at 1000 steps indexes past its 1000 train steps
  const sent = page.waitForRequest((r) => r.method() === 'POST' && r.url().includes('/api/inference/generate'));
  await page.getByTestId('generate-button').click();
  const stream = (await sent).postDataJSON().stream;
  expect(stream).toMatchObject({ latents: 'none', preview_image: 'jpeg' });

  // drawn from the decoded JPEG: the picture's 64x64, where a projected latent is 8x8
  const canvas = page.getByTestId('preview-canvas');
  await expect(canvas).toHaveAttribute('data-step', /\d+/, { timeout: 120_000 });
  await expect(canvas).toHaveAttribute('data-mode', 'decoded');
  const drawn = await canvas.evaluate((c: HTMLCanvasElement) => {
    const data = (c.getContext('2d') as CanvasRenderingContext2D).getImageData(0, 0, c.width, c.height).data;
    let lo = 255;
    let hi = 0;
    for (let i = 0; i < data.length; i += 4) {
      lo = Math.min(lo, data[i]);
      hi = Math.max(hi, data[i]);
    }
    return { width: c.width, height: c.height, spread: hi - lo };
  });
  expect(drawn).toMatchObject({ width: 64, height: 64 });
  expect(drawn.spread).toBeGreaterThan(10);
  await shot(page, 'taesd-preview');
  await page.getByTestId('cancel-button').click();
  await expect(page.getByTestId('progress-text')).toHaveAttribute('data-phase', 'cancelled', { timeout: 60_000 });
  await removeJobsAndHistory(page, [job.id]);
});
