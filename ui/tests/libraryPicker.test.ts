// The Generate page's model picker over the engine's library: what it offers (checkpoints, model files
// with their companions, diffusers folders; what lacks a part says so and cannot be picked), which entry
// the form names, the VAE override's files, and the picked model travelling into the request.
import { describe, expect, it } from 'vitest';
import { buildGenerateBody, modelFormFromSettings, sampleDefaults } from '@/components/generate/requestBody';
import type { ArchInfo } from '@/components/generate/types';
import { entryTitle, pickedEntry, pickerGroups, vaeChoices, type LibraryEntry } from '@/components/library/library';

const entry = (over: Partial<LibraryEntry>): LibraryEntry => ({
  name: 'x',
  source: 'folder',
  path: '/m/x',
  repo: null,
  kind: 'checkpoint',
  tree: 'a1111',
  arch: 'sd1',
  variant: null,
  role: 'unet',
  dtype: 'f16',
  format: 'f16 original',
  bytes: 1000,
  complete: true,
  missing: [],
  model: null,
  ...over,
});

const pony = entry({
  name: 'Stable-diffusion/ponyXL.safetensors',
  path: '/w/models/Stable-diffusion/ponyXL.safetensors',
  model: { arch: 'sd1', name_or_path: '/w/models/Stable-diffusion/ponyXL.safetensors', local_only: true },
});
const unet = entry({
  name: 'diffusion_models/unet.safetensors',
  tree: 'comfyui',
  kind: 'single_file',
  path: '/c/models/diffusion_models/unet.safetensors',
  companions: { text_encoder: { path: '/c/models/text_encoders/clip_l.safetensors', name: 'text_encoders/clip_l.safetensors', kind: 'clip_l', label: 'CLIP-L' } },
  model: {
    arch: 'sd1',
    name_or_path: '/c/models/diffusion_models/unet.safetensors',
    local_only: true,
    components: { text_encoder: '/c/models/text_encoders/clip_l.safetensors' },
    extras_name_or_path: '/c/sd1-folder',
  },
});
const lacking = entry({
  name: 'checkpoints/no-vae.safetensors',
  tree: 'comfyui',
  path: '/c/models/checkpoints/no-vae.safetensors',
  complete: false,
  missing: ['vae: no KL VAE file in the text encoder or VAE folders'],
  missing_roles: ['vae'],
});
const folder = entry({ name: 'sd1-tiny', tree: 'plain', kind: 'pipeline', path: '/p/sd1-tiny', format: 'f32 diffusers', model: { arch: 'sd1', name_or_path: '/p/sd1-tiny' } });
const vae = entry({ name: 'VAE/other-vae.safetensors', kind: 'component', path: '/w/models/VAE/other-vae.safetensors', role: 'vae', fits: [{ arch: 'sd1', role: 'vae' }, { arch: 'sdxl', role: 'vae' }] });
const clip = entry({ name: 'text_encoders/clip_l.safetensors', tree: 'comfyui', kind: 'component', role: 'text_encoder', fits: [{ arch: 'sd1', role: 'text_encoder' }] });
const flux = entry({ name: 'checkpoints/flux.safetensors', arch: 'flux', model: { arch: 'flux', name_or_path: '/f' } });
const profile = entry({ name: 'p', source: 'profile', kind: 'pipeline', path: null, model: { profile: 'p' } });
const all = [lacking, pony, unet, folder, vae, clip, flux, profile];

describe('the model picker', () => {
  it('groups checkpoints, model files and folders; what lacks a part comes last and says what', () => {
    const groups = pickerGroups(all, ['sd1', 'zimage']);
    expect(groups.map((g) => g.label)).toEqual(['Checkpoints', 'Model files (with their text encoders and VAE)', 'Diffusers folders and repos']);
    const [ckpts, files, folders] = groups;
    expect(ckpts.options.map((o) => o.label)).toEqual(['ponyXL.safetensors (sd1, f16 original)', 'no-vae.safetensors (sd1, f16 original) — missing vae']);
    expect(ckpts.options.map((o) => o.why)).toEqual([null, 'vae: no KL VAE file in the text encoder or VAE folders']);
    expect(files.options.map((o) => o.entry)).toEqual([unet]);
    expect(folders.options.map((o) => o.label)).toEqual(['sd1-tiny (sd1, f32 diffusers)']);
  });

  it('offers only archs the engine serves, and never a component or a profile', () => {
    const keys = pickerGroups(all, ['sd1']).flatMap((g) => g.options.map((o) => o.entry.name));
    expect(keys).not.toContain('checkpoints/flux.safetensors');
    expect(keys).not.toContain(vae.name);
    expect(keys).not.toContain('p');
    expect(pickerGroups(all, [])).toEqual([]);
  });

  it('titles a tree entry by its path under the tree sub-folder, as A1111 lists it', () => {
    expect(entryTitle(pony)).toBe('ponyXL.safetensors');
    expect(entryTitle(entry({ name: 'Stable-diffusion/sdxl/juggernaut.safetensors' }))).toBe('sdxl/juggernaut.safetensors');
    expect(entryTitle(folder)).toBe('sd1-tiny');
  });

  it('finds the entry the form names', () => {
    expect(pickedEntry(all, { profile: '', arch: 'sd1', name_or_path: ` ${pony.path} ` })).toBe(pony);
    expect(pickedEntry(all, { profile: '', arch: 'sdxl', name_or_path: pony.path as string })).toBeNull();
    expect(pickedEntry(all, { profile: 'p', arch: 'sd1', name_or_path: '' })).toBeNull();
  });

  it("lists the VAE files that fit the form's arch", () => {
    expect(vaeChoices(all, 'sd1')).toEqual([{ name: 'other-vae.safetensors', path: vae.path }]);
    expect(vaeChoices(all, 'sdxl')).toEqual([{ name: 'other-vae.safetensors', path: vae.path }]);
    expect(vaeChoices(all, 'flux')).toEqual([]);
  });

  it('a picked model file goes out with its companions, extras and a VAE override', () => {
    const sd1 = { name: 'sd1', default_name_or_path: 'org/sd1', sample_extras: {}, variants: {}, default_variant: null, modality: 'image' } as unknown as ArchInfo;
    const form = modelFormFromSettings(sd1, [], unet.model as Record<string, unknown>);
    expect(form.name_or_path).toBe(unet.path);
    const sample = sampleDefaults({ width: 64, height: 64, num_inference_steps: 2, guidance_scale: 7, output_ext: 'png' }, sd1, { prompt: 'p' });
    const over = { ...form, components: { ...form.components, vae: vae.path as string } };
    expect(buildGenerateBody(sd1, over, sample, 'r', { detach: true, maxFrames: 8 }).model).toEqual({
      arch: 'sd1',
      name_or_path: unet.path,
      local_only: true,
      components: { text_encoder: '/c/models/text_encoders/clip_l.safetensors', vae: vae.path },
      extras_name_or_path: '/c/sd1-folder',
    });
  });
});
