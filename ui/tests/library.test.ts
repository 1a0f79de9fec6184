// The Library page's logic: filter, grouping by source, sizes, the missing default repos, and the
// /generate link whose `model` parameter the Generate page reads back into its forms.
import { describe, expect, it } from 'vitest';
import { buildGenerateBody, modelFormFromSettings, sampleDefaults } from '@/components/generate/requestBody';
import type { ArchInfo } from '@/components/generate/types';
import { filterEntries, formatBytes, generateHref, groupBySource, missingDefaults, missingDownload, parseModelParam, type LibraryEntry } from '@/components/library/library';

const entry = (over: Partial<LibraryEntry>): LibraryEntry => ({
  name: 'x',
  source: 'folder',
  path: '/m/x',
  repo: null,
  kind: 'pipeline',
  arch: 'sd1',
  variant: null,
  role: null,
  dtype: 'f32',
  format: 'f32 diffusers',
  bytes: 1000,
  complete: true,
  missing: [],
  model: { arch: 'sd1', name_or_path: '/m/x' },
  ...over,
});

const krea2: ArchInfo = {
  name: 'krea2',
  modality: 'image',
  default_name_or_path: '',
  defaults: { width: 1024, height: 1024, num_inference_steps: 8, guidance_scale: 0, num_frames: 1, fps: 0, duration: 0, output_ext: 'png' },
  size_divisor: 16,
  needs_ctrl_img: false,
  uses_negative_prompt: false,
  sample_extras: {},
  description: '',
  output_exts: ['png'],
  preview: { family: null, layout: 'BCHW', rgb_factors: null, rgb_bias: null },
  sample: { prompt: '', width: 1024, height: 1024, num_inference_steps: 8, guidance_scale: 0, seed: -1, output_ext: 'png' },
  variant_samples: {},
  variants: { turbo: {}, raw: {} },
  default_variant: 'turbo',
} as unknown as ArchInfo;

describe('library listing', () => {
  const entries = [
    entry({ name: 'b-sd1', source: 'folder' }),
    entry({ name: 'Org/Repo', source: 'hub', repo: 'Org/Repo', arch: 'zimage' }),
    entry({ name: 'a-krea', source: 'folder', arch: 'krea2', kind: 'single_file', format: 'comfy_scaled_fp8' }),
    entry({ name: 'turbo', source: 'profile', path: null, model: { profile: 'turbo' } }),
  ];

  it('groups by source in a fixed order, names sorted', () => {
    const groups = groupBySource(entries);
    expect(groups.map((g) => g.source)).toEqual(['hub', 'folder', 'profile']);
    expect(groups[1].entries.map((e) => e.name)).toEqual(['a-krea', 'b-sd1']);
    expect(groupBySource(entries.filter((e) => e.source !== 'hub')).map((g) => g.source)).toEqual(['folder', 'profile']);
  });

  it('filters on every word, across name, arch and format', () => {
    expect(filterEntries(entries, '').length).toBe(4);
    expect(filterEntries(entries, 'FP8').map((e) => e.name)).toEqual(['a-krea']);
    expect(filterEntries(entries, 'zimage org').map((e) => e.name)).toEqual(['Org/Repo']);
    expect(filterEntries(entries, 'krea2 diffusers')).toEqual([]);
  });

  it('formats sizes', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(20 * 1024 ** 3)).toBe('20 GiB');
    expect(formatBytes(-1)).toBe('?');
  });

  it('lists the default repos that are not here', () => {
    const archs = [
      { arch: 'zimage', variant: null, repo: 'Tongyi-MAI/Z-Image-Turbo', default_present: true },
      { arch: 'flux', variant: null, repo: 'bfl/flux', default_present: false, download: 'hf download bfl/flux' },
    ];
    expect(missingDefaults(archs).map((a) => a.download)).toEqual(['hf download bfl/flux']);
  });
});

describe('Use: the model travels to /generate', () => {
  const model = { arch: 'krea2', variant: 'turbo', local_only: true, components: { transformer: '/m/dm.safetensors', vae: '/m/v a&e.safetensors' } };

  it('round-trips through the query parameter', () => {
    const href = generateHref('job-1', model);
    const q = new URLSearchParams(href.split('?')[1]);
    expect(href.startsWith('/generate?')).toBe(true);
    expect(q.get('job')).toBe('job-1');
    expect(parseModelParam(q.get('model'))).toEqual(model);
    expect(generateHref(null, { profile: 'p' })).toBe(`/generate?model=${encodeURIComponent('{"profile":"p"}')}`);
  });

  it('refuses what is not a model', () => {
    for (const bad of [null, '', 'not json', '[1]', '"x"', '{"name_or_path": "/m"}']) expect(parseModelParam(bad)).toBeNull();
  });

  it('a single-file model keeps its components into the request, local only', () => {
    const form = modelFormFromSettings(krea2, [], model);
    expect(form.components).toEqual(model.components);
    expect(form.variant).toBe('turbo');
    const sample = sampleDefaults({ width: 64, height: 64, num_inference_steps: 2, guidance_scale: 0, output_ext: 'png' }, krea2, { prompt: 'p' });
    const body = buildGenerateBody(krea2, form, sample, 'r1', { detach: true, maxFrames: 8 });
    expect(body.model).toMatchObject({ arch: 'krea2', variant: 'turbo', local_only: true, components: model.components });
    expect(buildGenerateBody(krea2, { ...form, components: undefined }, sample, 'r2', { detach: true, maxFrames: 8 }).model).not.toHaveProperty('components');
  });
});

describe('missingDownload', () => {
  const archs = [
    { arch: 'zimage', variant: null, repo: 'Tongyi-MAI/Z-Image-Turbo', default_present: false, download: 'hf download Tongyi-MAI/Z-Image-Turbo' },
    { arch: 'sd1', variant: null, repo: 'org/sd1', default_present: true },
  ];
  const form = (over: Partial<{ profile: string; arch: string; name_or_path: string }>) => ({ profile: '', arch: 'zimage', name_or_path: 'Tongyi-MAI/Z-Image-Turbo', ...over });

  it("the arch's default repo, absent: its download command", () => {
    expect(missingDownload(archs, form({}))).toBe('hf download Tongyi-MAI/Z-Image-Turbo');
    expect(missingDownload(archs, form({ name_or_path: ' Tongyi-MAI/Z-Image-Turbo ' }))).toBe('hf download Tongyi-MAI/Z-Image-Turbo');
  });

  it('no note for a present repo, a typed path, a profile, or an unknown presence', () => {
    expect(missingDownload(archs, form({ arch: 'sd1', name_or_path: 'org/sd1' }))).toBeNull();
    expect(missingDownload(archs, form({ name_or_path: 'tiny:zimage' }))).toBeNull();
    expect(missingDownload(archs, form({ profile: 'mine' }))).toBeNull();
    expect(missingDownload(null, form({}))).toBeNull();
  });
});
