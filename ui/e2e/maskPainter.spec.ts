// The mask painter in the real page on the tiny sd1 engine: a file that is no image refused where it
// is dropped (issue 23 item 10); strokes undone and redone by the buttons and by Ctrl+Z /
// Ctrl+Shift+Z / Ctrl+Y, Invert, and a feather previewed and sent: the mask the engine ran with is
// a greyscale PNG at the input's resolution with a soft edge. On the way, defect 9's words on the
// strip (memory only as reported) and the engines card (what to do on this page).
import { expect, test, type Page } from '@playwright/test';
import { encodePng } from '../src/components/generate/maskPng';
import { dropFile, fillNumber, galleryItems, removeJobsAndHistory, setRange, shot, startEngineOnPage, stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const JOB = 'inference_engine_mask';
const W = 64;

async function inputPng(): Promise<number[]> {
  const data = new Uint8Array(W * W * 3);
  for (let y = 0; y < W; y++) for (let x = 0; x < W; x++) data.set([x * 4, y * 4, 128], (y * W + x) * 3);
  return Array.from(await encodePng(W, W, 3, data));
}

/** The painted pixels of the mask canvas (alpha at or over 128) in the left half and the right half. */
async function painted(page: Page): Promise<{ left: number; right: number }> {
  return page.getByTestId('mask-canvas').evaluate((el) => {
    const c = el as HTMLCanvasElement;
    const d = (c.getContext('2d') as CanvasRenderingContext2D).getImageData(0, 0, c.width, c.height).data;
    const out = { left: 0, right: 0 };
    for (let i = 0; i < c.width * c.height; i++) if (d[i * 4 + 3] >= 128) out[i % c.width < c.width / 2 ? 'left' : 'right']++;
    return out;
  });
}

/** A horizontal stroke across image rows y, from x0 to x1 (image pixels). */
async function stroke(page: Page, y: number, x0: number, x1: number) {
  await page.getByTestId('mask-canvas').scrollIntoViewIfNeeded();
  const box = (await page.getByTestId('mask-canvas').boundingBox())!;
  const s = box.width / W;
  await page.mouse.move(box.x + x0 * s, box.y + y * s);
  await page.mouse.down();
  await page.mouse.move(box.x + x1 * s, box.y + y * s, { steps: 6 });
  await page.mouse.up();
}

test('mask painter: a non-image .png refused at the drop; undo/redo, invert and feather in the page and in the mask sent', async ({ page }) => {
  // a second engine job, never started: the engines card lists it with what to do here
  const other = await page.request.post('/api/jobs', {
    data: { name: 'inference_engine_mask_idle', gpu_ids: 'cpu', job_type: 'inference', job_config: { job: 'extension', config: { process: [{ type: 'InferenceEngine', engine: {} }] } } },
  });
  expect(other.status()).toBe(201);
  const { job } = await startEngineOnPage(page, JOB);

  await test.step('defect 9: memory only as reported; the engines card says what to do on this page', async () => {
    await expect(page.getByTestId('engine-memory')).not.toContainText('0 B / 0 B');
    await expect(page.getByTestId('engine-memory')).toContainText(/Memory: CPU, no device memory/);
    const idle = page.locator('[data-testid=engine-row][data-job=inference_engine_mask_idle]');
    await expect(idle).toContainText('choose cpu as the Device above and press Start engine');
    await expect(page.getByTestId('engines-list')).not.toContainText('Start it on the Generate page');
  });

  await page.getByTestId('arch-select').selectOption('sd1');
  await page.getByTestId('name-or-path').fill('tiny:sd1');
  await page.getByTestId('prompt').fill('a red fox');
  await fillNumber(page, 'width', W);
  await fillNumber(page, 'height', W);
  await fillNumber(page, 'steps', 2);

  await test.step('item 10: text named bad.png is refused where it is dropped, naming it; nothing is uploaded', async () => {
    await dropFile(page, '[data-testid=init-drop]', Buffer.from('this is not an image\n'), 'bad.png');
    await expect(page.getByTestId('init-drop-error')).toHaveText('bad.png is not a PNG/JPEG/WebP image.');
    await expect(page.getByTestId('init-drop')).toHaveAttribute('data-asset', '');
    await expect(page.getByTestId('mask-painter')).toHaveCount(0);
    await shot(page, 'mask-01-bad-png');
    // a real PNG is taken, and the refusal goes
    await dropFile(page, '[data-testid=init-drop]', Buffer.from(await inputPng()), 'input.png');
    await expect(page.getByTestId('init-drop')).toHaveAttribute('data-asset', /_input\.png$/);
    await expect(page.getByTestId('init-drop-error')).toHaveCount(0);
  });

  const undo = page.getByTestId('mask-undo');
  const redo = page.getByTestId('mask-redo');
  await test.step('undo/redo by buttons and keys; a stroke is one step, invert is one', async () => {
    await expect(page.getByTestId('mask-canvas')).toHaveAttribute('width', String(W));
    await setRange(page, 'brush-size', 8);
    await expect(undo).toBeDisabled();
    await stroke(page, 16, 4, 24); // left half
    const one = await painted(page);
    expect(one.left).toBeGreaterThan(100);
    expect(one.right).toBe(0);
    await stroke(page, 48, 40, 60); // right half
    const two = await painted(page);
    expect(two.right).toBeGreaterThan(100);
    await undo.click();
    expect(await painted(page)).toEqual({ left: one.left, right: 0 });
    await expect(redo).toBeEnabled();
    // keys while the painter has focus
    await page.getByTestId('mask-painter').focus();
    await page.keyboard.press('Control+z');
    await expect.poll(() => painted(page)).toEqual({ left: 0, right: 0 });
    await expect(undo).toBeDisabled();
    await page.keyboard.press('Control+Shift+z');
    await expect.poll(() => painted(page)).toEqual({ left: one.left, right: 0 });
    await page.keyboard.press('Control+y');
    await expect.poll(async () => (await painted(page)).right).toBeGreaterThan(100);
    await expect(redo).toBeDisabled();
    const both = await painted(page);
    // invert: every pixel flips; undo brings the strokes back
    await page.getByTestId('mask-invert').click();
    expect(await painted(page)).toEqual({ left: (W * W) / 2 - both.left, right: (W * W) / 2 - both.right });
    await expect(page.getByTestId('task-select')).toHaveAttribute('data-task', 'inpaint');
    await undo.click();
    expect(await painted(page)).toEqual(both);
    // Clear is a step too
    await page.getByTestId('mask-clear').click();
    expect(await painted(page)).toEqual({ left: 0, right: 0 });
    await undo.click();
    expect(await painted(page)).toEqual(both);
  });

  await test.step('feather: previewed as a blur at the shown size, and the mask sent is soft-edged at 64x64', async () => {
    await setRange(page, 'mask-feather', 3);
    const canvas = page.getByTestId('mask-canvas');
    await expect(canvas).toHaveAttribute('data-feather', '3');
    const shown = await canvas.evaluate((el) => ({ filter: getComputedStyle(el).filter, width: el.getBoundingClientRect().width }));
    expect(shown.filter).toBe(`blur(${((3 * shown.width) / W).toFixed(2)}px)`);
    await shot(page, 'mask-02-feather');
    await page.getByTestId('generate-button').click();
    await expect(page.getByTestId('progress-text')).toHaveAttribute('data-phase', 'done', { timeout: 180_000 });
    const [item] = await galleryItems(page);
    expect(item.sample.task).toBe('inpaint');
    const url = `/api/files/${JOB}/assets/${encodeURIComponent(String(item.sample.mask_img).split('/').pop() as string)}`;
    const bytes = Buffer.from(await (await page.request.get(url)).body());
    expect([bytes.readUInt32BE(16), bytes.readUInt32BE(20), bytes[24], bytes[25]]).toEqual([W, W, 8, 0]); // 64x64, 8-bit grey
    const grey = await page.evaluate(async (u) => {
      const img = new Image();
      img.src = u;
      await img.decode();
      const c = document.createElement('canvas');
      [c.width, c.height] = [img.naturalWidth, img.naturalHeight];
      const ctx = c.getContext('2d') as CanvasRenderingContext2D;
      ctx.drawImage(img, 0, 0);
      return Array.from(ctx.getImageData(0, 0, c.width, c.height).data.filter((_, i) => i % 4 === 0));
    }, url);
    const soft = grey.filter((v) => v > 10 && v < 245).length;
    expect(soft, 'pixels of the feathered edge').toBeGreaterThan(100);
    expect(grey[16 * W + 14], 'the stroke centre stays light').toBeGreaterThan(180);
    expect(grey[0], 'far from the strokes stays black').toBe(0);
  });
  expect(job.name).toBe(JOB);
  await removeJobsAndHistory(page, [job.id, (await other.json()).job.id]);
});
