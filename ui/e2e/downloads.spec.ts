// The model manager end to end: the library lists the tiny models with Use (and the filter applies to
// every list, saying "No model matches" only for a filter); a hub repo downloaded from the local fake hub
// (testing/fake_hub.py, the engine's HF_ENDPOINT: playwright.config.ts) shows its progress with the
// bytes left, is cancelled and resumed, and is then listed with Use, which opens /generate with it.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { E2E_DIR } from './env';
import { shot, startEngineOnPage, stopEnginesAfterFailure } from './helpers';

const JOBS = ['inference_engine_models', 'inference_engine_downloads'];

// this spec's engine jobs are removed when it ends: the Generate page opens on the first job of its
// device, and the specs after this one expect theirs
test.afterEach(async ({ request }, testInfo) => {
  await stopEnginesAfterFailure({ request }, testInfo);
  const jobs = (await (await request.get('/api/jobs?job_type=inference')).json()).jobs as { id: string; name: string }[];
  for (const j of jobs.filter((x) => JOBS.includes(x.name))) expect((await request.delete(`/api/jobs/${j.id}`)).ok()).toBe(true);
});

const HUB = `http://127.0.0.1:${process.env.AITK_E2E_HUB_PORT}`;
const REPO = 'e2e-org/sd1-tiny';
const UNET = 'unet/diffusion_pytorch_model.safetensors';
const ROOT = path.join(__dirname, '..', '..');
const PYTHON = process.env.AITK_PYTHON || path.join(ROOT, '.venv', 'bin', 'python');

/** Stop the engine from the Generate page and wait until it is down: the next spec starts from no running engine. */
async function stopEngine(page: Page) {
  await page.getByTestId('engine-stop').click();
  await expect(page.getByTestId('engine-strip')).toHaveAttribute('data-state', /^(stopped|none)$/, { timeout: 90_000 });
}

test('Library: the tiny models with Use, and the filter over every list', async ({ page }) => {
  const { job } = await startEngineOnPage(page, JOBS[0]);
  await page.goto(`/library?job=${job.id}`);
  const tiny = page.locator('[data-testid=library-group-tiny] [data-testid=library-entry][data-name="tiny:zimage"]');
  await expect(tiny).toHaveCount(1, { timeout: 30_000 });
  await expect(tiny).toHaveAttribute('data-arch', 'zimage');
  await expect(page.getByTestId('library-empty')).toHaveCount(0);          // an empty filter hides nothing
  // the filter applies to the missing defaults too, and says so only when it hides everything
  await page.getByTestId('library-filter').fill('FLUX.1-dev');
  await expect(page.getByTestId('library-entry')).toHaveCount(0);
  await expect(page.getByTestId('library-download')).toHaveCount(1);
  // its Download button asks the engine (the fake hub has no such repo: the row says what the hub said)
  await page.getByTestId('library-download').getByTestId('library-download-start').click();
  const flux = page.locator('[data-testid=download-row][data-source="black-forest-labs/FLUX.1-dev"]');
  await expect(flux).toHaveAttribute('data-status', 'failed', { timeout: 60_000 });
  await expect(flux.getByTestId('download-progress')).toContainText('RepositoryNotFound');
  await flux.getByTestId('download-dismiss').click();
  await expect(flux).toHaveCount(0);
  await page.getByTestId('library-filter').fill('no-such-model');
  await expect(page.getByTestId('library-download')).toHaveCount(0);
  await expect(page.getByTestId('library-empty')).toHaveText('No model matches "no-such-model".');
  await page.getByTestId('library-filter').fill('tiny zimage');
  await expect(tiny).toHaveCount(1);
  await tiny.getByTestId('library-use').click();
  await expect(page).toHaveURL(/\/generate\?/);
  await expect(page.getByTestId('arch-select')).toHaveValue('zimage');
  await expect(page.getByTestId('name-or-path')).toHaveValue('tiny:zimage');
  await stopEngine(page);
});

test('Library: a hub repo downloaded from the fake hub, with progress, cancel and resume, then used', async ({ page, request }) => {
  test.setTimeout(300_000);
  const tinySd1 = execFileSync(PYTHON, ['-c', "from toolkit.models.tiny import cached_tiny; print(cached_tiny('sd1'))"], { cwd: ROOT })
    .toString()
    .trim()
    .split('\n')
    .pop() as string;
  fs.cpSync(tinySd1, path.join(E2E_DIR, 'fake-hub', ...REPO.split('/')), { recursive: true });
  // the unet's body stops after 1000 bytes until released: the download is seen running, part done
  expect((await request.post(`${HUB}/_control?hold=${encodeURIComponent(`${UNET}:1000`)}`)).ok()).toBe(true);

  const { job } = await startEngineOnPage(page, JOBS[1]);
  await page.goto(`/library?job=${job.id}`);
  await page.getByTestId('download-source').fill(REPO);
  await page.getByTestId('download-start').click();
  const row = page.locator(`[data-testid=download-row][data-source="${REPO}"]`);
  await expect(row).toHaveAttribute('data-status', 'running');
  await expect(row.getByTestId('download-progress')).toContainText(/ of .* left$/);
  expect(Number(await row.getAttribute('data-left'))).toBeGreaterThan(0);
  await shot(page, '32-library-download-progress');

  await row.getByTestId('download-cancel').click();
  await expect(row).toHaveAttribute('data-status', 'cancelled');
  await expect(row.getByTestId('download-progress')).toContainText('cancelled at');
  // not usable half-done: listed as incomplete, without Use
  await page.getByTestId('library-refresh').click();
  const entry = page.locator(`[data-testid=library-group-hub] [data-testid=library-entry][data-name="${REPO}"]`);
  await expect(entry).toContainText('no:');
  await expect(entry.getByTestId('library-use')).toHaveCount(0);

  await row.getByTestId('download-resume').click();
  await expect(row).toHaveAttribute('data-status', 'running');
  expect((await request.post(`${HUB}/_control?release=1`)).ok()).toBe(true);
  await expect(row).toHaveAttribute('data-status', 'done', { timeout: 60_000 });
  await expect(row.getByTestId('download-progress')).toContainText('done');
  // the library is listed again when it finishes: the repo is there, complete, with Use
  await expect(entry).toHaveAttribute('data-arch', 'sd1');
  await expect(entry).toContainText('yes');
  await shot(page, '33-library-downloaded');
  await entry.getByTestId('library-use').click();
  await expect(page).toHaveURL(/\/generate\?/);
  await expect(page.getByTestId('arch-select')).toHaveValue('sd1');
  await expect(page.getByTestId('name-or-path')).toHaveValue(REPO);
  await stopEngine(page);
});
