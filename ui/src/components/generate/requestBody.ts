// Forms -> the engine's POST /generate body, and back (reuse a gallery item's settings, or a file's
// from POST /settings).
// Which fields apply, and their defaults, come from GET /models (ArchInfo, variants, profiles),
// never from a table here; the defaults arrive resolved by the engine (its precedence, [generation]
// included), so this file picks one and never merges them.
import { lorasRequest, picksFromSettings } from './loras';
import { archTakes, referenceSlots, taskInfo } from './tasks';
import { SAMPLE_INPUTS, type ArchInfo, type ModelForm, type ProfileInfo, type SampleForm } from './types';
import { previewStream } from './previewProjection';
import { controlsFromSettings, controlsRequest, hiresFromSettings, hiresRequest } from './controlHires';

export const DEFAULT_QTYPE = 'qfloat8';
const COMMON_KEYS = ['width', 'height', 'num_inference_steps', 'guidance_scale', 'num_frames', 'fps', 'duration', 'output_ext'] as const;

/** Whether the form offers a control (reference) image upload: required on an edit-only arch, optional
 * where one of its tasks takes one (sending it makes the request that edit), else none. */
export function ctrlImageField(arch: ArchInfo): 'required' | 'optional' | null {
  if (arch.needs_ctrl_img) return 'required';
  return referenceSlots(arch).length ? 'optional' : null;
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
    loras: [],
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
    images: keep.images ?? {},
    task: keep.task ?? '',
    strength: keep.strength ?? null,
    resize_mode: keep.resize_mode ?? (typeof defaults.resize_mode === 'string' ? defaults.resize_mode : 'crop'),
    sampler: keep.sampler ?? (typeof defaults.sampler === 'string' ? defaults.sampler : ''),
    shift: keep.shift ?? (typeof defaults.shift === 'number' ? defaults.shift : null),
    batch_size: keep.batch_size ?? (Number(defaults.batch_size) || 1),
    mask_start: keep.mask_start ?? null,
    mask_end: keep.mask_end ?? null,
    controls: keep.controls ?? [],
    hires: keep.hires ?? null,
  };
}

/** A form saved by an older page (localStorage): the keys added since, at their defaults; the old
 * single control image moved into `images`. */
export function normalizeSample(saved: SampleForm): SampleForm {
  const old = saved as SampleForm & { ctrl_img?: string | null };
  const images: SampleForm['images'] = { ...(old.images ?? {}) };
  if (old.ctrl_img && !images.ctrl_img) images.ctrl_img = old.ctrl_img;
  const { ctrl_img: _drop, ctrl_img_name: _dropName, ...rest } = old as SampleForm & { ctrl_img?: unknown; ctrl_img_name?: unknown };
  return {
    ...rest,
    images,
    task: typeof old.task === 'string' ? old.task : '',
    strength: typeof old.strength === 'number' ? old.strength : null,
    resize_mode: typeof old.resize_mode === 'string' ? old.resize_mode : 'crop',
    sampler: typeof old.sampler === 'string' ? old.sampler : '',
    shift: typeof old.shift === 'number' ? old.shift : null,
    batch_size: Number(old.batch_size) >= 1 ? Number(old.batch_size) : 1,
    controls: Array.isArray(old.controls) ? old.controls : [],
    hires: old.hires && typeof old.hires === 'object' ? old.hires : null,
  };
}

/** The input images an arch can use, of those the form holds (the others would hide in the form with no
 * slot to clear them). */
export function imagesFor(arch: ArchInfo, images: SampleForm['images']): SampleForm['images'] {
  if (!arch.tasks) return arch.needs_ctrl_img && images.ctrl_img ? { ctrl_img: images.ctrl_img } : {};
  const out: SampleForm['images'] = {};
  for (const k of SAMPLE_INPUTS) if (images[k] && archTakes(arch, k)) out[k] = images[k];
  return out;
}

/** The form's input images as a dry run names them (POST /resolve reads no image): the asset ids it
 * holds, and a mask painted but not uploaded yet as "present". */
export function presentInputs(sample: Pick<SampleForm, 'images'>, maskPainted = false): SampleForm['images'] {
  const present: SampleForm['images'] = {};
  for (const k of SAMPLE_INPUTS) if (sample.images[k]) present[k] = sample.images[k];
  if (maskPainted && sample.images.init_img) present.mask_img = present.mask_img ?? 'present';
  return present;
}

