// Forms -> the engine's POST /generate body, and back (reuse a gallery item's settings).
// Which fields apply, and their defaults, come from GET /models (ArchInfo, variants, profiles),
// never from a table here; the defaults arrive resolved by the engine (its precedence, [generation]
// included), so this file picks one and never merges them.
import type { ArchInfo, ModelForm, ProfileInfo, SampleForm } from './types';

export const DEFAULT_QTYPE = 'qfloat8';
const COMMON_KEYS = ['width', 'height', 'num_inference_steps', 'guidance_scale', 'num_frames', 'fps', 'duration', 'output_ext'] as const;

/** Whether the form offers a control (reference) image upload: required on an edit-only arch, optional
 * where one of its tasks takes one (sending it makes the request that edit), else none. */
export function ctrlImageField(arch: ArchInfo): 'required' | 'optional' | null {
  if (arch.needs_ctrl_img) return 'required';
  const takes = (arch.tasks ?? []).some((t) => t.needs.includes('ctrl_img') || t.takes.includes('ctrl_img'));
  return takes ? 'optional' : null;
}

export function snapToDivisor(value: number, divisor: number): number {
  const d = Math.max(1, Math.floor(divisor) || 1);
  return Math.max(d, Math.round((Number(value) || 0) / d) * d);
}

/** The arch's variant in effect ('' = its default one, if it has variants). */
export function variantOf(arch: ArchInfo, variant: string): string | null {
  const names = Object.keys(arch.variants ?? {});
  if (!names.length) return null;
  return names.includes(variant) ? variant : (arch.default_variant ?? names[0]);
}

/** The weights a variant names by default: its own repo where it has one, else the arch's. */
export function defaultSource(arch: ArchInfo, variant: string): string {
  const v = variantOf(arch, variant);
  return (v && arch.variant_sources?.[v]) || arch.default_name_or_path;
}

/** The model form after choosing another variant: name_or_path follows the variant's repo unless the
 * user typed their own weights. */
export function withVariant(arch: ArchInfo, model: ModelForm, variant: string): ModelForm {
  const typed = model.name_or_path.trim() && model.name_or_path !== defaultSource(arch, model.variant);
  return { ...model, variant, name_or_path: typed ? model.name_or_path : defaultSource(arch, variant) };
}

/** The sample a request gets when it sets none, as the engine resolved it (GET /models): the profile's,
 * else the arch variant's (also when the engine could not resolve the profile's: submitting says why). */
export function resolvedDefaults(arch: ArchInfo, variant: string, profile?: ProfileInfo | null): Record<string, unknown> {
  if (profile?.sample) return profile.sample;
  const v = variantOf(arch, profile?.variant ?? variant);
  return (v && arch.variant_samples?.[v]) || arch.sample;
}

export function modelDefaults(arch: ArchInfo, profile?: ProfileInfo | null): ModelForm {
  return {
    profile: profile?.name ?? '',
    arch: arch.name,
    variant: profile?.variant ?? arch.default_variant ?? '',
    name_or_path: profile ? '' : defaultSource(arch, arch.default_variant ?? ''),
    quantize: false,
    qtype: DEFAULT_QTYPE,
    quantize_te: false,
    qtype_te: DEFAULT_QTYPE,
    low_vram: false,
    lora_path: '',
    lora_scale: 1,
  };
}

export function sampleDefaults(defaults: Record<string, unknown>, arch: ArchInfo, keep: Partial<SampleForm> = {}): SampleForm {
  const num = (k: string) => Number(defaults[k] ?? 0);
  const extras: Record<string, unknown> = {};
  for (const key of Object.keys(arch.sample_extras)) extras[key] = defaults[key] ?? null;
  return {
    prompt: keep.prompt ?? '',
    negative_prompt: keep.negative_prompt ?? '',
    width: num('width'),
    height: num('height'),
    num_inference_steps: num('num_inference_steps'),
    guidance_scale: num('guidance_scale'),
    seed: keep.seed ?? -1,
    num_frames: num('num_frames'),
    fps: num('fps'),
    duration: num('duration'),
    output_ext: String(defaults.output_ext ?? arch.output_exts[0] ?? ''),
    extras,
    ctrl_img: null,
    ctrl_img_name: null,
  };
}

export interface StreamChoice {
  detach: boolean;
  maxFrames: number;
}

const isSet = (v: unknown) => v !== null && v !== undefined && v !== '' && !(typeof v === 'number' && Number.isNaN(v));

export function buildGenerateBody(arch: ArchInfo, model: ModelForm, sample: SampleForm, requestId: string, stream: StreamChoice) {
  // a profile names the arch, variant and weights itself; other keys override it
  const m: Record<string, unknown> = model.profile ? { profile: model.profile } : { arch: arch.name };
  if (!model.profile) {
    if (model.name_or_path.trim()) m.name_or_path = model.name_or_path.trim();
    const variant = variantOf(arch, model.variant);
    if (variant) m.variant = variant;
  }
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
  for (const key of Object.keys(arch.sample_extras)) if (isSet(sample.extras[key])) s[key] = sample.extras[key];
  if (sample.ctrl_img && ctrlImageField(arch)) s.ctrl_img = sample.ctrl_img;

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
  profiles: ProfileInfo[],
  model: Record<string, unknown>,
  sample: Record<string, unknown>,
  seed: number,
): { model: ModelForm; sample: SampleForm } {
  const str = (v: unknown, fallback: string) => (typeof v === 'string' ? v : fallback);
  const profile = profiles.find((p) => p.name === model.profile) ?? null;
  const mf = modelDefaults(arch, profile);
  const outModel: ModelForm = {
    ...mf,
    variant: str(model.variant, mf.variant),
    name_or_path: profile ? '' : str(model.name_or_path, mf.name_or_path),
    quantize: model.quantize === true,
    qtype: str(model.qtype, mf.qtype),
    quantize_te: model.quantize_te === true,
    qtype_te: str(model.qtype_te, mf.qtype_te),
    low_vram: model.low_vram === true,
    lora_path: str(model.lora_path, ''),
    lora_scale: typeof model.lora_scale === 'number' ? model.lora_scale : 1,
  };
  const defaults = resolvedDefaults(arch, outModel.variant, profile);
  const merged: Record<string, unknown> = { ...defaults };
  for (const key of [...COMMON_KEYS, ...Object.keys(arch.sample_extras)]) if (sample[key] !== undefined) merged[key] = sample[key];
  const outSample = sampleDefaults(merged, arch, {
    prompt: str(sample.prompt, ''),
    negative_prompt: str(sample.negative_prompt, ''),
    seed,
  });
  return { model: outModel, sample: outSample };
}
