// Forms -> POST /generate body: only what the arch's ArchInfo says applies.
import { describe, expect, it } from 'vitest';
import { buildGenerateBody, formsFromSettings, modelDefaults, sampleDefaults, snapToDivisor } from '@/components/generate/requestBody';
import type { ArchInfo } from '@/components/generate/types';

function arch(over: Partial<ArchInfo>): ArchInfo {
  return {
    name: 'img',
    modality: 'image',
    default_name_or_path: 'org/img',
    defaults: { width: 1024, height: 768, num_inference_steps: 8, guidance_scale: 3.5, num_frames: 1, fps: 0, duration: 0, output_ext: 'png' },
    size_divisor: 16,
    needs_ctrl_img: false,
    uses_negative_prompt: true,
    sample_extras: {},
    description: '',
    output_exts: ['png', 'jpg'],
    preview: { family: null, layout: 'BCHW', rgb_factors: null, rgb_bias: null },
    ...over,
  };
}

const stream = { detach: true, maxFrames: 8 };

describe('snapToDivisor', () => {
  it('rounds to the nearest multiple, never below one divisor', () => {
    expect(snapToDivisor(70, 16)).toBe(64);
    expect(snapToDivisor(72, 16)).toBe(80);
    expect(snapToDivisor(3, 16)).toBe(16);
    expect(snapToDivisor(NaN, 8)).toBe(8);
    expect(snapToDivisor(513, 1)).toBe(513);
  });
});

describe('buildGenerateBody', () => {
  it('image arch: snapped size and negative prompt; no video/audio keys; defaults left out of model', () => {
    const a = arch({});
    const sample = { ...sampleDefaults(a, { prompt: 'fox', seed: 7 }), width: 1000, negative_prompt: 'blur' };
    const body = buildGenerateBody(a, modelDefaults(a), sample, 'r1', stream);
    expect(body.model).toEqual({ arch: 'img', name_or_path: 'org/img' });
    expect(body.sample).toEqual({
      prompt: 'fox',
      negative_prompt: 'blur',
      width: 1008,
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
    const vb = buildGenerateBody(v, modelDefaults(v), sampleDefaults(v), 'r2', stream);
    expect(vb.sample).toMatchObject({ num_frames: 33, fps: 16, output_ext: 'mp4' });
    const au = arch({ name: 'aud', modality: 'audio', uses_negative_prompt: false, size_divisor: 1, sample_extras: { lyrics: '' }, defaults: { ...arch({}).defaults, duration: 30, output_ext: 'wav' } });
    const sample = { ...sampleDefaults(au), extras: { lyrics: 'la la' } };
    const ab = buildGenerateBody(au, modelDefaults(au), sample, 'r3', stream);
    expect(ab.sample).toMatchObject({ duration: 30, lyrics: 'la la' });
    for (const k of ['width', 'height', 'negative_prompt', 'num_frames']) expect(ab.sample).not.toHaveProperty(k);
  });

  it('quantization, low_vram, LoRA and the control image when set', () => {
    const a = arch({ needs_ctrl_img: true });
    const model = { ...modelDefaults(a), quantize: true, qtype: 'qint8', quantize_te: true, low_vram: true, lora_path: ' /l.safetensors ', lora_scale: 0.5 };
    const sample = { ...sampleDefaults(a), ctrl_img: 'abc_ctrl.png', ctrl_img_name: 'ctrl.png' };
    const body = buildGenerateBody(a, model, sample, 'r4', stream);
    expect(body.model).toEqual({
      arch: 'img',
      name_or_path: 'org/img',
      quantize: true,
      qtype: 'qint8',
      quantize_te: true,
      qtype_te: 'qfloat8',
      low_vram: true,
      lora_path: '/l.safetensors',
      lora_scale: 0.5,
    });
    expect(body.sample.ctrl_img).toBe('abc_ctrl.png');
  });
});

describe('formsFromSettings', () => {
  it('restores a result\'s resolved settings with the seed it used, without its server-side ctrl_img', () => {
    const a = arch({});
    const { model, sample } = formsFromSettings(
      a,
      { arch: 'img', name_or_path: 'tiny:img', quantize: true, qtype: 'qint4' },
      { prompt: 'fox', width: 64, height: 48, num_inference_steps: 6, guidance_scale: 0, seed: -1, ctrl_img: '/abs/x.png' },
      42,
    );
    expect(model).toMatchObject({ name_or_path: 'tiny:img', quantize: true, qtype: 'qint4', low_vram: false });
    expect(sample).toMatchObject({ prompt: 'fox', width: 64, height: 48, num_inference_steps: 6, guidance_scale: 0, seed: 42, ctrl_img: null });
  });
});
