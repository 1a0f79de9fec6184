// Control and upscaling on the Generate page, against the real engine on tiny sd1: a ComfyUI folder with
// a tiny random ControlNet (models/controlnet, diffusers names in one file) and a tiny ESRGAN
// (models/upscale_models), written by the tiny-model factory. A control image dropped -> its canny map
// previewed (POST /preprocess) -> generate with `sample.controls` -> the hires fix on (the preview names
// the pass) -> the result upscaled from the gallery (`task: upscale`) with the ESRGAN.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from '@playwright/test';
import { E2E_DIR } from './env';
import { dropFile, fillNumber, galleryItems, removeJobsAndHistory, shot, startEngineOnPage, stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const REPO = path.join(__dirname, '..', '..');
const PYTHON = process.env.AITK_PYTHON || path.join(REPO, '.venv', 'bin', 'python');

/** The ComfyUI folder's files, and a control image (a white disc on black), made by the tiny-model factory. */
const PREPARE = `
import sys, pathlib
from PIL import Image, ImageDraw
from toolkit.models.tiny import resolve_tiny
from toolkit.models.tiny.controlnets import write_tiny_controlnet
from toolkit.models.tiny.esrgan import write_tiny_esrgan
comfy, image = pathlib.Path(sys.argv[1]), sys.argv[2]
(comfy / "models" / "checkpoints").mkdir(parents=True, exist_ok=True)
write_tiny_controlnet("sd1", resolve_tiny("tiny:sd1", "sd1"), comfy / "models" / "controlnet" / "tiny_sd1_cn.safetensors", "file", seed=1)
write_tiny_esrgan(comfy / "models" / "upscale_models", "tiny_esrgan", scale=2)
im = Image.new("RGB", (96, 64), "black")
ImageDraw.Draw(im).ellipse((24, 8, 72, 56), fill="white")
im.save(image)
`;

test('control image -> map preview -> generate -> hires -> upscale from the gallery', async ({ page }) => {
  const comfy = path.join(E2E_DIR, 'ComfyUI-control');
  const imagePath = path.join(E2E_DIR, 'control-disc.png');
  execFileSync(PYTHON, ['-c', PREPARE, comfy, imagePath], { cwd: REPO, stdio: 'inherit' });

  const { job } = await startEngineOnPage(page, 'inference_engine_control', { model_folders: [comfy] });
  await page.getByTestId('arch-select').selectOption('sd1');
  await page.getByTestId('name-or-path').fill('tiny:sd1');
  await page.getByTestId('prompt').fill('a white disc on a dark table');
  await fillNumber(page, 'width', 64);
  await fillNumber(page, 'height', 64);
  await fillNumber(page, 'steps', 4);

  // a Control panel: the image (checked by its header: text named .png is refused), the model, canny, its map
  const panel = page.getByTestId('control-panel');
  await expect(panel).toBeVisible();
  await page.getByTestId('control-add').click();
  await dropFile(page, '[data-testid="control-0-drop"]', Buffer.from('not an image'), 'fake.png');
  await expect(page.getByTestId('control-0-drop-error')).toContainText('fake.png is not a PNG/JPEG/WebP image.');
  await dropFile(page, '[data-testid="control-0-drop"]', fs.readFileSync(imagePath), 'control-disc.png');
  await expect(page.getByTestId('control-0-drop')).toHaveAttribute('data-asset', /control-disc/);
  // the one control model for sd1 is chosen already (the library lists it under the folder: controlnet/…)
  await expect(page.getByTestId('control-0-model')).toHaveValue('tiny_sd1_cn.safetensors');
  await expect(page.getByTestId('control-0-model').locator('option:checked')).toHaveText('controlnet/tiny_sd1_cn.safetensors (SD 1.x ControlNet)');
  // a model-based preprocessor whose model is not here is listed, disabled, saying why
  await expect(page.getByTestId('control-0-preprocessor').locator('option[value="depth_anything"]')).toBeDisabled();
  await page.getByTestId('control-0-preprocessor').selectOption('canny');
  await fillNumber(page, 'control-0-processor_res', 64);
  await page.getByTestId('control-0-preview').click();
  const map = page.getByTestId('control-0-map');
  await expect(map).toBeVisible({ timeout: 60_000 });
  // resize_image_with_pad: the short side at processor_res (96x64 at 64 stays 96x64)
  await expect(map).toHaveAttribute('data-width', '96');
  await expect(map).toHaveAttribute('data-height', '64');
  const edges = await map.evaluate(async (img: HTMLImageElement) => {
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const ctx = c.getContext('2d') as CanvasRenderingContext2D;
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    let white = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] > 127) white += 1;
    return { white, total: d.length / 4 };
  });
  // a canny map of a disc: its outline, a thin ring, not the filled disc
  expect(edges.white).toBeGreaterThan(40);
  expect(edges.white).toBeLessThan(edges.total / 8);
  await page.getByTestId('control-0-scale').fill('0.8');
  // the panel's fields stay inside its card (a long model name included)
  const past = await panel.evaluate((el) => {
    const right = el.getBoundingClientRect().right;
    return Array.from(el.querySelectorAll('*')).filter((c) => c.getBoundingClientRect().right > right + 1).map((c) => c.tagName.toLowerCase());
  });
  expect(past).toEqual([]);
  await shot(page, 'control-panel');

  // generate with the control
  const sent = page.waitForRequest((r) => r.method() === 'POST' && r.url().includes('/api/inference/generate'));
  await page.getByTestId('generate-button').click();
  const controls = (await sent).postDataJSON().sample.controls;
  expect(controls).toEqual([
    expect.objectContaining({ model: 'tiny_sd1_cn.safetensors', preprocessor: 'canny', scale: 0.8, start: 0, end: 1, processor_res: 64, image: expect.stringContaining('control-disc') }),
  ]);
  const progress = page.getByTestId('progress-text');
  await expect(progress).toHaveAttribute('data-phase', 'done', { timeout: 180_000 });
  await expect(progress).toHaveAttribute('data-pass', '');
  let items = await galleryItems(page);
  expect(items).toHaveLength(1);
  expect((items[0].sample.controls as Record<string, unknown>[])[0]).toMatchObject({ preprocessor: 'canny', scale: 0.8 });

  // hires on: a second pass at 1.5x, Lanczos; the preview names the pass its frames are of
  await page.getByTestId('hires-enabled').check();
  await fillNumber(page, 'hires-scale', 1.5);
  await page.getByTestId('hires-upscaler').selectOption('Lanczos');
  await expect(page.getByTestId('hires-upscaler').locator('option[value="tiny_esrgan"]')).toHaveCount(1);
  await fillNumber(page, 'hires-steps', 4);
  await fillNumber(page, 'hires-denoise', 0.5);
  const sentHires = page.waitForRequest((r) => r.method() === 'POST' && r.url().includes('/api/inference/generate'));
  await page.getByTestId('generate-button').click();
  expect((await sentHires).postDataJSON().sample.hires).toEqual({ scale: 1.5, upscaler: 'Lanczos', steps: 4, denoise: 0.5 });
  await expect(progress).toHaveAttribute('data-pass', 'hires', { timeout: 180_000 });
  await expect(progress).toHaveAttribute('data-phase', 'done', { timeout: 180_000 });
  await expect(page.getByTestId('progress-pass')).toHaveText('Hires pass:');
  items = await galleryItems(page);
  expect(items).toHaveLength(2);
  const hiresItem = items[0] as (typeof items)[0] & { result: { width: number; height: number } };
  expect(hiresItem.sample.hires).toMatchObject({ scale: 1.5, denoise: 0.5 });
  expect([hiresItem.result.width, hiresItem.result.height]).toEqual([96, 96]);
  await shot(page, 'control-hires');

  // upscale that result from the gallery with the tiny ESRGAN: a task upscale request, its result in the gallery
  const card = page.getByTestId('gallery-item').first();
  await card.getByTestId('gallery-upscale').click();
  await card.getByTestId('upscale-chooser-upscaler').selectOption('tiny_esrgan');
  await card.getByTestId('upscale-chooser-scale').fill('2');
  const sentUp = page.waitForRequest((r) => r.method() === 'POST' && r.url().includes('/api/inference/generate'));
  await card.getByTestId('upscale-chooser-go').click();
  const up = (await sentUp).postDataJSON();
  expect(up.sample).toMatchObject({ task: 'upscale', upscale: { upscaler: 'tiny_esrgan', scale: 2 } });
  expect(up.sample).not.toHaveProperty('controls');
  await expect.poll(async () => (await galleryItems(page)).length, { timeout: 180_000 }).toBe(3);
  items = await galleryItems(page);
  const upItem = items[0] as (typeof items)[0] & { result: { width: number; height: number } };
  expect(upItem.sample.task).toBe('upscale');
  expect([upItem.result.width, upItem.result.height]).toEqual([192, 192]);
  await expect(page.getByTestId('gallery-item')).toHaveCount(3);
  await shot(page, 'control-upscaled');

  // the result viewer's "Send to upscale": that one again, by Lanczos
  await page.getByTestId('gallery-item').first().getByTestId('gallery-view').click();
  const viewer = page.getByTestId('viewer');
  await viewer.getByTestId('viewer-upscale').click();
  await viewer.getByTestId('viewer-upscale-chooser-upscaler').selectOption('Lanczos');
  await viewer.getByTestId('viewer-upscale-chooser-scale').fill('1.5');
  await viewer.getByTestId('viewer-upscale-chooser-go').click();
  await expect(viewer).toBeHidden();
  await expect.poll(async () => (await galleryItems(page)).length, { timeout: 180_000 }).toBe(4);
  const again = (await galleryItems(page))[0] as (typeof items)[0] & { result: { width: number; height: number } };
  expect(again.sample).toMatchObject({ task: 'upscale', upscale: { upscaler: 'Lanczos', scale: 1.5 } });
  expect([again.result.width, again.result.height]).toEqual([288, 288]);

  await removeJobsAndHistory(page, [job.id]);
});
