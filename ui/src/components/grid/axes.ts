// The X/Y grid's axes (A1111's X/Y/Z plot): what each kind varies in the Generate page's forms, its
// values parsed and checked against the arch, and the X×Y cells, each an ordinary POST /generate body
// (the base settings with that cell's two overrides).
import { controlsRequest, hiresRequest } from '@/components/generate/controlHires';
import { lorasRequest, loraLabel } from '@/components/generate/loras';
import { buildGenerateBody, samplerFromSettings } from '@/components/generate/requestBody';
import type { ArchInfo, ModelForm, ProfileInfo, SampleForm } from '@/components/generate/types';
import { parseNumbers, splitValues, type Parsed } from './axisValues';

/** A grid of more cells is refused: each is a whole generation, queued on the engine at once. */
export const MAX_CELLS = 64;

export const AXIS_KINDS = ['none', 'seed', 'steps', 'guidance', 'sampler', 'prompt', 'model', 'lora_strength', 'control_scale', 'hires_denoise'] as const;
export type AxisKind = (typeof AXIS_KINDS)[number];

export const AXIS_LABELS: Record<AxisKind, string> = {
  none: 'Nothing',
  seed: 'Seed',
  steps: 'Steps',
  guidance: 'Guidance',
  sampler: 'Sampler',
  prompt: 'Prompt S/R',
  model: 'Model',
  lora_strength: 'LoRA strength',
  control_scale: 'Control scale',
  hires_denoise: 'Hires denoise',
};

/** What the values box takes, per kind (its placeholder and hint). */
export const AXIS_HINTS: Record<AxisKind, string> = {
  none: '',
  seed: '1, 2, 3 or 1-4',
  steps: '10, 20, 30 or 10-30 (+10)',
  guidance: '3, 5.5, 7 or 2-8 (+2)',
  sampler: 'sampler names, e.g. euler, dpmpp_2m ("Default": the model\'s own)',
  prompt: 'the first value is searched for in the prompt; each value replaces it',
  model: 'profile names, or weights (hub repo or path) for this arch',
  lora_strength: '0, 0.5, 1 or 0-1 (+0.25)',
  control_scale: 'the first Control panel\'s strength: 0, 0.5, 1 or 0-1.5 (+0.5)',
  hires_denoise: 'the hires pass\'s denoise: 0.3, 0.5, 0.7 or 0.2-0.8 (+0.2)',
};

export interface AxisSpec {
  kind: AxisKind;
  /** the value list as typed */
  values: string;
  /** lora_strength: the LoRA's path among the base model's LoRAs ('' = the first) */
  lora?: string;
}

/** The base settings a grid starts from: the Generate page's stored forms, and the engine's /models. */
export interface GridBase {
  arch: ArchInfo;
  profiles: ProfileInfo[];
  model: ModelForm;
  sample: SampleForm;
}

interface Forms {
  model: ModelForm;
  sample: SampleForm;
}

/** One value of an axis: its label in the grid and what it does to the forms. */
export interface AxisValue {
  label: string;
  apply: (f: Forms) => Forms;
}

const NO_AXIS: AxisValue[] = [{ label: '', apply: (f) => f }];

/** An axis's values, or the reason it has none ("steps: 0 is below 1."). */
export function axisValues(spec: AxisSpec, base: GridBase): Parsed<AxisValue> {
  const { arch } = base;
  const numbers = (rule: Parameters<typeof parseNumbers>[2], set: (f: Forms, v: number) => Forms, label: (v: number) => string) => {
    const parsed = parseNumbers(AXIS_LABELS[spec.kind].toLowerCase(), spec.values, rule);
    if ('error' in parsed) return parsed;
    return { values: parsed.values.map((v) => ({ label: label(v), apply: (f: Forms) => set(f, v) })) };
  };
  const withSample = (f: Forms, p: Partial<SampleForm>): Forms => ({ ...f, sample: { ...f.sample, ...p } });
  switch (spec.kind) {
    case 'none':
      return { values: NO_AXIS };
    case 'seed':
      return numbers({ integer: true, min: -1, max: 2 ** 32 - 1 }, (f, v) => withSample(f, { seed: v }), (v) => `Seed: ${v}`);
    case 'steps':
      return numbers({ integer: true, min: 1 }, (f, v) => withSample(f, { num_inference_steps: v }), (v) => `Steps: ${v}`);
    case 'guidance':
      return numbers({ integer: false, min: 0 }, (f, v) => withSample(f, { guidance_scale: v }), (v) => `Guidance: ${v}`);
    case 'lora_strength':
      return loraStrength(spec, base);
    case 'sampler':
      return samplers(spec.values, arch);
    case 'prompt':
      return promptSearchReplace(spec.values, base.sample.prompt);
    case 'model':
      return models(spec.values, base);
    case 'control_scale':
      return controlScale(spec.values, base);
    case 'hires_denoise':
      return hiresDenoise(spec.values, base);
  }
}

