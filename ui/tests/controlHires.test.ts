// ControlNets, the hires fix and the upscale task as requests carry them (controlHires.ts), against the
// served sd1 row (tests/fixtures/models.json: its `controls` and `fields.hires`); the grid's control
// scale and hires denoise axes applied to the nested fields.
import { describe, expect, it } from 'vitest';
import {
  controlClassOf,
  controlModelValue,
  controlModelsFor,
  controlsFromSettings,
  controlsRequest,
  hiresDefaults,
  hiresRequest,
  newControl,
  preprocessorUnavailable,
  upscaleDefaults,
  upscaleSample,
} from '@/components/generate/controlHires';
import { buildGenerateBody, formsFromSettings, modelDefaults, resolvedDefaults, sampleDefaults } from '@/components/generate/requestBody';
import { planGrid, type AxisSpec, type GridBase } from '@/components/grid/axes';
import { applyFrame, IDLE, stepText } from '@/components/generate/generationView';
import { upscaleBody } from '@/components/generate/useUpscale';
import type { ArchInfo, GalleryItem } from '@/components/generate/types';
import { servedArch } from './archRow';

const sd1 = servedArch('sd1');
const ltx = servedArch('ltx');
const stream = { detach: true, maxFrames: 8 };
const form = (a: ArchInfo, keep = {}) => sampleDefaults(resolvedDefaults(a, ''), a, { prompt: 'fox', seed: 3, ...keep });

const control = (over = {}) => ({ ...newControl('tiny_cn.safetensors'), image: 'abc.png', ...over });

describe('sample.controls', () => {
  it('sends each panel with an image and a model, in order, sliders only when set', () => {
    const controls = [control(), { ...newControl(''), image: 'x.png' }, control({ image: null }), control({ preprocessor: 'canny', threshold_a: 50, scale: 0.5, start: 0.1, end: 0.8, resize_mode: 'fill' })];
    const body = buildGenerateBody(sd1, modelDefaults(sd1), form(sd1, { controls }), 'r', stream);
    expect(body.sample.controls).toEqual([
      { model: 'tiny_cn.safetensors', image: 'abc.png', preprocessor: 'none', scale: 1, start: 0, end: 1, resize_mode: 'crop' },
      { model: 'tiny_cn.safetensors', image: 'abc.png', preprocessor: 'canny', scale: 0.5, start: 0.1, end: 0.8, resize_mode: 'fill', threshold_a: 50 },
    ]);
  });

  it('none sent where no panel is complete, or the arch takes no controls', () => {
    expect(buildGenerateBody(sd1, modelDefaults(sd1), form(sd1, { controls: [control({ model: '' })] }), 'r', stream).sample).not.toHaveProperty('controls');
    expect(controlsRequest(ltx, [control()])).toEqual([]);
  });

  it('a union mode only where the arch has a union class; the class found by the library entry label', () => {
    expect(controlsRequest(sd1, [control({ mode: 'canny' })])[0]).not.toHaveProperty('mode');
    const union: ArchInfo = { ...sd1, controls: [...(sd1.controls ?? []), { class: 'ControlNetUnionModel', label: 'SDXL ControlNet Union', tasks: ['txt2img'], modes: ['openpose', 'depth', 'canny'] }] };
    expect(controlsRequest(union, [control({ mode: 'canny' })])[0].mode).toBe('canny');
    const entry = { name: 'promax', path: '/m/promax', kind: 'controlnet', archs: ['sd1'], label: 'SDXL ControlNet Union', complete: true, missing: [] };
    expect(controlClassOf(union, entry)?.modes).toEqual(['openpose', 'depth', 'canny']);
    expect(controlClassOf(sd1, { ...entry, label: 'SD 1.x ControlNet' })?.modes).toEqual([]);
  });

  it('offers the library controlnets whose archs include the arch', () => {
    const entries = [
      { kind: 'controlnet', name: 'a', archs: ['sd1'], complete: true },
      { kind: 'controlnet', name: 'b', archs: ['sdxl'], complete: true },
      { kind: 'controlnet', name: 'c', archs: ['sd1'], complete: false },
      { kind: 'checkpoint', name: 'd', archs: ['sd1'] },
    ];
    expect(controlModelsFor(entries, sd1).map((e) => e.name)).toEqual(['a']);
    expect(controlModelsFor(null, sd1)).toEqual([]);
  });

  it('names a library entry as the engine finds it: by its name in the controlnet directory, deeper by its path', () => {
    expect(controlModelValue({ name: 'controlnet/cn.safetensors', path: '/c/models/controlnet/cn.safetensors' })).toBe('cn.safetensors');
    expect(controlModelValue({ name: 'ControlNet/control_v11p_sd15_canny.pth', path: '/a/models/ControlNet/control_v11p_sd15_canny.pth' })).toBe('control_v11p_sd15_canny.pth');
    expect(controlModelValue({ name: 'controlnet/sdxl/promax', path: '/c/models/controlnet/sdxl/promax' })).toBe('/c/models/controlnet/sdxl/promax');
  });

  it('says why a preprocessor cannot be picked', () => {
    expect(preprocessorUnavailable({ name: 'canny', model: null, params: {}, available: true })).toBeNull();
    expect(preprocessorUnavailable({ name: 'depth_anything', model: 'depth_anything', params: {}, available: false })).toMatch(/depth_anything.*not on this machine/);
  });

  it('comes back from a result settings (Reuse)', () => {
    const sent = controlsRequest(sd1, [control({ preprocessor: 'canny', threshold_b: 180, scale: 0.7 })]);
    const back = controlsFromSettings(sd1, [{ ...sent[0], image: '/engine/assets/abc.png' }]);
    expect(controlsRequest(sd1, back)).toEqual(sent);
    const { sample } = formsFromSettings(sd1, [], { arch: 'sd1' }, { prompt: 'fox', controls: sent, hires: { scale: 1.5, upscaler: 'Lanczos', steps: 4, denoise: 0.4 } });
    expect(sample.controls?.[0].scale).toBe(0.7);
    expect(sample.hires).toEqual({ enabled: true, scale: 1.5, upscaler: 'Lanczos', steps: 4, denoise: 0.4 });
  });
});

