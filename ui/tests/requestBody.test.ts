// Forms -> POST /generate body: only what the arch's ArchInfo says applies.
import { describe, expect, it } from 'vitest';
import { buildGenerateBody, ctrlImageField, defaultSource, formsFromSettings, imagesFor, modelDefaults, resolvedDefaults, sampleDefaults, withVariant } from '@/components/generate/requestBody';
import type { ArchInfo } from '@/components/generate/types';
import { archRow } from './archRow';

const defaultsFor = (a: ArchInfo, keep = {}) => sampleDefaults(resolvedDefaults(a, ''), a, keep);

/** What the engine's GET /models puts in `sample`: a resolved GenerateImageConfig dict. */
const resolved = (over: Record<string, unknown>): Record<string, unknown> => ({
  prompt: '',
  negative_prompt: '',
  width: 1024,
  height: 768,
  num_inference_steps: 8,
  guidance_scale: 3.5,
  seed: -1,
  num_frames: 1,
  fps: 0,
  duration: 0,
  ctrl_img: null,
  output_ext: 'png',
  ...over,
});

/** An ArchInfo; its resolved `sample` is the engine's for these defaults and extras unless given. */
function arch(over: Partial<ArchInfo>): ArchInfo {
  const a = archRow(over.name ?? 'img', { size_divisor: 16, output_exts: ['png', 'jpg'], sample: {}, ...over }, { width: 1024, height: 768, num_inference_steps: 8, guidance_scale: 3.5, ...over.defaults });
  if (!over.sample) a.sample = resolved({ ...a.defaults, ...a.sample_extras });
  return a;
}

const stream = { detach: true, maxFrames: 8 };

describe('buildGenerateBody', () => {
  it('image arch: the size as the form shows it (never snapped) and negative prompt; no video/audio keys; defaults left out of model', () => {
    const a = arch({});
    const sample = { ...defaultsFor(a, { prompt: 'fox', seed: 7 }), width: 1000, negative_prompt: 'blur' };
    const body = buildGenerateBody(a, modelDefaults(a), sample, 'r1', stream);
    expect(body.model).toEqual({ arch: 'img', name_or_path: 'org/img' });
    expect(body.sample).toEqual({
      prompt: 'fox',
      negative_prompt: 'blur',
      width: 1000,
      height: 768,
      num_inference_steps: 8,
      guidance_scale: 3.5,
      seed: 7,
      output_ext: 'png',
    });
    expect(body.request_id).toBe('r1');
    expect(body.stream).toEqual({ latents: 'raw', every_n_steps: 1, max_frames: 8, preview: 'x0', detach: true });
  });

  it('video arch: frames and fps; audio arch: duration and extras, no size, no negative prompt', () => {
    const v = arch({ name: 'vid', modality: 'video', defaults: { ...arch({}).defaults, num_frames: 33, fps: 16, output_ext: 'mp4' } });
    const vb = buildGenerateBody(v, modelDefaults(v), defaultsFor(v), 'r2', stream);
    expect(vb.sample).toMatchObject({ num_frames: 33, fps: 16, output_ext: 'mp4' });
    const au = arch({ name: 'aud', modality: 'audio', uses_negative_prompt: false, size_divisor: 1, sample_extras: { lyrics: '' }, defaults: { ...arch({}).defaults, duration: 30, output_ext: 'wav' } });
    const sample = { ...defaultsFor(au), extras: { lyrics: 'la la' } };
    const ab = buildGenerateBody(au, modelDefaults(au), sample, 'r3', stream);
    expect(ab.sample).toMatchObject({ duration: 30, lyrics: 'la la' });
    for (const k of ['width', 'height', 'negative_prompt', 'num_frames']) expect(ab.sample).not.toHaveProperty(k);
  });

  it('quantization, low_vram, LoRA and the control image when set', () => {
    const a = arch({ needs_ctrl_img: true });
    const model = { ...modelDefaults(a), quantize: true, qtype: 'qint8', quantize_te: true, low_vram: true, loras: [{ path: ' /l.safetensors ', scale: 0.5 }] };
    const sample = { ...defaultsFor(a), images: { ctrl_img: 'abc_ctrl.png' } };
    const body = buildGenerateBody(a, model, sample, 'r4', stream);
    expect(body.model).toEqual({
      arch: 'img',
      name_or_path: 'org/img',
      quantize: true,
      qtype: 'qint8',
      quantize_te: true,
      qtype_te: 'qfloat8',
      low_vram: true,
      loras: [{ path: '/l.safetensors', scale: 0.5 }],
    });
    expect(body.sample.ctrl_img).toBe('abc_ctrl.png');
  });

  it('model.compile only when chosen, and restored from a file\'s settings', () => {
    const a = arch({});
    expect(buildGenerateBody(a, modelDefaults(a), defaultsFor(a), 'r5', stream).model).not.toHaveProperty('compile');
    for (const compile of [true, false]) {
      const body = buildGenerateBody(a, { ...modelDefaults(a), compile }, defaultsFor(a), 'r6', stream);
      expect(body.model.compile).toBe(compile);
      expect(formsFromSettings(a, [], { arch: 'img', compile }, { prompt: 'x' }).model.compile).toBe(compile);
    }
    expect(formsFromSettings(a, [], { arch: 'img' }, { prompt: 'x' }).model).not.toHaveProperty('compile');
  });

  it('sample.shift only where the arch takes one (a fixed flow shift) and it is set, and restored', () => {
    const a = arch({});
    a.fields = { ...a.fields, shift: { type: 'float', nullable: true, min: 0 } as never };
    expect(buildGenerateBody(a, modelDefaults(a), defaultsFor(a), 'r9', stream).sample).not.toHaveProperty('shift');
    expect(buildGenerateBody(a, modelDefaults(a), { ...defaultsFor(a), shift: 8 }, 'r10', stream).sample.shift).toBe(8);
    expect(formsFromSettings(a, [], { arch: 'img' }, { prompt: 'x', shift: 5 }).sample.shift).toBe(5);
    const noShift = arch({});
    const { shift: _none, ...fields } = noShift.fields;
    noShift.fields = fields;
    expect(buildGenerateBody(noShift, modelDefaults(noShift), { ...defaultsFor(noShift), shift: 8 }, 'r11', stream).sample).not.toHaveProperty('shift');
    expect(formsFromSettings(noShift, [], { arch: 'img' }, { prompt: 'x', shift: 5 }).sample.shift).toBeNull();
  });

  it('model.attention only when other than auto, and restored', () => {
    const a = arch({});
    expect(buildGenerateBody(a, { ...modelDefaults(a), attention: 'auto' }, defaultsFor(a), 'r7', stream).model).not.toHaveProperty('attention');
    expect(buildGenerateBody(a, { ...modelDefaults(a), attention: 'flex' }, defaultsFor(a), 'r8', stream).model.attention).toBe('flex');
    expect(formsFromSettings(a, [], { arch: 'img', attention: 'native_math' }, { prompt: 'x' }).model.attention).toBe('native_math');
  });
});

