// Forms -> the engine's POST /generate body, and back (reuse a gallery item's settings).
// Which fields apply comes from the arch's ArchInfo (GET /models), never from a table here.
import type { ArchInfo, ModelForm, SampleForm } from './types';

export const DEFAULT_QTYPE = 'qfloat8';

export function snapToDivisor(value: number, divisor: number): number {
  const d = Math.max(1, Math.floor(divisor) || 1);
  return Math.max(d, Math.round((Number(value) || 0) / d) * d);
}

export function modelDefaults(arch: ArchInfo): ModelForm {
  return {
    arch: arch.name,
    name_or_path: arch.default_name_or_path,
    quantize: false,
    qtype: DEFAULT_QTYPE,
    quantize_te: false,
    qtype_te: DEFAULT_QTYPE,
    low_vram: false,
    lora_path: '',
    lora_scale: 1,
  };
}

export function sampleDefaults(arch: ArchInfo, keep: Partial<SampleForm> = {}): SampleForm {
  const d = arch.defaults;
  return {
    prompt: keep.prompt ?? '',
    negative_prompt: keep.negative_prompt ?? '',
    width: d.width,
    height: d.height,
    num_inference_steps: d.num_inference_steps,
    guidance_scale: d.guidance_scale,
    seed: keep.seed ?? -1,
    num_frames: d.num_frames,
    fps: d.fps,
    duration: d.duration,
    output_ext: d.output_ext,
    extras: { ...arch.sample_extras },
    ctrl_img: null,
    ctrl_img_name: null,
  };
}

export interface StreamChoice {
  detach: boolean;
  maxFrames: number;
}

export function buildGenerateBody(arch: ArchInfo, model: ModelForm, sample: SampleForm, requestId: string, stream: StreamChoice) {
  const m: Record<string, unknown> = { arch: arch.name };
  if (model.name_or_path.trim()) m.name_or_path = model.name_or_path.trim();
  if (model.quantize) Object.assign(m, { quantize: true, qtype: model.qtype || DEFAULT_QTYPE });
  if (model.quantize_te) Object.assign(m, { quantize_te: true, qtype_te: model.qtype_te || DEFAULT_QTYPE });
  if (model.low_vram) m.low_vram = true;
  if (model.lora_path.trim()) Object.assign(m, { lora_path: model.lora_path.trim(), lora_scale: Number(model.lora_scale) });

  const s: Record<string, unknown> = {
    prompt: sample.prompt,
    num_inference_steps: Math.max(1, Math.round(Number(sample.num_inference_steps))),
    guidance_scale: Number(sample.guidance_scale),
    seed: Math.round(Number(sample.seed)),
    output_ext: sample.output_ext,
  };
  if (arch.uses_negative_prompt) s.negative_prompt = sample.negative_prompt;
  if (arch.modality !== 'audio') {
    s.width = snapToDivisor(sample.width, arch.size_divisor);
    s.height = snapToDivisor(sample.height, arch.size_divisor);
  }
  if (arch.modality === 'video') {
    s.num_frames = Math.max(1, Math.round(Number(sample.num_frames)));
    s.fps = Number(sample.fps);
  }
  if (arch.modality === 'audio') s.duration = Number(sample.duration);
  for (const key of Object.keys(arch.sample_extras)) s[key] = sample.extras[key] ?? arch.sample_extras[key];
  if (sample.ctrl_img) s.ctrl_img = sample.ctrl_img;

  return {
    model: m,
    sample: s,
    request_id: requestId,
    stream: { latents: 'raw', every_n_steps: 1, max_frames: stream.maxFrames, preview: 'x0', detach: stream.detach },
  };
}

/** A gallery item's resolved settings back into the forms (the seed it used, not -1). */
export function formsFromSettings(
  arch: ArchInfo,
  model: Record<string, unknown>,
  sample: Record<string, unknown>,
  seed: number,
): { model: ModelForm; sample: SampleForm } {
  const mf = modelDefaults(arch);
  const num = (v: unknown, fallback: number) => (typeof v === 'number' && Number.isFinite(v) ? v : fallback);
  const str = (v: unknown, fallback: string) => (typeof v === 'string' ? v : fallback);
  const outModel: ModelForm = {
    ...mf,
    name_or_path: str(model.name_or_path, mf.name_or_path),
    quantize: model.quantize === true,
    qtype: str(model.qtype, mf.qtype),
    quantize_te: model.quantize_te === true,
    qtype_te: str(model.qtype_te, mf.qtype_te),
    low_vram: model.low_vram === true,
    lora_path: str(model.lora_path, ''),
    lora_scale: num(model.lora_scale, 1),
  };
  const sf = sampleDefaults(arch);
  const extras: Record<string, unknown> = {};
  for (const key of Object.keys(arch.sample_extras)) extras[key] = sample[key] ?? arch.sample_extras[key];
  const outSample: SampleForm = {
    ...sf,
    prompt: str(sample.prompt, ''),
    negative_prompt: str(sample.negative_prompt, ''),
    width: num(sample.width, sf.width),
    height: num(sample.height, sf.height),
    num_inference_steps: num(sample.num_inference_steps, sf.num_inference_steps),
    guidance_scale: num(sample.guidance_scale, sf.guidance_scale),
    seed,
    num_frames: num(sample.num_frames, sf.num_frames),
    fps: num(sample.fps, sf.fps),
    duration: num(sample.duration, sf.duration),
    output_ext: str(sample.output_ext, sf.output_ext),
    extras,
  };
  return { model: outModel, sample: outSample };
}
