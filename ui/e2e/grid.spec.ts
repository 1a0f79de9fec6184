// The /grid page end to end (issue 13, item 3): the Generate page's settings on the tiny zimage model,
// an X = seed (1, 2) × Y = steps (1, 2) grid queued on the real engine as four ordinary requests, the
// four images laid out with their labels, and one labelled PNG of the whole grid saved under the
// engine job's outputs folder. Then a cell the engine refuses (its message in the cell, its place
// kept in the PNG) and Cancel grid (every cell cancelled on the engine).
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from '@playwright/test';
import { pngSize } from '../src/server/pngInfo';
import { SCREENSHOTS, TRAINING_FOLDER } from './env';
import { stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const CELL = 64;

test('a 2×2 grid (seed × steps) completes and its labelled PNG exists; a refused cell; Cancel grid', async ({ page }) => {
  page.on('console', (msg) => {
    if (msg.type() === 'error') console.log(`[browser] ${msg.text()}`);
  });

  // the base settings: the Generate page's form, as a person fills it
  await page.goto('/generate');
  await page.getByTestId('engine-start').click();
  await expect(page.getByTestId('engine-strip')).toHaveAttribute('data-state', 'ready', { timeout: 90_000 });
  await page.getByTestId('arch-select').selectOption('zimage');
  await page.getByTestId('name-or-path').fill('tiny:zimage');
  await page.getByTestId('prompt').fill('a red fox in fresh snow');
  for (const [id, v] of [['width', CELL], ['height', CELL], ['steps', 4], ['seed', 9]] as const) {
    await page.getByTestId(id).fill(String(v));
    await page.getByTestId(id).blur();
  }

  await page.getByTestId('make-grid').click();
  await expect(page).toHaveURL(/\/grid\?job=/);
  // the engine the page uses: the device's newest job (an earlier spec may have made another than the
  // default one); its folder holds the grid's PNG
  const jobId = new URL(page.url()).searchParams.get('job');
  const jobs = (await (await page.request.get('/api/jobs?job_type=inference')).json()).jobs as { id: string; name: string }[];
  const ENGINE_JOB = jobs.find((j) => j.id === jobId)?.name as string;
  expect(ENGINE_JOB).toBeTruthy();
  await expect(page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Grid' })).toHaveClass(/active/);
  const baseSummary = page.getByTestId('grid-base');
  await expect(baseSummary).toContainText('zimage: tiny:zimage');
  await expect(baseSummary).toContainText('a red fox in fresh snow');
  await expect(baseSummary).toContainText(`${CELL}×${CELL}`);
  await expect(page.getByTestId('engine-strip')).toHaveAttribute('data-state', 'ready', { timeout: 30_000 });

  // the axes, by their labels; a bad value is said before anything runs
  await page.getByLabel('X axis').selectOption('seed');
  await page.getByLabel('X values').fill('1, 2');
  await page.getByLabel('Y axis').selectOption('steps');
  await page.getByLabel('Y values').fill('1, 0');
  await expect(page.getByTestId('grid-plan-error')).toHaveText('Y axis, steps: 0 is below 1.');
  await expect(page.getByTestId('grid-run')).toBeDisabled();
  await page.getByLabel('Y values').fill('1-2');
  await expect(page.getByTestId('grid-plan-error')).toHaveCount(0);
  await expect(page.getByTestId('grid-run')).toHaveText('Run grid (4 images)');
  await page.getByTestId('grid-run').click();

  // four cells, each an image, X labels on top and Y labels on the left
  const images = page.getByTestId('grid-cell-image');
  await expect(images).toHaveCount(4, { timeout: 180_000 });
  for (const img of await images.all()) {
    await expect.poll(() => img.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth)).toBe(CELL);
  }
  const table = page.getByTestId('grid-table');
  await expect(table.locator('thead th')).toHaveText(['Seed: 1', 'Seed: 2']);
  await expect(table.locator('tbody th')).toHaveText(['Steps: 1', 'Steps: 2']);
  await expect(page.getByTestId('grid-cell').nth(3)).toHaveAttribute('aria-label', 'Seed: 2, Steps: 2');

  // they ran as ordinary requests on the engine's queue, each with its own settings
  const ids = await page.getByTestId('grid-cell').evaluateAll((els) => els.map((e) => e.getAttribute('data-request-id')));
  const queue = await (await page.request.get(`/api/inference/queue?job=${jobId}`)).json();
  const finished = new Map((queue.finished as { request_id: string; status: string }[]).map((r) => [r.request_id, r.status]));
  expect(ids.map((id) => finished.get(id as string))).toEqual(['ok', 'ok', 'ok', 'ok']);

  // the labelled PNG: saved under the job's outputs, at least 2×2 cells big
  const saved = page.getByTestId('grid-saved');
  await expect(saved).toBeVisible({ timeout: 30_000 });
  const relpath = (await saved.getAttribute('data-relpath')) as string;
  expect(relpath).toMatch(/^grids\/grid-.*\.png$/);
  const file = path.join(TRAINING_FOLDER, ENGINE_JOB, 'outputs', relpath);
  expect(fs.existsSync(file)).toBe(true);
  const size = pngSize(fs.readFileSync(file));
  expect(size).not.toBeNull();
  expect(size!.width).toBeGreaterThanOrEqual(2 * CELL);
  expect(size!.height).toBeGreaterThanOrEqual(2 * CELL);
  await expect(saved).toContainText(`${size!.width}×${size!.height}`);
  // the download link serves the same file
  const href = (await page.getByTestId('grid-download').getAttribute('href')) as string;
  const served = await page.request.get(href);
  expect(served.ok()).toBe(true);
  expect(Buffer.compare(await served.body(), fs.readFileSync(file))).toBe(0);

  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, '40-grid.png'), fullPage: true });

  // a cell the engine refuses shows the engine's message; the others still make the PNG
  await page.getByLabel('X axis').selectOption('model');
  await page.getByLabel('X values').fill('tiny:zimage, /nonexistent/zimage');
  await page.getByLabel('Y axis').selectOption('none');
  await page.getByTestId('grid-run').click();
  const refused = page.locator('[data-testid=grid-cell][data-phase=error]');
  await expect(refused).toHaveCount(1, { timeout: 120_000 });
  await expect(refused).toHaveAttribute('aria-label', 'zimage');
  await expect(refused).toContainText('HTTP 422');
  await expect(refused).toContainText('model.name_or_path');
  await expect(images).toHaveCount(1);
  await expect(saved).toHaveAttribute('data-relpath', /^grids\/grid-.*\.png$/, { timeout: 30_000 });
  const second = (await saved.getAttribute('data-relpath')) as string;
  expect(second).not.toBe(relpath);
  const secondSize = pngSize(fs.readFileSync(path.join(TRAINING_FOLDER, ENGINE_JOB, 'outputs', second)));
  expect(secondSize!.width).toBeGreaterThanOrEqual(2 * CELL); // the refused cell keeps its place
  expect(secondSize!.height).toBeGreaterThanOrEqual(CELL);
  await page.screenshot({ path: path.join(SCREENSHOTS, '43-grid-refused-cell.png'), fullPage: true });
  fs.copyFileSync(file, path.join(SCREENSHOTS, '41-grid-png.png'));

  // phone-sized: the page stays within the window (a wide grid scrolls inside its own box)
  await page.setViewportSize({ width: 390, height: 844 });
  await expect(images.first()).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBeLessThanOrEqual(0);
  await page.screenshot({ path: path.join(SCREENSHOTS, '42-grid-phone.png'), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 720 });
  // Cancel grid: every cell still running or queued ends cancelled on the engine; no image, no PNG
  await page.getByLabel('X axis').selectOption('seed');
  await page.getByLabel('X values').fill('1-3');
  await page.getByLabel('Y axis').selectOption('steps');
  await page.getByLabel('Y values').fill('1000');
  await page.getByTestId('grid-run').click();
  await expect(page.locator('[data-testid=grid-cell][data-phase=running]').first()).toBeVisible({ timeout: 60_000 });
  await page.getByTestId('grid-cancel').click();
  await expect(page.locator('[data-testid=grid-cell][data-phase=cancelled]')).toHaveCount(3, { timeout: 60_000 });
  await expect(page.getByTestId('grid-save-error')).toContainText('No cell made an image');
  const cancelledIds = await page.getByTestId('grid-cell').evaluateAll((els) => els.map((e) => e.getAttribute('data-request-id')));
  const afterCancel = await (await page.request.get(`/api/inference/queue?job=${jobId}`)).json();
  const statusOf = new Map((afterCancel.finished as { request_id: string; status: string }[]).map((r) => [r.request_id, r.status]));
  expect(cancelledIds.map((id) => statusOf.get(id as string))).toEqual(['cancelled', 'cancelled', 'cancelled']);

  await page.getByTestId('engine-stop').click();
  await expect(page.getByTestId('engine-strip')).toHaveAttribute('data-state', /stopping|stopped/);
});