function samplers(text: string, arch: ArchInfo): Parsed<AxisValue> {
  const items = splitValues(text);
  if (!items.length) return { error: 'sampler: give at least one sampler name.' };
  if (!(arch.samplers ?? []).length) return { error: `sampler: ${arch.name} offers no sampler choice (only its own scheduler).` };
  const values: AxisValue[] = [];
  for (const item of items) {
    const { sampler, warning } = samplerFromSettings(arch, item);
    if (warning) return { error: warning.replace(/: left at Default\.$/, '.') };
    values.push({ label: sampler || 'Default', apply: (f) => ({ ...f, sample: { ...f.sample, sampler } }) });
  }
  return { values };
}

/** A1111's Prompt S/R: the first value is the search term (it must be in the prompt), each value replaces it. */
function promptSearchReplace(text: string, prompt: string): Parsed<AxisValue> {
  const items = splitValues(text);
  if (!items.length || !items[0]) return { error: 'prompt S/R: the first value is the text to search for in the prompt; give it, then its replacements.' };
  const search = items[0];
  if (!prompt.includes(search)) return { error: `prompt S/R: ${JSON.stringify(search)} is not in the prompt (${JSON.stringify(prompt.slice(0, 80))}); the first value must be.` };
  return {
    values: items.map((v) => ({ label: v, apply: (f) => ({ ...f, sample: { ...f.sample, prompt: f.sample.prompt.split(search).join(v) } }) })),
  };
}

/** A profile name runs that profile; anything else is weights (a hub repo or a path) for the base arch. */
function models(text: string, base: GridBase): Parsed<AxisValue> {
  const items = splitValues(text);
  if (!items.length) return { error: 'model: give at least one profile name or model (hub repo or path).' };
  return {
    values: items.map((v) => {
      const profile = base.profiles.find((p) => p.name === v);
      const label = profile ? v : (v.replace(/[\\/]+$/, '').split(/[\\/]/).pop() ?? v);
      const apply = (f: Forms): Forms => ({
        ...f,
        model: profile ? { ...f.model, profile: v, name_or_path: '', components: undefined } : { ...f.model, profile: '', name_or_path: v, components: undefined },
      });
      return { label, apply };
    }),
  };
}

function loraStrength(spec: AxisSpec, base: GridBase): Parsed<AxisValue> {
  const picks = lorasRequest(base.model.loras ?? []);
  if (!picks.length) return { error: 'LoRA strength: the base settings apply no LoRA; add one on the Generate page first.' };
  const target = spec.lora ? picks.find((p) => p.path === spec.lora) : picks[0];
  if (!target) return { error: `LoRA strength: ${JSON.stringify(spec.lora)} is not one of the base settings' LoRAs.` };
  const parsed = parseNumbers('LoRA strength', spec.values, { integer: false, min: -10, max: 10 });
  if ('error' in parsed) return parsed;
  return {
    values: parsed.values.map((scale) => ({
      label: loraLabel({ path: target.path, scale }),
      apply: (f) => ({ ...f, model: { ...f.model, loras: f.model.loras.map((p) => (p.path.trim() === target.path ? { ...p, scale } : p)) } }),
    })),
  };
}