export interface StreamChoice {
  detach: boolean;
  maxFrames: number;
}

const isSet = (v: unknown) => v !== null && v !== undefined && v !== '' && !(typeof v === 'number' && Number.isNaN(v));

/** Whether the arch takes a sample key (GET /models `fields`): what the request carries and the form shows. */
export const takesField = (arch: ArchInfo, key: string): boolean => key in (arch.fields ?? {});

/** The request's `model`: a profile names the arch, variant and weights itself; other keys override it. */
export function requestModel(arch: ArchInfo, model: ModelForm): Record<string, unknown> {
  const m: Record<string, unknown> = model.profile ? { profile: model.profile } : { arch: arch.name };
  if (!model.profile) {
    if (model.name_or_path.trim()) m.name_or_path = model.name_or_path.trim();
    const variant = variantOf(arch, model.variant);
    if (variant) m.variant = variant;
    if (model.components && Object.keys(model.components).length) Object.assign(m, { components: { ...model.components }, local_only: true });
    if (model.extras_name_or_path?.trim()) m.extras_name_or_path = model.extras_name_or_path.trim();
  }
  if (model.quantize) Object.assign(m, { quantize: true, qtype: model.qtype || DEFAULT_QTYPE });
  if (model.quantize_te) Object.assign(m, { quantize_te: true, qtype_te: model.qtype_te || DEFAULT_QTYPE });
  if (model.low_vram) m.low_vram = true;
  if (typeof model.compile === 'boolean') m.compile = model.compile;
  if (model.attention && model.attention !== 'auto') m.attention = model.attention;
  const loras = lorasRequest(model.loras ?? []);
  if (loras.length) m.loras = loras;
  return m;
}

/**
 * The request's `sample`: the values the form shows, unchanged, for the keys the arch takes
 * (formChecks.ts says what is wrong with one, and the engine's 422 names any it refuses; nothing is
 * rounded or clamped on the way), the extras that are set, the task keys, a sampler of the arch's.
 */
export function requestSample(arch: ArchInfo, sample: SampleForm): Record<string, unknown> {
  const shown: Record<string, unknown> = {
    prompt: sample.prompt,
    negative_prompt: sample.negative_prompt,
    width: Number(sample.width),
    height: Number(sample.height),
    num_inference_steps: Number(sample.num_inference_steps),
    guidance_scale: Number(sample.guidance_scale),
    seed: Number(sample.seed),
    num_frames: Number(sample.num_frames),
    fps: Number(sample.fps),
    duration: Number(sample.duration),
    output_ext: sample.output_ext,
  };
  const s: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(shown)) if (takesField(arch, key)) s[key] = value;
  for (const key of Object.keys(arch.sample_extras)) if (isSet(sample.extras[key])) s[key] = sample.extras[key];
  Object.assign(s, taskKeys(arch, sample));
  if (sample.sampler && (arch.samplers ?? []).some((x) => x.name === sample.sampler)) s.sampler = sample.sampler;
  if (typeof sample.shift === 'number' && takesField(arch, 'shift')) s.shift = sample.shift;
  const batch = Number(sample.batch_size);
  if (arch.batch && Number.isFinite(batch) && batch !== 1) s.batch_size = batch;
  const controls = controlsRequest(arch, sample.controls);
  if (controls.length) s.controls = controls;
  const hires = hiresRequest(arch, sample.hires);
  if (hires) s.hires = hires;
  return s;
}

export function buildGenerateBody(arch: ArchInfo, model: ModelForm, sample: SampleForm, requestId: string, stream: StreamChoice) {
  return {
    model: requestModel(arch, model),
    sample: requestSample(arch, sample),
    request_id: requestId,
    stream: { ...previewStream(arch.preview), every_n_steps: 1, max_frames: stream.maxFrames, preview: 'x0', detach: stream.detach },
  };
}

/**
 * The task keys of a request: the input images the form holds (asset ids, as they are: the engine
 * infers the task from them and names any its task does not take), `task` only when the person chose
 * one of the arch's, `strength`
 * when the person moved it (the page clears it where the task the engine resolves takes none),
 * `resize_mode` where an init image is sized.
 */
