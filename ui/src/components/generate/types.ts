// What the engine serves (GET /models, /health, result frames), as the Generate page uses it.
import type { PreviewSpec } from '@/utils/engineStream';

export interface ArchInfo {
  name: string;
  /** `model.attention` names this engine can run for the arch (GET /models; `auto` first) */
  attention?: string[];
  modality: 'image' | 'video' | 'audio' | string;
  default_name_or_path: string;
  defaults: {
    width: number;
    height: number;
    num_inference_steps: number;
    guidance_scale: number;
    num_frames: number;
    fps: number;
    duration: number;
    output_ext: string;
  };
  size_divisor: number;
  /** every task needs a reference image (an edit-only arch) */
  needs_ctrl_img: boolean;
  /** the tasks it serves, its default first, with the image inputs each needs and takes (newer engines) */
  tasks?: TaskInfo[];
  uses_negative_prompt: boolean;
  sample_extras: Record<string, unknown>;
  /** 'float' | 'int' | 'str' | 'bool' per extra (newer engines) */
  sample_extra_types?: Record<string, string>;
  /** variant name -> its sample defaults (common keys and extras); empty when the arch has none */
  variants?: Record<string, Record<string, unknown>>;
  default_variant?: string | null;
  /** variant name -> its own hub repo (sd3's 3.5-large / 3.5-medium, ...) */
  variant_sources?: Record<string, string>;
  round_size?: boolean;
  /** the sample a request for this arch (its default variant) gets when it sets none, as the engine resolves it */
  sample: Record<string, unknown>;
  /** variant name -> the sample a request for that variant gets when it sets none (engine-resolved) */
  variant_samples: Record<string, Record<string, unknown>>;
  description: string;
  output_exts: string[];
  preview: PreviewSpec;
  /** the schedulers a request may name in `sample.sampler` (newer engines); none: only the model's own */
  samplers?: SamplerInfo[];
  /** whether `sample.batch_size` > 1 is served (newer engines) */
  batch?: boolean;
  /** the sample keys it takes, each with its type, bounds and choices (the engine's limits included):
   * what the form checks a value against and what the request carries (formChecks.ts, requestBody.ts) */
  fields: Record<string, FieldSpec>;
  /** the control model classes it takes (`sample.controls`), each with its union modes (newer engines) */
  controls?: ControlClassInfo[];
}

/** One control class an arch takes (GET /models `controls`): a union one lists its `modes`. */
export interface ControlClassInfo {
  class: string;
  label: string;
  tasks: string[];
  modes: string[];
}

/** One sample field of an arch (GET /models `fields`), as toolkit/config_modules.py fields_for serves it. */
export interface FieldSpec {
  type: 'int' | 'float' | 'str' | 'bool' | string;
  min?: number;
  max?: number;
  /** the value must be more than `min` */
  exclusive_min?: boolean;
  multiple_of?: number;
  /** the engine rounds a value up to `multiple_of` instead of refusing it */
  rounded?: boolean;
  choices?: unknown[];
  nullable?: boolean;
  /** an object field's keys (`hires`, `upscale`), each with its default */
  fields?: Record<string, FieldSpec>;
  default?: unknown;
  /** a string's UTF-8 length at most */
  max_bytes?: number;
}

/** One entry of an arch's `samplers` (GET /models): `name` is what `sample.sampler` takes. */
export interface SamplerInfo {
  name: string;
  /** A1111's sampler_name */
  label: string;
  schedule: 'automatic' | 'karras' | string;
  /** the diffusers scheduler class */
  scheduler: string;
}

/** One task of an arch (GET /models): the engine infers it from the inputs a request sets. */
export interface TaskInfo {
  name: 'txt2img' | 'img2img' | 'inpaint' | 'edit' | 'i2v' | 'v2v' | 'a2a' | 'audio_inpaint' | string;
  /** sample keys it needs (init_img, mask_img, ctrl_img, init_video, init_audio) and may also take (ctrl_img_1..3, mask_video) */
  needs: string[];
  takes: string[];
  /** img2img / inpaint / a2a: the default strength */
  strength: number | null;
  /** the kind of file each input is (newer engines) */
  kinds?: Record<string, 'image' | 'video' | 'audio'>;
}