describe('control image: from the arch\'s tasks', () => {
  const task = (name: string, needs: string[] = [], takes: string[] = []) => ({ name, needs, takes, strength: null });
  it('required on an edit-only arch, optional where a task takes one, else not offered nor sent', () => {
    const editOnly = arch({ needs_ctrl_img: true, tasks: [task('edit', ['ctrl_img'], ['ctrl_img_1'])] });
    const klein = arch({ tasks: [task('txt2img'), task('edit', ['ctrl_img'], ['ctrl_img_1', 'ctrl_img_2', 'ctrl_img_3'])] });
    const sd1 = arch({ tasks: [task('txt2img'), { ...task('img2img', ['init_img']), strength: 0.8 }] });
    expect(ctrlImageField(editOnly)).toBe('required');
    expect(ctrlImageField(klein)).toBe('optional');
    expect(ctrlImageField(sd1)).toBeNull();
    expect(ctrlImageField(arch({}))).toBeNull();                 // an older engine without tasks
    const withCtrl = (a: ArchInfo) => ({ ...defaultsFor(a), images: { ctrl_img: 'abc_ref.png' } });
    expect(buildGenerateBody(klein, modelDefaults(klein), withCtrl(klein), 'r', stream).sample.ctrl_img).toBe('abc_ref.png');
    // sd1 has no edit task: sent as it is, so the engine refuses it naming sample.ctrl_img
    expect(buildGenerateBody(sd1, modelDefaults(sd1), withCtrl(sd1), 'r', stream).sample.ctrl_img).toBe('abc_ref.png');
    // an arch no task of which takes one keeps none in its form (a new arch's form starts from imagesFor)
    expect(imagesFor(arch({}), { ctrl_img: 'abc_ref.png' })).toEqual({});
  });
});

