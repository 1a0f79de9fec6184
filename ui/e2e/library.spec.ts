// The Library page end to end: an engine whose engine.model_folders holds a tiny sd1 diffusers
// folder lists it (arch, format, size, complete); Use opens /generate with it filled in, and it
// generates a picture.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from '@playwright/test';
import { E2E_DIR, SCREENSHOTS } from './env';
import { galleryItems, stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const LIBRARY_JOB = 'inference_engine_library';
const REPO = path.join(__dirname, '..', '..');
const PYTHON = process.env.AITK_PYTHON || path.join(REPO, '.venv', 'bin', 'python');

test('Library: a tiny model from engine.model_folders, used on the Generate page, generates', async ({ page }) => {
  test.setTimeout(300_000);
  page.on('console', (msg) => {
    if (msg.type() === 'error') console.log(`[browser] ${msg.text()}`);
  });
  const tinySd1 = execFileSync(PYTHON, ['-c', "from toolkit.models.tiny import cached_tiny; print(cached_tiny('sd1'))"], { cwd: REPO })
    .toString()
    .trim()
    .split('\n')
    .pop() as string;
  const folder = path.join(E2E_DIR, 'library-models');
  fs.cpSync(tinySd1, path.join(folder, 'sd1-tiny'), { recursive: true });
  const created = await page.request.post('/api/jobs', {
    data: {
      name: LIBRARY_JOB,
      gpu_ids: 'cpu',
      job_type: 'inference',
      job_config: { job: 'extension', config: { process: [{ type: 'InferenceEngine', engine: { model_folders: [folder] } }] } },
    },
  });
  expect(created.status()).toBe(201);
  const { job } = await created.json();
  await page.goto(`/generate?job=${job.id}`);
  await page.getByTestId('engine-start').click();
  await expect(page.getByTestId('engine-strip')).toHaveAttribute('data-state', 'ready', { timeout: 90_000 });

  await page.goto(`/library?job=${job.id}`);
  await expect(page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Library' })).toHaveClass(/active/);
  const row = page.locator('[data-testid=library-entry][data-name="sd1-tiny"]');
  await expect(row).toHaveCount(1, { timeout: 30_000 });
  await expect(row).toHaveAttribute('data-arch', 'sd1');
  await expect(row).toContainText('pipeline');
  await expect(row).toContainText('diffusers');
  await expect(row).toContainText(/\d (KiB|MiB)/);
  await expect(row).toContainText('yes');
  // the filter hides what does not match, and shows it again
  await page.getByTestId('library-filter').fill('no-such-model');
  await expect(row).toHaveCount(0);
  await page.getByTestId('library-filter').fill('sd1 tiny');
  await expect(row).toHaveCount(1);
  // a default repo not on this machine has its download command, one row per variant (the filter
  // applies to that list too: cleared first)
  await page.getByTestId('library-filter').fill('');
  await expect(page.locator('[data-testid=library-download][data-arch=flux][data-variant=dev]')).toContainText('hf download black-forest-labs/FLUX.1-dev');
  await expect(page.locator('[data-testid=library-download][data-arch=flux][data-variant=schnell]')).toContainText('hf download black-forest-labs/FLUX.1-schnell');
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, '30-library.png'), fullPage: true });

  await row.getByTestId('library-use').click();
  await expect(page).toHaveURL(/\/generate\?/);
  await expect(page.getByTestId('engine-strip')).toHaveAttribute('data-state', 'ready', { timeout: 30_000 });
  await expect(page.getByTestId('arch-select')).toHaveValue('sd1');
  await expect(page.getByTestId('name-or-path')).toHaveValue(path.join(folder, 'sd1-tiny'));
  await page.getByTestId('prompt').fill('a fox in snow');
  for (const [id, v] of [['width', 64], ['height', 64], ['steps', 2]] as const) {
    await page.getByTestId(id).fill(String(v));
    await page.getByTestId(id).blur();
  }
  const before = await page.getByTestId('gallery-item').count();
  await page.getByTestId('generate-button').click();
  await expect(page.getByTestId('gallery-item')).toHaveCount(before + 1, { timeout: 180_000 });
  await expect(page.getByTestId('progress-text')).toHaveAttribute('data-phase', 'done');
  const items = await galleryItems(page);
  expect(items[0].model).toMatchObject({ arch: 'sd1', name_or_path: path.join(folder, 'sd1-tiny') });
  await page.screenshot({ path: path.join(SCREENSHOTS, '31-library-generated.png'), fullPage: true });
  await page.getByTestId('engine-stop').click();
});