/** A named local model from the engine's profiles file (no paths). */
export interface ProfileInfo {
  name: string;
  architecture: string;
  variant: string | null;
  defaults: Record<string, unknown>;
  /** the sample a request for this profile gets when it sets none ([generation] included), engine-resolved;
   * null when the engine cannot resolve it (sample_error says why) */
  sample: Record<string, unknown> | null;
  sample_error?: string | null;
}

export interface ModelsResponse {
  archs: ArchInfo[];
  profiles?: ProfileInfo[];
  /** a profile name, or a model dict like {arch, name_or_path}, or null */
  default_model?: unknown;
  /** engine.limits (max_pixels, max_batch, ...); each arch's `fields` already include them */
  limits?: Record<string, number>;
}

export interface PoolEntry {
  key: string;
  role: string;
  class: string;
  bytes: number;
  device: string;
  last_used: number;
}

/** A LoRA the pool holds (newer engines): `active` when it is applied to the loaded model, at `scale`. */
export interface AdapterEntry {
  key: string;
  name: string;
  bytes: number;
  hits: number;
  active: boolean;
  scale: number | null;
  last_used: number;
}

export interface PoolStats {
  hits: number;
  misses: number;
  evictions: number;
  resident_bytes: number;
  entries: PoolEntry[];
  /** component loads (not adapters); newer engines */
  loads?: number;
  adapters?: AdapterEntry[];
  adapter_loads?: number;
  adapter_hits?: number;
}

export interface Health {
  ok: boolean;
  busy: boolean;
  queue: number;
  active: { arch: string; name_or_path: string; profile?: string | null; variant?: string | null } | null;
  memory: { device: string; used: number; total: number };
  pool: PoolStats;
  uptime: number;
  /** false while the engine starts: its worker, then its default model (engine.default_model) */
  ready?: boolean;
  /** what it does before it is ready ("loading the default model …"), null once ready */
  starting?: string | null;
}

/** One file of the engine's lora_folder (GET /loras). */
export interface LoraFile {
  /** relative to the folder, no extension ("sub/foo") */
  name: string;
  /** relative to the folder ("sub/foo.safetensors"): what `model.loras[].path` takes */
  path: string;
  bytes: number;
  mtime: number;
  format: 'peft' | 'kohya' | 'comfyui' | 'unknown' | string;
  /** the arch it was made for; null when the file does not say */
  arch: string | null;
  rank: number | null;
  alpha: number | null;
  trigger_words: string[];
  output_name: string | null;
  base_model: string | null;
  /** the file could not be read */
  error?: string;
}

/** GET /loras: `folder` null when the engine has no lora_folder. */
export interface LorasResponse {
  folder: string | null;
  loras: LoraFile[];
}

/** A LoRA the request applies: `path` relative to the engine's lora_folder, or absolute. */
export interface LoraPick {
  path: string;
  scale: number;
}

export interface ResultInfo {
  path?: string;
  relpath: string;
  url: string;
  kind: 'image' | 'video' | 'audio' | string;
  ext: string;
  bytes: number;
  seed: number;
  /** the item of a batch (0 for a single output) */
  index?: number;
  width: number | null;
  height: number | null;
  num_frames: number | null;
  fps: number | null;
  duration: number | null;
  /** a video with a soundtrack (LTX-2's: an AAC track in an mp4, Opus in a webm) */
  audio?: boolean;
}

export interface ModelForm {
  /** a profile name ('' = none): the profile names the arch and the weights */
  profile: string;
  arch: string;
  /** '' = the arch's default variant */
  variant: string;
  name_or_path: string;
  quantize: boolean;
  qtype: string;
  quantize_te: boolean;
  qtype_te: string;
  low_vram: boolean;
  /** `model.compile`: the denoiser compiled (true), eager (false); unset: the engine's `engine.compile` */
  compile?: boolean;
  /** `model.attention`: the denoiser's attention kernel; unset: auto */
  attention?: string;
  /** applied in order (`model.loras`) */
  loras: LoraPick[];
  /** role -> local file (a single-file model from the Library page, a VAE override); sent with local_only */
  components?: Record<string, string>;
  /** a diffusers folder or repo the files' other components and configs come from (a library entry's) */
  extras_name_or_path?: string;
}