describe('sample.hires', () => {
  it('starts off at the served defaults; sent only when on', () => {
    const d = hiresDefaults(sd1);
    expect(d).toEqual({ enabled: false, scale: 2, upscaler: 'Latent', steps: 0, denoise: 0.7 });
    expect(buildGenerateBody(sd1, modelDefaults(sd1), form(sd1, { hires: d }), 'r', stream).sample).not.toHaveProperty('hires');
    const on = { ...d, enabled: true, scale: 1.5, upscaler: 'Lanczos', denoise: 0.5, steps: 3 };
    expect(buildGenerateBody(sd1, modelDefaults(sd1), form(sd1, { hires: on }), 'r', stream).sample.hires).toEqual({ scale: 1.5, upscaler: 'Lanczos', steps: 3, denoise: 0.5 });
  });

  it('not on an arch without an img2img task', () => {
    expect(ltx.fields.hires).toBeUndefined();
    expect(hiresRequest(ltx, { ...hiresDefaults(sd1), enabled: true })).toBeNull();
  });

  it('the preview names the pass its frames are of, and measures the ETA afresh', () => {
    let v = applyFrame({ ...IDLE, phase: 'running' }, { request_id: 'r', type: 'progress', step: 4, total: 4, elapsed: 2, pass: 'base' });
    expect(v.pass).toBe('base');
    v = applyFrame(v, { request_id: 'r', type: 'status', stage: 'pass', pass: 'hires', message: 'hires pass' });
    v = applyFrame(v, { request_id: 'r', type: 'progress', step: 1, total: 3, elapsed: 3, pass: 'hires' });
    expect(v.pass).toBe('hires');
    expect(v.firstProgress).toEqual({ step: 1, elapsed: 3 });
    expect(stepText(v)).toBe('at step 1/3 of the hires pass');
    expect(applyFrame({ ...IDLE, phase: 'running' }, { request_id: 'r', type: 'progress', step: 1, total: 4, elapsed: 1 }).pass).toBeNull();
  });
});

