// The Generate page's form (issue 23 items 4-6, "Batch: count"): the form with the engine stopped
// (first without any model list, then from the one the page saw last), "Start engine and generate",
// the opening model (the engine's default), a tiny: choice kept across archs, the prompt next to
// Generate at 1280×800 and on a phone (Generate in view after scrolling), and a batch count of 2
// giving two results with their own seeds. Against the real engine on the tiny zimage model.
import { expect, test, type Page } from '@playwright/test';
import { ENGINE_START_MS, fillNumber, galleryItems, shot, stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const TINY = { arch: 'zimage', name_or_path: 'tiny:zimage' };

/** The history items of one prompt, once there are `n` of them. */
async function resultsOf(page: Page, prompt: string, n: number) {
  await expect.poll(async () => (await galleryItems(page)).filter((i) => i.sample.prompt === prompt).length, { timeout: 120_000 }).toBe(n);
  return (await galleryItems(page)).filter((i) => i.sample.prompt === prompt);
}

/** The element's box lies inside the window (as scrolled now). */
async function inWindow(page: Page, testId: string) {
  const box = await page.getByTestId(testId).boundingBox();
  const vp = page.viewportSize()!;
  expect(box).not.toBeNull();
  return box!.y >= 0 && box!.y + box!.height <= vp.height;
}

test('the form with the engine stopped, Start engine and generate, the layout at 1280×800 and on a phone, a batch count of 2', async ({ page }) => {
  await page.setViewportSize({ width: 1280, height: 800 });
  // an engine whose config names a default model, not started
  const created = await page.request.post('/api/jobs', {
    data: { name: 'form_layout_engine', gpu_ids: 'cpu', job_type: 'inference', job_config: { job: 'extension', config: { process: [{ type: 'InferenceEngine', engine: { default_model: TINY } }] } } },
  });
  expect(created.status()).toBe(201);
  const job = (await created.json()).job as { id: string };
  const strip = page.getByTestId('engine-strip');
  const button = page.getByTestId('generate-button');

  await test.step('no model list seen yet: the prompt and "Start engine and generate"; the request goes once the engine answers', async () => {
    await page.goto(`/generate?job=${job.id}`);
    await expect(strip).toHaveAttribute('data-state', /^(none|stopped)$/);
    await expect(page.getByTestId('models-missing')).toBeVisible();
    await page.getByTestId('prompt').fill('a fox, engine started by Generate');
    await expect(button).toHaveText('Start engine and generate');
    await expect(button).toBeEnabled();
    await shot(page, 'form-stopped-first-visit');
    await button.click();
    await expect(strip).toHaveAttribute('data-state', 'ready', { timeout: ENGINE_START_MS });
    await expect(page.getByTestId('final-result')).toBeVisible({ timeout: 180_000 });
    const [item] = await resultsOf(page, 'a fox, engine started by Generate', 1);
    // the picker opened on the engine's default model
    expect(item.model).toMatchObject(TINY);
    await expect(page.getByTestId('name-or-path')).toHaveValue('tiny:zimage');
    await expect(button).toHaveText('Generate');
  });

  await test.step('1280×800: the prompt and Generate both above the fold', async () => {
    await page.evaluate(() => window.scrollTo(0, 0));
    expect(await inWindow(page, 'prompt')).toBe(true);
    expect(await inWindow(page, 'generate-button')).toBe(true);
    await shot(page, 'form-1280x800');
  });

  await test.step('a batch count of 2: two requests, seed and seed + 1, both in the gallery', async () => {
    await fillNumber(page, 'width', 64);
    await fillNumber(page, 'height', 64);
    await fillNumber(page, 'steps', 2);
    await fillNumber(page, 'seed', 5);
    await fillNumber(page, 'batch-count', 2);
    await page.getByTestId('prompt').fill('two foxes by count');
    await button.click();
    const items = await resultsOf(page, 'two foxes by count', 2);
    expect(items.map((i) => i.result.seed).sort()).toEqual([5, 6]);
    expect(new Set(items.map((i) => i.requestId)).size).toBe(2);
    await fillNumber(page, 'batch-count', 1);
  });

  await test.step('a phone: the prompt near the top, Generate in view after scrolling', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.evaluate(() => window.scrollTo(0, 0));
    const prompt = await page.getByTestId('prompt').boundingBox();
    expect(prompt!.y).toBeLessThan(844 / 2);
    expect(await inWindow(page, 'generate-button')).toBe(true);
    await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
    expect(await page.evaluate(() => window.scrollY)).toBeGreaterThan(500);
    expect(await inWindow(page, 'generate-button')).toBe(true);
    await page.screenshot({ path: 'test-results/screenshots/form-phone-scrolled.png' });
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  await test.step('engine stopped: the whole form from the last model list, editable; a tiny: choice kept across archs', async () => {
    await page.getByTestId('engine-stop').click();
    await expect(strip).toHaveAttribute('data-state', 'stopped', { timeout: 60_000 });
    await page.reload();
    await expect(strip).toHaveAttribute('data-state', 'stopped');
    await expect(page.getByTestId('models-cached')).toBeVisible();
    await expect(page.getByTestId('arch-select')).toHaveValue('zimage');
    await page.getByTestId('arch-select').selectOption('sd1');
    await expect(page.getByTestId('name-or-path')).toHaveValue('tiny:sd1');
    await page.getByTestId('arch-select').selectOption('zimage');
    await expect(page.getByTestId('name-or-path')).toHaveValue('tiny:zimage');
    await fillNumber(page, 'width', 64);
    await fillNumber(page, 'height', 64);
    await fillNumber(page, 'steps', 2);
    await page.getByTestId('prompt').fill('a fox, set up while stopped');
    await expect(button).toHaveText('Start engine and generate');
    await shot(page, 'form-stopped-cached');
    await button.click();
    await expect(strip).toHaveAttribute('data-state', 'ready', { timeout: ENGINE_START_MS });
    const [item] = await resultsOf(page, 'a fox, set up while stopped', 1);
    expect(item.sample).toMatchObject({ width: 64, height: 64, num_inference_steps: 2 });
    expect(item.model).toMatchObject(TINY);
    await page.getByTestId('engine-stop').click();
    await expect(strip).toHaveAttribute('data-state', 'stopped', { timeout: 60_000 });
    // the other specs start from a device with no engine job and an empty history
    for (const it of await galleryItems(page)) expect((await page.request.delete(`/api/history/${encodeURIComponent(it.key)}`)).ok()).toBe(true);
    expect((await page.request.delete(`/api/jobs/${job.id}`)).ok()).toBe(true);
  });
});