export function taskKeys(arch: ArchInfo, sample: SampleForm): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const images = sample.images ?? {};
  for (const k of SAMPLE_INPUTS) if (images[k]) out[k] = images[k];
  if (sample.task && taskInfo(arch, sample.task)) out.task = sample.task;
  if (sample.strength !== null && Number.isFinite(sample.strength)) out.strength = Number(sample.strength);
  if (images.init_img || images.init_video) out.resize_mode = sample.resize_mode || 'crop';
  for (const key of ['mask_start', 'mask_end'] as const) {
    const v = sample[key];
    if (images.init_audio && arch.fields?.[key] && v !== null && v !== undefined && Number.isFinite(v)) out[key] = Number(v);
  }
  return out;
}

/** A sampler the file names, as this arch's: its own name, else A1111's label ("Euler a", "DPM++ 2M Karras"). */
export function samplerFromSettings(arch: ArchInfo, value: unknown): { sampler: string; warning: string | null } {
  if (value === null || value === undefined || value === '' || value === 'Default') return { sampler: '', warning: null };
  const text = String(value).trim();
  const samplers = arch.samplers ?? [];
  const byName = samplers.find((x) => x.name === text);
  if (byName) return { sampler: byName.name, warning: null };
  const low = text.toLowerCase();
  const byLabel = samplers.find((x) => {
    const label = x.label.toLowerCase();
    return x.schedule === 'automatic' ? low === label : low === `${label} ${x.schedule.toLowerCase()}`;
  });
  if (byLabel) return { sampler: byLabel.name, warning: null };
  const names = samplers.map((x) => x.name).join(', ') || 'none: only its own';
  return { sampler: '', warning: `sampler ${JSON.stringify(text)} is not one of ${arch.name}'s (${names}): left at Default.` };
}

/** A gallery item's (or a file's) resolved settings back into the forms. `seed`: the one output's
 * seed (a batch item): it reruns alone, batch_size 1. Input images come back by asset name. */
export function formsFromSettings(
  arch: ArchInfo,
  profiles: ProfileInfo[],
  model: Record<string, unknown>,
  sample: Record<string, unknown>,
  seed?: number,
): { model: ModelForm; sample: SampleForm; warnings: string[] } {
  const outModel = modelFormFromSettings(arch, profiles, model);
  const profile = profiles.find((p) => p.name === outModel.profile) ?? null;
  const restored = sampleFormFromSettings(arch, resolvedDefaults(arch, outModel.variant, profile), seed === undefined ? sample : { ...sample, seed, batch_size: 1 });
  return { model: outModel, ...restored };
}

export function modelFormFromSettings(arch: ArchInfo, profiles: ProfileInfo[], model: Record<string, unknown>): ModelForm {
  const str = (v: unknown, fallback: string) => (typeof v === 'string' ? v : fallback);
  const profile = profiles.find((p) => p.name === model.profile) ?? null;
  const mf = modelDefaults(arch, profile);
  return {
    ...mf,
    variant: str(model.variant, mf.variant),
    name_or_path: profile ? '' : str(model.name_or_path, mf.name_or_path),
    quantize: model.quantize === true,
    qtype: str(model.qtype, mf.qtype),
    quantize_te: model.quantize_te === true,
    qtype_te: str(model.qtype_te, mf.qtype_te),
    low_vram: model.low_vram === true,
    ...(typeof model.compile === 'boolean' ? { compile: model.compile } : {}),
    ...(typeof model.attention === 'string' && model.attention !== 'auto' ? { attention: model.attention } : {}),
    loras: picksFromSettings(model),
    ...componentsOf(model),
    ...(typeof model.extras_name_or_path === 'string' && model.extras_name_or_path ? { extras_name_or_path: model.extras_name_or_path } : {}),
  };
}

/** `model.components` (role -> local file) when it is one, for the form. */
function componentsOf(model: Record<string, unknown>): { components?: Record<string, string> } {
  const c = model.components;
  if (!c || typeof c !== 'object' || Array.isArray(c)) return {};
  const entries = Object.entries(c as Record<string, unknown>).filter((kv): kv is [string, string] => typeof kv[1] === 'string');
  return entries.length ? { components: Object.fromEntries(entries) } : {};
}