/** `sample.controls[0].scale`: the first Control panel the request sends (one with an image and a model). */
function controlScale(text: string, base: GridBase): Parsed<AxisValue> {
  const sent = controlsRequest(base.arch, base.sample.controls);
  if (!sent.length) return { error: `control scale: the base settings send no control (${(base.arch.controls ?? []).length ? 'add one with an image and a model on the Generate page first' : `${base.arch.name} takes none`}).` };
  const parsed = parseNumbers('control scale', text, { integer: false, min: 0, max: 10 });
  if ('error' in parsed) return parsed;
  // the panel the request sends first (an empty one before it is left out of the request)
  const first = (base.sample.controls ?? []).findIndex((c) => c.image && c.model.trim());
  return {
    values: parsed.values.map((scale) => ({
      label: `Control scale: ${scale}`,
      apply: (f) => ({ ...f, sample: { ...f.sample, controls: (f.sample.controls ?? []).map((c, i) => (i === first ? { ...c, scale } : c)) } }),
    })),
  };
}

/** `sample.hires.denoise`: the hires pass's strength, on settings that run the hires fix. */
function hiresDenoise(text: string, base: GridBase): Parsed<AxisValue> {
  if (!hiresRequest(base.arch, base.sample.hires)) {
    return { error: `hires denoise: the base settings run no hires fix (${base.arch.fields?.hires ? 'turn it on on the Generate page first' : `${base.arch.name} takes none`}).` };
  }
  const parsed = parseNumbers('hires denoise', text, { integer: false, min: 0, max: 1 });
  if ('error' in parsed) return parsed;
  if (parsed.values.includes(0)) return { error: 'hires denoise: 0 repaints nothing; give values above 0 (up to 1).' };
  return {
    values: parsed.values.map((denoise) => ({
      label: `Hires denoise: ${denoise}`,
      apply: (f) => ({ ...f, sample: { ...f.sample, hires: { ...f.sample.hires!, denoise } } }),
    })),
  };
}

export interface GridCell {
  x: number;
  y: number;
  requestId: string;
  body: Omit<ReturnType<typeof buildGenerateBody>, 'stream'> & { stream: { latents: 'none'; detach: true } };
}

export interface GridPlan {
  xLabels: string[];
  yLabels: string[];
  /** row by row: y * xLabels.length + x */
  cells: GridCell[];
}

/**
 * The grid: X values across, Y values down, one request per cell (batch 1, no latents: the grid
 * shows progress and results only; detached, so the page may read each cell's stream when its turn comes).
 */
export function planGrid(base: GridBase, x: AxisSpec, y: AxisSpec, runId: string): GridPlan | { error: string } {
  if (base.arch.modality !== 'image') return { error: `Grids are of images: ${base.arch.name} makes ${base.arch.modality}.` };
  if (x.kind !== 'none' && x.kind === y.kind) return { error: `X and Y both vary ${AXIS_LABELS[x.kind].toLowerCase()}: pick another for one of them.` };
  const xs = axisValues(x, base);
  if ('error' in xs) return { error: `X axis, ${xs.error}` };
  const ys = axisValues(y, base);
  if ('error' in ys) return { error: `Y axis, ${ys.error}` };
  const total = xs.values.length * ys.values.length;
  if (total > MAX_CELLS) return { error: `${xs.values.length} × ${ys.values.length} = ${total} images, over the ${MAX_CELLS} a grid may have: use fewer values.` };
  const start: Forms = { model: base.model, sample: { ...base.sample, batch_size: 1 } };
  const cells: GridCell[] = [];
  ys.values.forEach((yv, yi) =>
    xs.values.forEach((xv, xi) => {
      const f = yv.apply(xv.apply(start));
      const requestId = `${runId}-${yi * xs.values.length + xi}`;
      const body = buildGenerateBody(base.arch, f.model, f.sample, requestId, { detach: true, maxFrames: 1 });
      cells.push({ x: xi, y: yi, requestId, body: { ...body, stream: { latents: 'none', detach: true } } });
    }),
  );
  return { xLabels: xs.values.map((v) => v.label), yLabels: ys.values.map((v) => v.label), cells };
}
