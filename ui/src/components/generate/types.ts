// What the engine serves (GET /models, /health, result frames), as the Generate page uses it.
import type { PreviewSpec } from '@/utils/engineStream';

export interface ArchInfo {
  name: string;
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
  needs_ctrl_img: boolean;
  uses_negative_prompt: boolean;
  sample_extras: Record<string, unknown>;
  description: string;
  output_exts: string[];
  preview: PreviewSpec;
}

export interface ModelsResponse {
  archs: ArchInfo[];
  profiles: unknown[];
}

export interface PoolEntry {
  key: string;
  role: string;
  class: string;
  bytes: number;
  device: string;
  last_used: number;
}

export interface Health {
  ok: boolean;
  busy: boolean;
  queue: number;
  active: { arch: string; name_or_path: string } | null;
  memory: { device: string; used: number; total: number };
  pool: { hits: number; misses: number; evictions: number; resident_bytes: number; entries: PoolEntry[] };
  uptime: number;
}

export interface ResultInfo {
  path?: string;
  relpath: string;
  url: string;
  kind: 'image' | 'video' | 'audio' | string;
  ext: string;
  bytes: number;
  seed: number;
  width: number | null;
  height: number | null;
  num_frames: number | null;
  fps: number | null;
  duration: number | null;
}

export interface ModelForm {
  arch: string;
  name_or_path: string;
  quantize: boolean;
  qtype: string;
  quantize_te: boolean;
  qtype_te: string;
  low_vram: boolean;
  lora_path: string;
  lora_scale: number;
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
  /** the path POST /assets returned, and the file's name for display */
  ctrl_img: string | null;
  ctrl_img_name: string | null;
}

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
}