/** A resolved sample (a start frame's, a file's) into the sample form over `defaults`. */
export function sampleFormFromSettings(
  arch: ArchInfo,
  defaults: Record<string, unknown>,
  sample: Record<string, unknown>,
): { sample: SampleForm; warnings: string[] } {
  const str = (v: unknown, fallback: string) => (typeof v === 'string' ? v : fallback);
  const merged: Record<string, unknown> = { ...defaults };
  for (const key of [...COMMON_KEYS, ...Object.keys(arch.sample_extras)]) if (sample[key] !== undefined && sample[key] !== null) merged[key] = sample[key];
  const images: SampleForm['images'] = {};
  const warnings: string[] = [];
  for (const k of SAMPLE_INPUTS) {
    const v = sample[k];
    if (typeof v !== 'string' || !v) continue;
    if (arch.tasks && !archTakes(arch, k)) {
      warnings.push(`${k} is left out: no task of ${arch.name} takes it.`);
      continue;
    }
    images[k] = v.split(/[\\/]/).pop() ?? v; // the asset id: the stored file's name
  }
  const { sampler, warning } = samplerFromSettings(arch, sample.sampler);
  if (warning) warnings.push(warning);
  // the file's task (its resolved one) is kept; the page leaves it automatic where the engine infers
  // the same from the inputs (resolveRequest.ts withAutomaticTask). Its strength stays the task's default
  // (null) where it is that default.
  const t = typeof sample.task === 'string' ? taskInfo(arch, sample.task) : null;
  const task = t?.name ?? '';
  const strength = typeof sample.strength === 'number' && t?.strength !== null && t?.strength !== undefined && sample.strength !== t.strength ? sample.strength : null;
  const batch = Number(sample.batch_size);
  const seed = Number(sample.seed);
  const form = sampleDefaults(merged, arch, {
    prompt: str(sample.prompt, ''),
    negative_prompt: str(sample.negative_prompt, ''),
    seed: Number.isInteger(seed) ? seed : -1,
    images,
    task,
    strength,
    resize_mode: str(sample.resize_mode, str(defaults.resize_mode, 'crop')),
    sampler,
    shift: typeof sample.shift === 'number' && takesField(arch, 'shift') ? sample.shift : null,
    batch_size: arch.batch && Number.isInteger(batch) && batch >= 1 ? Math.min(batch, arch.fields?.batch_size?.max ?? batch) : 1,
    ...(typeof sample.mask_start === 'number' ? { mask_start: sample.mask_start } : {}),
    ...(typeof sample.mask_end === 'number' ? { mask_end: sample.mask_end } : {}),
    controls: controlsFromSettings(arch, sample.controls),
    hires: hiresFromSettings(arch, sample.hires),
  });
  return { sample: form, warnings };
}

/** POST /settings' answer (docs/engine_api.md, "Settings in files"). */
export interface SettingsAnswer {
  source?: string;
  format?: string;
  model: Record<string, unknown> | null;
  sample: Record<string, unknown>;
  parameters?: string | null;
  warnings?: string[];
}

/**
 * A file's settings into the forms: its model (an arch here, or a profile defined here; else the
 * current model stays, with a warning), its sample over that model's defaults. Warnings: the engine's,
 * then the form's own.
 */
export function formsFromFile(
  archs: ArchInfo[],
  profiles: ProfileInfo[],
  current: ModelForm | null,
  answer: SettingsAnswer,
): { model: ModelForm; sample: SampleForm; warnings: string[] } | { error: string } {
  const warnings = [...(answer.warnings ?? [])];
  const m = answer.model;
  let model: ModelForm | null = null;
  if (m && typeof m.profile === 'string') {
    if (profiles.some((p) => p.name === m.profile)) {
      const p = profiles.find((x) => x.name === m.profile)!;
      const a = archs.find((x) => x.name === p.architecture);
      if (a) model = modelFormFromSettings(a, profiles, m);
    } else {
      warnings.push(`The file was made with profile ${JSON.stringify(m.profile)}, which this engine does not define: the model was left as it is.`);
    }
  } else if (m && typeof m.arch === 'string') {
    const a = archs.find((x) => x.name === m.arch);
    if (!a) return { error: `The file was made with arch ${JSON.stringify(m.arch)}, which this engine does not serve.` };
    model = modelFormFromSettings(a, profiles, m);
  } else if (!m) {
    warnings.push('The file names no model this engine knows: the model was left as it is.');
  }
  model = model ?? current;
  const arch = model ? archs.find((x) => x.name === model.arch) : undefined;
  if (!model || !arch) return { error: 'The file names no model this engine knows; pick one first, then drop the file again.' };
  const profile = profiles.find((p) => p.name === model.profile) ?? null;
  const restored = sampleFormFromSettings(arch, resolvedDefaults(arch, model.variant, profile), answer.sample ?? {});
  return { model, sample: restored.sample, warnings: [...warnings, ...restored.warnings] };
}
