// Engine settings from the page (issue 23, item 2): the first run points a new engine at a models
// folder and the library lists what is there; the settings page, a form built from the engine's
// description, sets engine.lora_folder (a bad value refused next to its field, in the engine's
// words), saving restarts the engine (asking first while it holds requests), and the LoRA is then
// listed in the Generate page's LoRA panel.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { E2E_DIR } from './env';
import { ENGINE_START_MS, shot, startEngineOnPage, stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const REPO = path.join(__dirname, '..', '..');
const PYTHON = process.env.AITK_PYTHON || path.join(REPO, '.venv', 'bin', 'python');
const RESTART_MS = 2 * ENGINE_START_MS;

function python(code: string): string {
  return execFileSync(PYTHON, ['-c', code], { cwd: REPO }).toString().trim().split('\n').pop() as string;
}

async function stopJob(page: Page, id: string) {
  await page.request.post(`/api/jobs/${id}/stop`);
  await expect.poll(async () => (await (await page.request.get(`/api/jobs/${id}`)).json()).job.status, { timeout: 90_000 }).not.toMatch(/^(running|queued|stopping)$/);
}

/** A person with no engine job yet: the engine jobs earlier specs left behind are stopped and removed. */
async function noEngineJobs(page: Page) {
  const jobs = async () => (await (await page.request.get('/api/jobs?job_type=inference')).json()).jobs as { id: string; status: string }[];
  for (const job of await jobs()) {
    if (['running', 'queued', 'stopping'].includes(job.status)) await stopJob(page, job.id);
    expect((await page.request.delete(`/api/jobs/${job.id}`)).status()).toBe(200);
  }
  expect(await jobs()).toHaveLength(0);
}

test('first run: the Generate page points a new engine at a models folder; the library lists it', async ({ page }) => {
  await noEngineJobs(page);
  const folder = path.join(E2E_DIR, 'first-run-models');
  fs.cpSync(python("from toolkit.models.tiny import cached_tiny; print(cached_tiny('sd1'))"), path.join(folder, 'sd1-tiny'), { recursive: true });
  await page.goto('/generate');
  const strip = page.getByTestId('engine-strip');
  await expect(strip).toHaveAttribute('data-state', 'none');
  const offer = page.getByTestId('models-folder-offer');
  await expect(offer).toBeVisible();

  // a folder that is not there: the engine's check names the key, nothing is created
  await page.getByTestId('models-folder-path').fill(path.join(E2E_DIR, 'no-such-folder'));
  await page.getByTestId('models-folder-use').click();
  await expect(page.getByTestId('models-folder-problem')).toContainText('engine.model_folders: must be a list of existing folders');
  await page.getByTestId('models-folder-kind').selectOption('comfyui');
  await page.getByTestId('models-folder-path').fill(folder);
  await page.getByTestId('models-folder-use').click();
  await expect(page.getByTestId('models-folder-problem')).toContainText('engine.comfyui_path: must be a ComfyUI install');
  expect((await (await page.request.get('/api/jobs?job_type=inference')).json()).jobs).toHaveLength(0);

  await page.getByTestId('models-folder-kind').selectOption('folders');
  await page.getByTestId('models-folder-use').click();
  await expect(strip).toHaveAttribute('data-state', 'ready', { timeout: ENGINE_START_MS });
  const started = page.getByTestId('first-run-started');
  await expect(started).toContainText(folder);
  const { jobs } = await (await page.request.get('/api/jobs?job_type=inference')).json();
  expect(jobs).toHaveLength(1);
  expect(jobs[0].job_config.config.process[0].engine.model_folders).toEqual([folder]);
  await shot(page, 'settings-01-first-run');

  await started.getByRole('link', { name: 'Library' }).click();
  await expect(page.locator('[data-testid=library-entry][data-name="sd1-tiny"]')).toHaveAttribute('data-arch', 'sd1', { timeout: 30_000 });
  await noEngineJobs(page); // the specs after this one start from no engine job, as before it
});

test('the settings page sets the LoRA folder; saving restarts the engine; the LoRA is then listed', async ({ page }) => {
  const loras = path.join(E2E_DIR, 'settings-loras');
  fs.mkdirSync(loras, { recursive: true });
  execFileSync(PYTHON, ['-m', 'toolkit.models.tiny.loras', 'sd1', path.join(loras, 'styleS.safetensors'), '--format', 'kohya'], { cwd: REPO, stdio: 'inherit' });
  const { job } = await startEngineOnPage(page, 'inference_engine_settings');
  const panel = page.getByTestId('lora-panel');
  await page.getByTestId('arch-select').selectOption('sd1');
  await page.getByTestId('name-or-path').fill('tiny:sd1');

  await test.step('the LoRA panel says which paths the engine reads, and links to the LoRA folder setting', async () => {
    await expect(page.getByTestId('lora-empty')).toContainText('engine.lora_folder');
    await page.getByLabel('LoRA path').fill('/nonexistent/lora.safetensors');
    await page.getByTestId('lora-path-add').click();
    await expect(page.getByTestId('lora-pick')).toContainText('only under its model roots (engine.model_roots)');
    const refusal = page.getByTestId('lora-problem');
    await expect(refusal).toContainText('engine.model_roots', { timeout: 20_000 });
    await expect(refusal.getByTestId('lora-problem-settings')).toHaveAttribute('href', `/jobs/${job.id}/settings#setting-model_roots`);
    await page.getByTestId('lora-remove').click();
    await page.getByTestId('lora-folder-link').click();
  });

  const field = page.getByTestId('setting-lora_folder');
  await test.step('the form is the engine description: each field with its key, doc and default', async () => {
    await expect(page).toHaveURL(new RegExp(`/jobs/${job.id}/settings#setting-lora_folder$`));
    await expect(page.getByTestId('engine-settings')).toHaveAttribute('data-loaded', 'true');
    await expect(field).toBeFocused();
    const { fields } = await (await page.request.get('/api/engine-settings')).json();
    for (const key of Object.keys(fields).filter((k) => k !== 'limits')) await expect(page.getByTestId(`setting-${key}`)).toHaveCount(1);
    for (const key of Object.keys(fields.limits.fields)) await expect(page.getByTestId(`setting-limits.${key}`)).toHaveCount(1);
    const row = page.locator('.setting[data-key="max_batch"]');
    await expect(row).toContainText('engine.max_batch');
    await expect(row).toContainText(fields.max_batch.doc);
    await expect(row).toContainText('Default: 4');
    await expect(page.getByTestId('setting-prefetch').locator('option')).toHaveText(['default (on)', 'on', 'off']);
    // a new engine (no model folders yet) is offered its models folder: it fills the form, Save applies it
    await page.getByTestId('models-folder-path').fill(E2E_DIR);
    await page.getByRole('button', { name: 'Fill in below' }).click();
    await expect(page.getByTestId('setting-model_folders')).toHaveValue(E2E_DIR);
    await page.getByTestId('models-folder-kind').selectOption('comfyui');
    await page.getByRole('button', { name: 'Fill in below' }).click();
    await expect(page.getByTestId('setting-comfyui_path')).toHaveValue(E2E_DIR);
    await page.getByTestId('setting-model_folders').fill('');
    await page.getByTestId('setting-comfyui_path').fill('');
    await shot(page, 'settings-02-form');
  });

  await test.step('a bad value is refused next to its field: the form bound, then the engine check', async () => {
    await page.getByTestId('setting-max_batch').fill('0');
    await page.getByTestId('settings-save').click();
    await expect(page.getByTestId('setting-error-max_batch')).toHaveText('engine.max_batch: must be >= 1, got 0');
    await page.getByTestId('setting-max_batch').fill('2');
    await field.fill(path.join(E2E_DIR, 'no-such-loras'));
    await page.getByTestId('settings-save').click();
    await expect(page.getByTestId('setting-error-lora_folder')).toContainText('engine.lora_folder: must be an existing folder');
    const saved = await (await page.request.get(`/api/jobs/${job.id}/settings`)).json();
    expect(saved.engine).toEqual({});
  });

  await test.step('saving writes the job config and restarts the engine', async () => {
    await field.fill(loras);
    await page.getByTestId('settings-save').click();
    await expect(page.getByTestId('settings-status')).toHaveAttribute('data-phase', 'restarted', { timeout: RESTART_MS });
    const saved = await (await page.request.get(`/api/jobs/${job.id}/settings`)).json();
    expect(saved.engine).toEqual({ lora_folder: loras, max_batch: 2 });
    const health = await (await page.request.get(`/api/inference/health?job=${job.id}`)).json();
    expect(health.busy).toBe(false);
    await shot(page, 'settings-03-restarted');
  });

  await test.step('the Generate page lists the LoRA from the new folder', async () => {
    await page.getByTestId('settings-to-generate').click();
    await expect(page.getByTestId('engine-strip')).toHaveAttribute('data-state', 'ready', { timeout: ENGINE_START_MS });
    await page.getByTestId('arch-select').selectOption('sd1');
    await expect(panel).toHaveAttribute('data-folder', loras);
    await expect(page.getByTestId('lora-select').locator('option', { hasText: 'styleS' })).toHaveCount(1);
    await expect(page.getByTestId('lora-empty')).toHaveCount(0);
    await shot(page, 'settings-04-lora-listed');
  });

  await test.step('a busy engine: saving asks before a restart ends its requests', async () => {
    const blocker = page.request
      .post(`/api/inference/generate?job=${job.id}`, {
        data: {
          model: { arch: 'sd1', name_or_path: 'tiny:sd1' },
          sample: { prompt: 'blocker', width: 64, height: 64, num_inference_steps: 1000 },
          request_id: 'e2e-settings-blocker',
          stream: { latents: 'none', detach: true },
        },
        timeout: RESTART_MS,
      })
      .catch((err: Error) => err); // the restart ends it
    await expect
      .poll(async () => (await (await page.request.get(`/api/inference/queue?job=${job.id}`)).json()).running?.request_id ?? null, { timeout: 60_000 })
      .toBe('e2e-settings-blocker');
    await page.goto(`/jobs/${job.id}/settings`);
    await expect(page.getByTestId('engine-settings')).toHaveAttribute('data-loaded', 'true');
    await page.getByTestId('setting-max_batch').fill('3');
    await page.getByTestId('settings-save').click();
    const confirm = page.getByTestId('restart-confirm');
    await expect(confirm).toContainText('The engine is busy with 1 request: restart anyway?');
    await page.getByTestId('restart-later').click();
    await expect(page.getByTestId('settings-status')).toHaveAttribute('data-phase', 'saved');
    expect((await (await page.request.get(`/api/jobs/${job.id}/settings`)).json()).engine.max_batch).toBe(3);
    expect((await (await page.request.get(`/api/inference/queue?job=${job.id}`)).json()).running?.request_id).toBe('e2e-settings-blocker');

    await page.getByTestId('settings-save').click();
    await expect(confirm).toBeVisible();
    await shot(page, 'settings-05-busy');
    await page.getByTestId('restart-anyway').click();
    await expect(page.getByTestId('settings-status')).toHaveAttribute('data-phase', 'restarted', { timeout: RESTART_MS });
    await blocker;
    expect((await (await page.request.get(`/api/inference/queue?job=${job.id}`)).json()).running).toBeNull();
  });
  await noEngineJobs(page);
});
