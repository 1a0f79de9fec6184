// What is wrong with the sample form, said next to the field instead of fixed behind the person's
// back: the request carries the values the form shows, so a width of 1000 is never sent as 1008.
// Each value the request would carry is checked against its field as the engine serves it (GET /models
// `fields`: type, min/max, multiple_of, choices; the engine's limits included), with no bound of its
// own here. Blocking notes keep Generate off (the engine would refuse the value with a 422 anyway); the
// others say what the engine will do (round a size up, sample with an empty prompt). What the fields
// cannot tell (a task the inputs do not fit, width×height over engine.limits.max_pixels) is the
// engine's POST /resolve answer (useResolve.ts), shown next to the field it names.
import { requestSample } from './requestBody';
import type { ArchInfo, FieldSpec, SampleForm } from './types';

/** A sample key the form holds (width, num_inference_steps, an extra's name, ...). */
export type CheckedField = string;

export interface FieldNote {
  field: CheckedField;
  message: string;
  /** Generate stays off while it holds */
  blocking: boolean;
  /** a one-click fix the note offers ("Use 1008") */
  fix?: { label: string; patch: Partial<SampleForm> };
  /** the engine's own words (POST /resolve), not a check of the form */
  engine?: boolean;
}

const LABELS: Record<string, string> = {
  prompt: 'Prompt',
  negative_prompt: 'Negative prompt',
  width: 'Width',
  height: 'Height',
  num_inference_steps: 'Steps',
  guidance_scale: 'Guidance',
  seed: 'Seed',
  batch_size: 'Batch size',
  num_frames: 'Frames',
  fps: 'FPS',
  duration: 'Duration',
  output_ext: 'Output format',
};

export const fieldLabel = (f: CheckedField) => LABELS[f] ?? f;

/** The smallest value the field takes (a multiple of its `multiple_of`, above an exclusive min); null: no bound. */
export function lowestValid(spec: FieldSpec): number | null {
  if (spec.min === undefined) return null;
  const step = spec.multiple_of ?? (spec.type === 'int' ? 1 : 0);
  if (!step) return spec.exclusive_min ? null : spec.min;
  const first = Math.ceil(spec.min / step) * step;
  return spec.exclusive_min && first === spec.min ? first + step : first;
}

/** The largest value the field takes (a multiple of its `multiple_of`); null: no bound. */
export function highestValid(spec: FieldSpec): number | null {
  if (spec.max === undefined) return null;
  return spec.multiple_of ? Math.floor(spec.max / spec.multiple_of) * spec.multiple_of : spec.max;
}

/** A number input's min, max and step for a field (a person's spinner lands on valid values): the
 * field's multiple as the step where it has one, else `step`. */
export function inputBounds(spec: FieldSpec, step?: number): { min?: number; max?: number; step?: number } {
  const s = spec.multiple_of ?? step ?? (spec.type === 'int' ? 1 : undefined);
  const lo = lowestValid(spec) ?? (spec.min !== undefined && spec.exclusive_min && s ? spec.min + s : undefined);
  return { min: lo, max: highestValid(spec) ?? undefined, step: s };
}

/** `v` brought inside the field's bounds (and onto its multiple), for a fix. */
function nearestValid(spec: FieldSpec, v: number): number {
  let out = spec.type === 'int' ? Math.round(v) : v;
  if (spec.multiple_of) out = Math.round(out / spec.multiple_of) * spec.multiple_of;
  const lo = lowestValid(spec);
  const hi = highestValid(spec);
  if (lo !== null && out < lo) out = lo;
  if (hi !== null && out > hi) out = hi;
  return out;
}

const blocking = (field: CheckedField, message: string, use?: number): FieldNote => ({
  field,
  message: `${fieldLabel(field)} ${message}`,
  blocking: true,
  ...(use !== undefined ? { fix: { label: `Use ${use}`, patch: { [field]: use } } } : {}),
});