describe('task upscale', () => {
  const ups = [
    { name: 'Latent', kind: 'latent' },
    { name: 'Lanczos', kind: 'pixel' },
    { name: 'tiny_esrgan', kind: 'model', file: '/m/tiny_esrgan.pth' },
  ];
  it("takes the form's hires upscaler when it is a pixel one, else Lanczos x2", () => {
    expect(upscaleDefaults(null, ups)).toEqual({ upscaler: 'Lanczos', scale: 2 });
    expect(upscaleDefaults({ ...hiresDefaults(sd1), upscaler: 'Latent', scale: 1.5 }, ups)).toEqual({ upscaler: 'Lanczos', scale: 1.5 });
    expect(upscaleDefaults({ ...hiresDefaults(sd1), upscaler: 'tiny_esrgan' }, ups)).toEqual({ upscaler: 'tiny_esrgan', scale: 2 });
  });

  it('a result as init_img, no diffusion keys', () => {
    const item = { model: { arch: 'sd1', name_or_path: 'tiny:sd1' }, result: { seed: 9 } } as unknown as GalleryItem;
    const body = upscaleBody(sd1, { ...modelDefaults(sd1), name_or_path: 'tiny:sd1' }, item, 'up.png', { upscaler: 'tiny_esrgan', scale: 4 });
    expect(body.model).toEqual({ arch: 'sd1', name_or_path: 'tiny:sd1' });
    expect(body.sample).toEqual(upscaleSample('up.png', { upscaler: 'tiny_esrgan', scale: 4 }, 9));
    expect(body.sample).toMatchObject({ task: 'upscale', init_img: 'up.png', upscale: { upscaler: 'tiny_esrgan', scale: 4 } });
    expect(upscaleBody(null, null, item, 'up.png', { upscaler: 'Lanczos', scale: 2 }).model).toBe(item.model);
  });
});

describe('grid axes: control scale, hires denoise', () => {
  const base = (sampleKeep = {}): GridBase => ({ arch: sd1, profiles: [], model: { ...modelDefaults(sd1), name_or_path: 'tiny:sd1' }, sample: form(sd1, sampleKeep) });
  const none: AxisSpec = { kind: 'none', values: '' };
  const cells = (b: GridBase, x: AxisSpec, y: AxisSpec = none) => {
    const p = planGrid(b, x, y, 'run');
    if ('error' in p) throw new Error(p.error);
    return p;
  };
  const err = (b: GridBase, x: AxisSpec) => {
    const p = planGrid(b, x, none, 'run');
    return 'error' in p ? p.error : null;
  };

  it('control scale sets controls[0].scale of the first control sent', () => {
    const b = base({ controls: [control({ model: '' }), control({ scale: 1 }), control({ scale: 0.3 })] });
    const p = cells(b, { kind: 'control_scale', values: '0-1 (+0.5)' });
    expect(p.xLabels).toEqual(['Control scale: 0', 'Control scale: 0.5', 'Control scale: 1']);
    const sent = p.cells.map((c) => (c.body.sample.controls as { scale: number }[]).map((x) => x.scale));
    expect(sent).toEqual([[0, 0.3], [0.5, 0.3], [1, 0.3]]);
  });

  it('hires denoise sets hires.denoise; both axes together', () => {
    const b = base({ controls: [control()], hires: { ...hiresDefaults(sd1), enabled: true } });
    const p = cells(b, { kind: 'hires_denoise', values: '0.3, 0.6' }, { kind: 'control_scale', values: '0.5, 1' });
    expect(p.cells.map((c) => [(c.body.sample.hires as { denoise: number }).denoise, (c.body.sample.controls as { scale: number }[])[0].scale])).toEqual([
      [0.3, 0.5], [0.6, 0.5], [0.3, 1], [0.6, 1],
    ]);
  });

  it('refuses an axis the base settings do not use, and bad values', () => {
    expect(err(base(), { kind: 'control_scale', values: '1' })).toMatch(/send no control \(add one with an image and a model/);
    expect(err(base(), { kind: 'hires_denoise', values: '0.5' })).toMatch(/run no hires fix \(turn it on/);
    const on = base({ hires: { ...hiresDefaults(sd1), enabled: true } });
    expect(err(on, { kind: 'hires_denoise', values: '0, 0.5' })).toMatch(/0 repaints nothing/);
    expect(err(on, { kind: 'hires_denoise', values: '1.5' })).toMatch(/1\.5/);
  });
});
