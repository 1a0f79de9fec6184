// ControlNets, the hires fix and the upscale task, as the request carries them (pure): the Control
// panels' forms -> `sample.controls`, the Hires section -> `sample.hires`, a result -> a `task: upscale`
// body; which control models (GET /library `kind: controlnet`) and preprocessors (GET /preprocessors)
// a panel offers. What an arch takes comes from its GET /models row (`controls`, `fields.hires`).
import type { LibraryEntry } from '@/components/library/library';
import type { ArchInfo, ControlClassInfo, ControlForm, FieldSpec, HiresForm } from './types';

/** A preprocessor slider (GET /preprocessors `params`). */
export interface PreprocessorParam {
  label: string;
  default: number;
  min: number;
  max: number;
  step: number;
}

/** One row of GET /preprocessors. */
export interface PreprocessorInfo {
  name: string;
  modules?: string[];
  /** the annotator model it needs (null: model-free) */
  model: string | null;
  model_free?: boolean;
  params: Partial<Record<'processor_res' | 'threshold_a' | 'threshold_b', PreprocessorParam>>;
  description?: string;
  /** false where its model is not found on this machine */
  available: boolean;
}

/** One row of GET /upscalers. */
export interface UpscalerInfo {
  name: string;
  kind: 'latent' | 'pixel' | 'model' | string;
  file?: string;
}

/** A control model of GET /library (kind controlnet): the archs whose row takes it, its class label. */
export type ControlEntry = Pick<LibraryEntry, 'name' | 'path' | 'complete' | 'missing'> & { kind: string; archs?: string[]; label?: string | null };

/** Whether the arch takes ControlNets (its /models row lists control classes). */
export const archTakesControls = (arch: ArchInfo): boolean => (arch.controls ?? []).length > 0;

/** Whether the arch takes the hires fix (/models lists the `hires` field where it has an img2img task). */
export const archTakesHires = (arch: ArchInfo): boolean => !!arch.fields?.hires;

/** The control models this arch takes, of a /library answer's entries. */
export function controlModelsFor(entries: readonly { kind: string }[] | null, arch: ArchInfo): ControlEntry[] {
  return ((entries ?? []) as ControlEntry[]).filter((e) => e.kind === 'controlnet' && e.complete !== false && (e.archs ?? []).includes(arch.name));
}

/**
 * What `sample.controls[i].model` takes for a library entry: its name in the controlnet directory (the
 * library names it under the model folder: `controlnet/x.safetensors`, A1111's `ControlNet/x`), the
 * engine finding a bare name there; a file deeper down by its path (a name with a folder in it is a path).
 */