/** A value not a multiple of the field's: rounded by the engine (said), or refused (the nearest offered). */
function multipleNote(field: CheckedField, v: number, spec: FieldSpec, owner: string): FieldNote | null {
  const m = spec.multiple_of;
  if (!m || v % m === 0) return null;
  const down = Math.floor(v / m) * m;
  const up = down + m;
  if (spec.rounded) return { field, message: `${fieldLabel(field)} ${v} is not a multiple of ${m}: the engine rounds it up to ${up}.`, blocking: false };
  const lo = lowestValid(spec) ?? m;
  const hi = highestValid(spec) ?? up;
  const downOk = down >= Math.max(lo, m);
  const nearest = downOk && (v - down < up - v || up > hi) ? down : up;
  return blocking(field, `${v} is not a multiple of ${m}, which ${owner} needs (${downOk ? `${down} or ` : ''}${up}).`, nearest);
}

function numberNote(field: CheckedField, value: unknown, spec: FieldSpec, owner: string, fallback: unknown): FieldNote | null {
  if (value === null || value === undefined || (typeof value === 'number' && Number.isNaN(value))) {
    if (spec.nullable) return null;
    return blocking(field, 'is empty: enter a number.', typeof fallback === 'number' ? fallback : undefined);
  }
  const v = Number(value);
  if (!Number.isFinite(v)) return blocking(field, `must be a number, not ${String(value)}.`);
  if (spec.type === 'int' && !Number.isInteger(v)) return blocking(field, `must be a whole number, not ${v}.`, nearestValid(spec, v));
  if (spec.min !== undefined && spec.exclusive_min && v <= spec.min) {
    return blocking(field, `must be more than ${spec.min}, not ${v}.`, lowestValid(spec) ?? undefined);
  }
  if (spec.min !== undefined && v < spec.min) return blocking(field, `must be at least ${spec.min}, not ${v}.`, lowestValid(spec) ?? undefined);
  if (spec.max !== undefined && v > spec.max) return blocking(field, `must be at most ${spec.max}, not ${v}.`, highestValid(spec) ?? undefined);
  return multipleNote(field, v, spec, owner);
}

function textNote(field: CheckedField, value: unknown, spec: FieldSpec): FieldNote | null {
  if (value === null || value === undefined || value === '') return spec.nullable || value === '' ? null : blocking(field, 'is empty.');
  if (spec.choices && !spec.choices.includes(value)) return blocking(field, `${JSON.stringify(value)} is not one of ${spec.choices.join(', ')}.`);
  const bytes = typeof value === 'string' ? new TextEncoder().encode(value).length : 0;
  if (spec.max_bytes !== undefined && bytes > spec.max_bytes) return blocking(field, `is ${bytes} bytes: the engine takes at most ${spec.max_bytes}.`);
  return null;
}

/**
 * What is wrong with one value against its served field (null: nothing). `owner` is who needs a
 * multiple (the arch's name); `fallback` is offered for an empty number (the arch's default).
 */
export function fieldNote(field: CheckedField, value: unknown, spec: FieldSpec, owner: string, fallback?: unknown): FieldNote | null {
  if (spec.type === 'int' || spec.type === 'float') return numberNote(field, value, spec, owner, fallback);
  if (spec.type === 'str') return textNote(field, value, spec);
  return null;
}

/** The notes for a form: each value its request would carry against the arch's field, in the fields' order. */
export function sampleNotes(arch: ArchInfo, sample: SampleForm, defaults: Record<string, unknown> = arch.sample): FieldNote[] {
  const notes: FieldNote[] = [];
  if (!sample.prompt.trim()) notes.push({ field: 'prompt', message: 'The prompt is empty: the model samples with no text to follow.', blocking: false });
  const sent = requestSample(arch, sample);
  for (const [key, spec] of Object.entries(arch.fields ?? {})) {
    if (!(key in sent)) continue;
    const note = fieldNote(key, sent[key], spec, arch.name, defaults[key]);
    // an extra's fix goes into the form's extras
    if (note?.fix && key in arch.sample_extras) note.fix.patch = { extras: { ...sample.extras, ...note.fix.patch } as Record<string, unknown> };
    if (note) notes.push(note);
  }
  return notes;
}

export const notesFor = (notes: FieldNote[], field: CheckedField) => notes.filter((n) => n.field === field);

/** Why Generate is off, from the blocking notes (null: none block). */
export function blockingSummary(notes: FieldNote[]): string | null {
  const b = notes.filter((n) => n.blocking);
  if (!b.length) return null;
  return `Fix ${b.length === 1 ? 'this field' : 'these fields'} first: ${b.map((n) => n.message).join(' ')}`;
}
