// The models folders people have, end to end: an engine whose engine.model_folders are a tiny A1111
// install (models/Stable-diffusion, models/VAE) and a tiny ComfyUI install (models/diffusion_models,
// text_encoders, vae, and its comfy/sd1_tokenizer). The Generate page's model picker lists the
// checkpoints and the model file with the companions it takes; one pick fills the form and it
// generates; a VAE from the folders overrides a model's own.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { expect, test } from '@playwright/test';
import { E2E_DIR } from './env';
import { ENGINE_START_MS, fillNumber, galleryItems, shot, stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const JOB = 'inference_engine_model_trees';
const REPO = path.join(__dirname, '..', '..');
const PYTHON = process.env.AITK_PYTHON || path.join(REPO, '.venv', 'bin', 'python');

interface Trees {
  webui: string;
  comfy: string;
  comfy_install: string;
}

function buildTrees(base: string): Trees {
  const code =
    'import json, pathlib, sys; from testing.tests.test_files_library import build_trees; ' +
    'from toolkit.models.tiny import cached_tiny; ' +
    't = build_trees(pathlib.Path(sys.argv[1]), lambda arch, seed=0: str(cached_tiny(arch, seed))); print(json.dumps(t))';
  const out = execFileSync(PYTHON, ['-c', code, base], { cwd: REPO }).toString().trim().split('\n').pop() as string;
  return JSON.parse(out) as Trees;
}

async function generate(page: import('@playwright/test').Page) {
  await page.getByTestId('prompt').fill('a fox in snow');
  await fillNumber(page, 'width', 64);
  await fillNumber(page, 'height', 64);
  await fillNumber(page, 'steps', 2);
  const before = await page.getByTestId('gallery-item').count();
  await page.getByTestId('generate-button').click();
  await expect(page.getByTestId('gallery-item')).toHaveCount(before + 1, { timeout: 180_000 });
  await expect(page.getByTestId('progress-text')).toHaveAttribute('data-phase', 'done');
  return (await galleryItems(page))[0];
}

test('Model picker: a checkpoint from an A1111 tree and a ComfyUI model file with its companions generate', async ({ page }) => {
  test.setTimeout(420_000);
  page.on('console', (msg) => {
    if (msg.type() === 'error') console.log(`[browser] ${msg.text()}`);
  });
  const trees = buildTrees(path.join(E2E_DIR, 'model-trees'));
  const webuiInstall = path.dirname(trees.webui);
  const created = await page.request.post('/api/jobs', {
    data: {
      name: JOB,
      gpu_ids: 'cpu',
      job_type: 'inference',
      job_config: { job: 'extension', config: { process: [{ type: 'InferenceEngine', engine: { model_folders: [webuiInstall, trees.comfy_install] } }] } },
    },
  });
  expect(created.status()).toBe(201);
  const { job } = await created.json();
  await page.goto(`/generate?job=${job.id}`);
  await page.getByTestId('engine-start').click();
  await expect(page.getByTestId('engine-strip')).toHaveAttribute('data-state', 'ready', { timeout: ENGINE_START_MS });

  // the picker: both trees' models; the checkpoint without a VAE takes one from the folders
  const picker = page.getByTestId('library-pick');
  await expect(picker.locator('option', { hasText: 'ponyTiny.safetensors (sd1, f16 original)' })).toHaveCount(1, { timeout: 30_000 });
  await expect(picker.locator('option', { hasText: 'tiny_unet.safetensors (sd1' })).toHaveCount(1);
  await expect(picker.locator('option', { hasText: 'no-vae.safetensors (sd1' })).toBeEnabled();

  // one pick: the A1111 checkpoint fills the form, and generates
  await picker.selectOption({ label: 'ponyTiny.safetensors (sd1, f16 original)' });
  const pony = path.join(trees.webui, 'Stable-diffusion', 'ponyTiny.safetensors');
  await expect(page.getByTestId('arch-select')).toHaveValue('sd1');
  await expect(page.getByTestId('name-or-path')).toHaveValue(pony);
  await shot(page, '32-model-picker');
  const first = await generate(page);
  expect(first.model).toMatchObject({ arch: 'sd1', name_or_path: pony });

  // the ComfyUI model file: its companions named, sent as components; a VAE from the A1111 tree over them
  await picker.selectOption({ label: 'tiny_unet.safetensors (sd1, f32 original)' });
  const unet = path.join(trees.comfy, 'diffusion_models', 'tiny_unet.safetensors');
  await expect(page.getByTestId('name-or-path')).toHaveValue(unet);
  await expect(page.getByTestId('library-companions')).toContainText('text_encoder: text_encoders/clip_l.safetensors');
  await expect(page.getByTestId('library-companions')).toContainText('vae: vae/vae-ft-mse.safetensors');
  const otherVae = path.join(trees.webui, 'VAE', 'other-vae.safetensors');
  await page.getByTestId('vae-select').selectOption({ label: 'other-vae.safetensors' });
  await expect(page.getByTestId('library-companions')).toContainText('vae: other-vae.safetensors (chosen)');
  const second = await generate(page);
  expect(second.model).toMatchObject({
    arch: 'sd1',
    name_or_path: unet,
    components: { text_encoder: path.join(trees.comfy, 'text_encoders', 'clip_l.safetensors'), vae: otherVae },
  });
  await shot(page, '33-model-picker-generated');
  await page.getByTestId('engine-stop').click();
});
