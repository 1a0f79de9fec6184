// The generation history lives in the UI's database, not the browser: results made in one
// browser context are there in a fresh one (no localStorage), searchable by a word of the
// prompt, filterable by model, and deleted (with their file on disk) after a confirm. An older
// page's localStorage gallery moves into the history once.
import fs from 'node:fs';
import path from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { TRAINING_FOLDER } from './env';
import { fillNumber, galleryItems, shot, startEngineOnPage, type HistoryItem, stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const JOB = 'inference_engine_history';
const ZIMAGE = 'zimage · tiny:zimage';
const SD1 = 'sd1 · tiny:sd1';

async function generateOne(page: Page, arch: string, prompt: string, seed: number) {
  await page.getByTestId('arch-select').selectOption(arch);
  await page.getByTestId('name-or-path').fill(`tiny:${arch}`);
  await page.getByTestId('prompt').fill(prompt);
  await fillNumber(page, 'width', 64);
  await fillNumber(page, 'height', 64);
  await fillNumber(page, 'steps', 2);
  await fillNumber(page, 'seed', seed);
  const before = await page.getByTestId('gallery-item').count();
  await page.getByTestId('generate-button').click();
  await expect(page.getByTestId('gallery-item')).toHaveCount(before + 1, { timeout: 180_000 });
  await expect(page.getByTestId('progress-text')).toHaveAttribute('data-phase', 'done');
}

const fileOnDisk = (item: HistoryItem) => path.join(TRAINING_FOLDER, item.jobName, 'outputs', item.result.relpath);

test('history survives a reload in a fresh browser context: search, model filter, delete with confirm', async ({ page, browser, baseURL }) => {
  page.on('console', (msg) => {
    if (msg.type() === 'error') console.log(`[browser] ${msg.text()}`);
  });
  const { job, strip } = await startEngineOnPage(page, JOB);

  let lighthouse: HistoryItem;
  let meadow: HistoryItem;
  await test.step('1. two results on two models are written to the history', async () => {
    await generateOne(page, 'zimage', 'a lighthouse on a stormy coast', 7);
    await generateOne(page, 'sd1', 'a quiet meadow at dawn', 8);
    const items = await galleryItems(page);
    [meadow, lighthouse] = items;
    expect(meadow.sample.prompt).toBe('a quiet meadow at dawn');
    expect(lighthouse).toMatchObject({ jobName: JOB, model: { arch: 'zimage', name_or_path: 'tiny:zimage' }, result: { seed: 7 } });
    expect(lighthouse.sample).toMatchObject({ prompt: 'a lighthouse on a stormy coast', num_inference_steps: 2, width: 64, height: 64 });
    // timings: this page's clock from submit to result, and the engine's run up to the last step
    expect(lighthouse.timings?.total_s).toBeGreaterThan(0);
    expect(lighthouse.timings?.run_s).toBeGreaterThan(0);
    expect(lighthouse.timings!.total_s!).toBeGreaterThanOrEqual(lighthouse.timings!.run_s!);
    expect(fs.existsSync(fileOnDisk(lighthouse))).toBe(true);
  });

  const context = await browser.newContext({ baseURL });
  const fresh = await context.newPage();
  const gallery = fresh.getByTestId('gallery-item');
  const search = fresh.getByLabel('Search prompts');
  const modelFilter = fresh.getByLabel('Filter by model');

  await test.step('2. a fresh browser context (no localStorage) shows both results', async () => {
    await fresh.goto('/generate');
    expect(await fresh.evaluate(() => window.localStorage.length)).toBe(0);
    await expect(gallery.filter({ hasText: 'a lighthouse on a stormy coast' })).toHaveCount(1);
    await expect(gallery.filter({ hasText: 'a quiet meadow at dawn' })).toHaveCount(1);
    await expect(gallery.first()).toContainText('a quiet meadow at dawn'); // newest first
    const img = gallery.filter({ hasText: 'lighthouse' }).getByTestId('gallery-media');
    await expect.poll(() => img.evaluate((el) => (el as HTMLImageElement).naturalWidth)).toBe(64);
    await shot(fresh, '40-history-fresh-context');
  });

  await test.step('3. search by a word of the prompt (any case), then filter by model', async () => {
    await search.fill('LIGHTHOUSE');
    await expect(gallery).toHaveCount(1);
    await expect(gallery).toContainText('a lighthouse on a stormy coast');
    await search.fill('no prompt has this');
    await expect(gallery).toHaveCount(0);
    await expect(fresh.getByTestId('gallery-empty')).toContainText('No results match');
    await search.fill('');

    await expect(modelFilter.locator(`option[value="${SD1}"]`)).toHaveCount(1);
    await expect(modelFilter.locator(`option[value="${ZIMAGE}"]`)).toHaveCount(1);
    await modelFilter.selectOption(SD1);
    await expect(gallery.filter({ hasText: 'a quiet meadow at dawn' })).toHaveCount(1);
    await expect(gallery.filter({ hasText: 'lighthouse' })).toHaveCount(0);
    const shown = await gallery.evaluateAll((els) => els.map((e) => e.getAttribute('data-model')));
    expect(new Set(shown)).toEqual(new Set([SD1]));
    await shot(fresh, '41-history-filtered');
    await modelFilter.selectOption(ZIMAGE);
    await expect(gallery.filter({ hasText: 'lighthouse' })).toHaveCount(1);
    await expect(gallery.filter({ hasText: 'meadow' })).toHaveCount(0);
  });

  await test.step('4. delete asks first (Escape keeps it), then deletes the entry and its file', async () => {
    await search.fill('lighthouse');
    await expect(gallery).toHaveCount(1);
    const card = gallery.first();
    await card.getByRole('button', { name: 'Delete' }).click();
    const confirm = card.getByRole('group', { name: 'Confirm delete' });
    await expect(confirm).toContainText('Delete this result and its file?');
    await expect(confirm.getByRole('button', { name: 'Keep' })).toBeFocused(); // a stray Enter deletes nothing
    await fresh.keyboard.press('Escape');
    await expect(confirm).toHaveCount(0);
    await expect(gallery).toHaveCount(1);
    expect(fs.existsSync(fileOnDisk(lighthouse))).toBe(true);

    // by keyboard: the focus is back on Delete; Enter, then from "Keep" back to "Yes, delete", Enter
    await expect(card.getByRole('button', { name: 'Delete' })).toBeFocused();
    await fresh.keyboard.press('Enter');
    await expect(confirm.getByRole('button', { name: 'Keep' })).toBeFocused();
    await shot(fresh, '42-history-confirm-delete');
    await fresh.keyboard.press('Shift+Tab');
    await expect(confirm.getByRole('button', { name: 'Yes, delete' })).toBeFocused();
    await fresh.keyboard.press('Enter');
    await expect(gallery).toHaveCount(0);
    expect(fs.existsSync(fileOnDisk(lighthouse))).toBe(false);
    expect(await galleryItems(fresh, '&q=lighthouse')).toEqual([]);
    // the other result and its file are untouched
    expect(fs.existsSync(fileOnDisk(meadow))).toBe(true);
    await search.fill('');
    await modelFilter.selectOption('');
    await expect(gallery.filter({ hasText: 'a quiet meadow at dawn' })).toHaveCount(1);
  });

  await test.step("5. an older page's localStorage gallery moves into the history once", async () => {
    const relpath = 'from-old-page.png';
    fs.copyFileSync(fileOnDisk(meadow), path.join(TRAINING_FOLDER, JOB, 'outputs', relpath));
    const old = { ...meadow, key: `old-page/${relpath}`, requestId: 'old-page', result: { ...meadow.result, relpath }, sample: { ...meadow.sample, prompt: 'kept by an old page' } };
    delete old.timings;
    await fresh.evaluate((it) => window.localStorage.setItem('aitk.gallery', JSON.stringify([it, { key: 'broken' }])), old);
    await fresh.reload();
    await expect(gallery.filter({ hasText: 'kept by an old page' })).toHaveCount(1);
    await expect(fresh.getByTestId('gallery-error')).toContainText('1 result(s)');
    expect(await fresh.evaluate(() => window.localStorage.getItem('aitk.gallery'))).toBeNull();
    expect((await galleryItems(fresh, '&q=kept%20by%20an%20old')).map((i) => i.key)).toEqual([old.key]);
  });

  await context.close();
  await page.getByTestId('engine-stop').click();
  await expect(strip).toHaveAttribute('data-state', 'stopped', { timeout: 60_000 });
  // the worker clears the pid once the engine process has exited
  const pidOf = async () => ((await (await page.request.get(`/api/jobs/${job.id}`)).json()).job.pid as number | null) ?? null;
  await expect.poll(pidOf, { timeout: 30_000 }).toBeNull();
});