describe('variants and profiles: defaults the engine resolved (GET /models), picked, never merged', () => {
  const turbo = resolved({ num_inference_steps: 8, guidance_scale: 0, mu: 1.15, shift: 0.5 });
  const raw = resolved({ num_inference_steps: 52, guidance_scale: 3.5, mu: null, shift: 0.5 });
  const k2 = arch({
    name: 'k2',
    sample_extras: { mu: null, shift: 0.5 },
    sample_extra_types: { mu: 'float', shift: 'float' },
    variants: {
      turbo: { num_inference_steps: 8, guidance_scale: 0, mu: 1.15 },
      raw: { num_inference_steps: 52, guidance_scale: 3.5, mu: null },
    },
    default_variant: 'turbo',
    sample: turbo,
    variant_samples: { turbo, raw },
  });

  it("a variant's resolved sample; a null extra is left out of the request", () => {
    expect(resolvedDefaults(k2, '')).toBe(turbo);
    expect(resolvedDefaults(k2, 'raw')).toBe(raw);
    expect(resolvedDefaults(k2, 'no-such-variant')).toBe(turbo);
    expect(sampleDefaults(resolvedDefaults(k2, ''), k2)).toMatchObject({ num_inference_steps: 8, extras: { mu: 1.15, shift: 0.5 } });
    const rawForm = sampleDefaults(resolvedDefaults(k2, 'raw'), k2);
    expect(rawForm).toMatchObject({ num_inference_steps: 52, guidance_scale: 3.5, extras: { mu: null, shift: 0.5 } });
    const body = buildGenerateBody(k2, { ...modelDefaults(k2), variant: 'raw' }, rawForm, 'r', stream);
    expect(body.model).toMatchObject({ arch: 'k2', variant: 'raw' });
    expect(body.sample).toMatchObject({ shift: 0.5 });
    expect(body.sample).not.toHaveProperty('mu');
  });

  it('a profile: {profile, overrides}, never arch or name_or_path; its resolved sample, [generation] included', () => {
    // the profiles file's [generation] (guidance_scale 2, width 1000 -> 1008) sits over the profile's own defaults
    const profile = {
      name: 'k2-local',
      architecture: 'k2',
      variant: 'raw',
      defaults: { num_inference_steps: 20, guidance_scale: 5 },
      sample: { ...raw, num_inference_steps: 20, guidance_scale: 2, width: 1008 },
    };
    const model = { ...modelDefaults(k2, profile), quantize: true };
    expect(model).toMatchObject({ profile: 'k2-local', arch: 'k2', variant: 'raw', name_or_path: '' });
    const sample = sampleDefaults(resolvedDefaults(k2, model.variant, profile), k2);
    expect(sample).toMatchObject({ num_inference_steps: 20, guidance_scale: 2, width: 1008, extras: { mu: null } });
    const body = buildGenerateBody(k2, model, sample, 'r', stream);
    expect(body.model).toEqual({ profile: 'k2-local', quantize: true, qtype: 'qfloat8' });
    // and back: a result made from the profile reuses the profile
    const again = formsFromSettings(k2, [profile], { arch: 'k2', profile: 'k2-local', variant: 'raw', name_or_path: '/models/x' }, { num_inference_steps: 20 }, 3);
    expect(again.model).toMatchObject({ profile: 'k2-local', name_or_path: '' });
    expect(again.sample).toMatchObject({ num_inference_steps: 20, guidance_scale: 2, width: 1008, seed: 3 });
  });

  it("a profile the engine could not resolve starts from its variant's sample (submitting then says why)", () => {
    const profile = { name: 'bad', architecture: 'k2', variant: 'raw', defaults: {}, sample: null, sample_error: 'sample.width: …' };
    expect(resolvedDefaults(k2, '', profile)).toBe(raw);
  });
});

describe('variants with their own repos (sd3 3.5-large / 3.5-medium)', () => {
  const sd3 = arch({
    name: 'sd3',
    default_name_or_path: 'org/large',
    variants: { large: { num_inference_steps: 28 }, medium: { num_inference_steps: 40 } },
    variant_sources: { large: 'org/large', medium: 'org/medium' },
    default_variant: 'large',
  });

  it("name_or_path follows the variant's repo, unless the user typed other weights", () => {
    expect(defaultSource(sd3, '')).toBe('org/large');
    expect(defaultSource(sd3, 'medium')).toBe('org/medium');
    expect(defaultSource(arch({}), '')).toBe('org/img');
    const m = modelDefaults(sd3);
    expect(m.name_or_path).toBe('org/large');
    const medium = withVariant(sd3, m, 'medium');
    expect(medium).toMatchObject({ variant: 'medium', name_or_path: 'org/medium' });
    expect(withVariant(sd3, medium, 'large').name_or_path).toBe('org/large');
    const typed = withVariant(sd3, { ...m, name_or_path: '/models/my-sd35' }, 'medium');
    expect(typed).toMatchObject({ variant: 'medium', name_or_path: '/models/my-sd35' });
    expect(buildGenerateBody(sd3, medium, defaultsFor(sd3), 'r', stream).model).toMatchObject({ name_or_path: 'org/medium', variant: 'medium' });
  });
});

describe('formsFromSettings', () => {
  it("restores a result's resolved settings with the seed it used; the start frame's input path becomes its asset id", () => {
    const a = arch({});
    const { model, sample } = formsFromSettings(
      a,
      [],
      { arch: 'img', name_or_path: 'tiny:img', quantize: true, qtype: 'qint4' },
      { prompt: 'fox', width: 64, height: 48, num_inference_steps: 6, guidance_scale: 0, seed: -1, batch_size: 4, ctrl_img: '/abs/assets/1a2b3c4d_x.png' },
      42,
    );
    expect(model).toMatchObject({ name_or_path: 'tiny:img', quantize: true, qtype: 'qint4', low_vram: false });
    expect(sample).toMatchObject({ prompt: 'fox', width: 64, height: 48, num_inference_steps: 6, guidance_scale: 0, seed: 42, batch_size: 1 });
    expect(sample.images).toEqual({ ctrl_img: '1a2b3c4d_x.png' });
  });
});

describe('formatSeconds', () => {
  it('never shows 60 seconds', async () => {
    const { formatSeconds } = await import('@/utils/format');
    expect(formatSeconds(119.6)).toBe('2 min 0 s');
    expect(formatSeconds(59.7)).toBe('1 min 0 s');
    expect(formatSeconds(5.25)).toBe('5.3 s');
    expect(formatSeconds(-1)).toBe('–');
  });
});