export interface SampleForm {
  prompt: string;
  negative_prompt: string;
  width: number;
  height: number;
  num_inference_steps: number;
  guidance_scale: number;
  seed: number;
  num_frames: number;
  fps: number;
  duration: number;
  output_ext: string;
  extras: Record<string, unknown>;
  /** inputs by sample key (init_img, mask_img, ctrl_img, ctrl_img_1..3, init_video, mask_video, init_audio):
   * the asset id POST /assets returned */
  images: Partial<Record<SampleInput, string | null>>;
  /** audio_inpaint: the seconds of the input audio generated anew (null: not set) */
  mask_start?: number | null;
  mask_end?: number | null;
  /** '' = automatic: the engine infers it from the inputs (POST /resolve says which) */
  task: string;
  /** null = the task's own default (POST /resolve says which) */
  strength: number | null;
  resize_mode: string;
  /** '' = the model's own scheduler (no `sampler` key) */
  sampler: string;
  /** the flow shift (`sample.shift`, archs with a fixed one); null = the model's own; absent on older forms */
  shift?: number | null;
  batch_size: number;
  /** ControlNets (`sample.controls`), in order; absent on a form saved by an older page */
  controls?: ControlForm[];
  /** the hires fix (`sample.hires`): sent when `enabled` */
  hires?: HiresForm | null;
}

/** One Control panel: its image (an asset id), model (a /library controlnet entry's name), map and strength. */
export interface ControlForm {
  image: string | null;
  model: string;
  preprocessor: string;
  scale: number;
  start: number;
  end: number;
  /** a union model's control type ('' = none chosen) */
  mode: string;
  resize_mode: string;
  /** the preprocessor's sliders (null: its default) */
  processor_res: number | null;
  threshold_a: number | null;
  threshold_b: number | null;
}

export interface HiresForm {
  enabled: boolean;
  scale: number;
  upscaler: string;
  /** 0: the base pass's steps */
  steps: number;
  denoise: number;
}

/** A request's inputs by sample key: images, then the input video, its mask and the input audio
 * (v2v, a2a, audio_inpaint), each an asset id. The kind of file each is: INPUT_KIND. */
export const SAMPLE_INPUTS = ['init_img', 'mask_img', 'ctrl_img', 'ctrl_img_1', 'ctrl_img_2', 'ctrl_img_3', 'init_video', 'mask_video', 'init_audio'] as const;
export type SampleInput = (typeof SAMPLE_INPUTS)[number];
export const INPUT_KIND: Record<SampleInput, 'image' | 'video' | 'audio'> = {
  init_img: 'image',
  mask_img: 'image',
  ctrl_img: 'image',
  ctrl_img_1: 'image',
  ctrl_img_2: 'image',
  ctrl_img_3: 'image',
  init_video: 'video',
  mask_video: 'video',
  init_audio: 'audio',
};
/** The reference images of an edit task, in the order the engine fills them. */
export const REFERENCE_INPUTS = ['ctrl_img', 'ctrl_img_1', 'ctrl_img_2', 'ctrl_img_3'] as const;

export interface GalleryItem {
  key: string;
  requestId: string;
  jobId: string;
  jobName: string;
  result: ResultInfo;
  /** the resolved settings from the start frame */
  model: Record<string, unknown>;
  sample: Record<string, unknown>;
  createdAt: string;
  /** seconds: submit to result (this page's clock), the engine's run to its last step (load included), the model load */
  timings?: GenerationTimings;
  /** ok (the history keeps finished results) */
  status?: string;
  /** who asked: ui, cli, grid, native, a1111, openai, comfyui, sdcpp (historySource.ts) */
  source?: string;
  /** the asking client's own name where it gave one (a ComfyUI client_id) */
  client?: string | null;
}

export interface GenerationTimings {
  total_s: number | null;
  run_s: number | null;
  load_s: number | null;
}