export function controlModelValue(entry: Pick<ControlEntry, 'name' | 'path'>): string {
  const name = entry.name.replace(/^(models\/)?controlnet\//i, '');
  return name.includes('/') && entry.path ? entry.path : name;
}

/** The arch's control class a library entry is (by its label): a union class lists its modes. */
export function controlClassOf(arch: ArchInfo, entry: ControlEntry | undefined): ControlClassInfo | null {
  if (!entry) return null;
  const classes = arch.controls ?? [];
  return classes.find((c) => c.label === entry.label) ?? (classes.length === 1 ? classes[0] : null);
}

/** Why a preprocessor cannot be picked here, or null. */
export function preprocessorUnavailable(p: PreprocessorInfo): string | null {
  return p.available ? null : `its model${p.model ? ` (${p.model})` : ''} is not on this machine`;
}

export function newControl(model = ''): ControlForm {
  return { image: null, model, preprocessor: 'none', scale: 1, start: 0, end: 1, mode: '', resize_mode: 'crop', processor_res: null, threshold_a: null, threshold_b: null };
}

const num = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/**
 * `sample.controls`: each panel with an image and a model, as the engine takes it (its sliders only
 * when set, `mode` only where the arch's class for it is a union one; nothing rounded or clamped: the
 * engine's 422 names `sample.controls[i].<key>`).
 */
export function controlsRequest(arch: ArchInfo, controls: readonly ControlForm[] | undefined): Record<string, unknown>[] {
  if (!archTakesControls(arch)) return [];
  const unions = (arch.controls ?? []).some((c) => c.modes.length > 0);
  return (controls ?? [])
    .filter((c) => c.image && c.model.trim())
    .map((c) => {
      const out: Record<string, unknown> = {
        model: c.model.trim(),
        image: c.image,
        preprocessor: c.preprocessor || 'none',
        scale: Number(c.scale),
        start: Number(c.start),
        end: Number(c.end),
        resize_mode: c.resize_mode || 'crop',
      };
      if (unions && c.mode) out.mode = c.mode;
      for (const k of ['processor_res', 'threshold_a', 'threshold_b'] as const) if (num(c[k])) out[k] = c[k];
      return out;
    });
}

/** The Hires section's starting values: the arch's `fields.hires` defaults, off. */
export function hiresDefaults(arch: ArchInfo): HiresForm {
  const f: Record<string, FieldSpec> = arch.fields?.hires?.fields ?? {};
  const d = (k: string, fallback: number) => (num(f[k]?.default) ? (f[k].default as number) : fallback);
  return {
    enabled: false,
    scale: d('scale', 2),
    upscaler: typeof f.upscaler?.default === 'string' ? f.upscaler.default : 'Latent',
    steps: d('steps', 0),
    denoise: d('denoise', 0.7),
  };
}

/** `sample.hires` when the section is on and the arch takes it, else null. */
export function hiresRequest(arch: ArchInfo, hires: HiresForm | null | undefined): Record<string, unknown> | null {
  if (!hires?.enabled || !archTakesHires(arch)) return null;
  return { scale: Number(hires.scale), upscaler: hires.upscaler, steps: Number(hires.steps), denoise: Number(hires.denoise) };
}

/** A resolved `sample.hires` (a gallery item's, a file's) back into the section, on. */
export function hiresFromSettings(arch: ArchInfo, value: unknown): HiresForm | null {
  if (!value || typeof value !== 'object' || !archTakesHires(arch)) return null;
  const h = value as Record<string, unknown>;
  const d = hiresDefaults(arch);
  return {
    enabled: true,
    scale: num(h.scale) ? h.scale : d.scale,
    upscaler: typeof h.upscaler === 'string' ? h.upscaler : d.upscaler,
    steps: num(h.steps) ? h.steps : d.steps,
    denoise: num(h.denoise) ? h.denoise : d.denoise,
  };
}

/** Resolved `sample.controls` back into panels (the image by its asset id: the stored file's name). */
export function controlsFromSettings(arch: ArchInfo, value: unknown): ControlForm[] {
  if (!Array.isArray(value) || !archTakesControls(arch)) return [];
  return value
    .filter((c): c is Record<string, unknown> => !!c && typeof c === 'object')
    .map((c) => {
      const image = typeof c.image === 'string' ? (c.image.split(/[\\/]/).pop() ?? c.image) : null;
      const model = typeof c.model === 'string' ? c.model : '';
      return {
        ...newControl(model),
        image,
        preprocessor: typeof c.preprocessor === 'string' ? c.preprocessor : 'none',
        scale: num(c.scale) ? c.scale : 1,
        start: num(c.start) ? c.start : 0,
        end: num(c.end) ? c.end : 1,
        mode: typeof c.mode === 'string' ? c.mode : num(c.mode) ? String(c.mode) : '',
        resize_mode: typeof c.resize_mode === 'string' ? c.resize_mode : 'crop',
        processor_res: num(c.processor_res) ? c.processor_res : null,
        threshold_a: num(c.threshold_a) ? c.threshold_a : null,
        threshold_b: num(c.threshold_b) ? c.threshold_b : null,
      };
    });
}

/** The upscalers a pixel upscale takes (the task refuses a latent mode). */
export const pixelUpscalers = (list: readonly UpscalerInfo[]): UpscalerInfo[] => list.filter((u) => u.kind !== 'latent');

export interface UpscaleChoice {
  upscaler: string;
  scale: number;
}

/** The upscale a result's Upscale action starts with: the form's hires upscaler and scale where it is a
 * pixel one, else Lanczos ×2. */
export function upscaleDefaults(hires: HiresForm | null | undefined, upscalers: readonly UpscalerInfo[]): UpscaleChoice {
  const pixel = pixelUpscalers(upscalers);
  const fromForm = hires && pixel.some((u) => u.name === hires.upscaler) ? hires.upscaler : null;
  return { upscaler: fromForm ?? (pixel.find((u) => u.name === 'Lanczos')?.name ?? pixel[0]?.name ?? 'Lanczos'), scale: hires?.scale && hires.scale > 1 ? hires.scale : 2 };
}

/** `sample` of a `task: upscale` request: the input alone, no diffusion. */
export function upscaleSample(initImg: string, choice: UpscaleChoice, seed = 0): Record<string, unknown> {
  return { prompt: '', seed, task: 'upscale', init_img: initImg, upscale: { upscaler: choice.upscaler, scale: Number(choice.scale) } };
}

/** A result's Upscale action as the gallery and the viewer take it. */
export interface UpscaleAction {
  upscalers: UpscalerInfo[];
  initial: UpscaleChoice;
  run: (item: import('./types').GalleryItem, choice: UpscaleChoice) => Promise<string | null>;
}
