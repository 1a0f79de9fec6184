// What is wrong with the sample form, said next to the field instead of fixed behind the person's
// back: the request carries the values the form shows, so a width of 1000 is never sent as 1008.
// Blocking notes keep Generate off (the engine would refuse the value with a 422 anyway); the others
// say what the engine will do (round a size up, sample with an empty prompt). Mirrors the engine's
// checks in toolkit/config_modules.py (GenerateImageConfig.validate) from the arch's GET /models row.
import { maxBatch } from './tasks';
import type { ArchInfo, SampleForm } from './types';

export type CheckedField = 'prompt' | 'width' | 'height' | 'num_inference_steps' | 'guidance_scale' | 'seed' | 'batch_size' | 'num_frames' | 'fps' | 'duration';

export interface FieldNote {
  field: CheckedField;
  message: string;
  /** Generate stays off while it holds */
  blocking: boolean;
  /** a one-click fix the note offers ("Use 1008") */
  fix?: { label: string; patch: Partial<SampleForm> };
}

const LABELS: Record<CheckedField, string> = {
  prompt: 'Prompt',
  width: 'Width',
  height: 'Height',
  num_inference_steps: 'Steps',
  guidance_scale: 'Guidance',
  seed: 'Seed',
  batch_size: 'Batch size',
  num_frames: 'Frames',
  fps: 'FPS',
  duration: 'Duration',
};

export const fieldLabel = (f: CheckedField) => LABELS[f];

const blocking = (field: CheckedField, message: string, fix?: FieldNote['fix']): FieldNote => ({ field, message: `${LABELS[field]} ${message}`, blocking: true, fix });

function wholeAtLeast(field: CheckedField, v: number, min: number, max?: number): FieldNote | null {
  if (!Number.isFinite(v)) return blocking(field, 'is empty: enter a number.');
  if (!Number.isInteger(v)) return blocking(field, `must be a whole number, not ${v}.`, { label: `Use ${Math.max(min, Math.round(v))}`, patch: { [field]: Math.max(min, Math.round(v)) } });
  if (v < min) return blocking(field, `must be at least ${min}, not ${v}.`, { label: `Use ${min}`, patch: { [field]: min } });
  if (max !== undefined && v > max) return blocking(field, `must be at most ${max}, not ${v}.`, { label: `Use ${max}`, patch: { [field]: max } });
  return null;
}

/** A size the arch takes: a positive multiple of its divisor (or any size it rounds up itself). */
function sizeNote(field: 'width' | 'height', v: number, arch: ArchInfo): FieldNote | null {
  const d = Math.max(1, Math.floor(arch.size_divisor) || 1);
  if (!Number.isFinite(v)) return blocking(field, 'is empty: enter a number.');
  if (!Number.isInteger(v) || v <= 0) {
    const use = Math.max(d, Math.round(v / d) * d);
    return blocking(field, `must be a positive whole number, not ${v}.`, { label: `Use ${use}`, patch: { [field]: use } });
  }
  if (v > 16384) return blocking(field, `must be at most 16384, not ${v}.`, { label: 'Use 16384', patch: { [field]: 16384 - (16384 % d) } });
  if (v % d === 0) return null;
  const down = Math.floor(v / d) * d;
  const up = down + d;
  if (arch.round_size) return { field, message: `${LABELS[field]} ${v} is not a multiple of ${d}: the engine rounds it up to ${up}.`, blocking: false };
  const nearest = down >= d && v - down < up - v ? down : up;
  return blocking(field, `${v} is not a multiple of ${d}, which ${arch.name} needs (${down >= d ? `${down} or ` : ''}${up}).`, {
    label: `Use ${nearest}`,
    patch: { [field]: nearest },
  });
}

/** The notes for a form, in the order the fields show. */
export function sampleNotes(arch: ArchInfo, sample: SampleForm): FieldNote[] {
  const notes: (FieldNote | null)[] = [];
  if (!sample.prompt.trim()) notes.push({ field: 'prompt', message: 'The prompt is empty: the model samples with no text to follow.', blocking: false });
  if (arch.modality !== 'audio') notes.push(sizeNote('width', sample.width, arch), sizeNote('height', sample.height, arch));
  notes.push(wholeAtLeast('num_inference_steps', sample.num_inference_steps, 1));
  const g = sample.guidance_scale;
  if (!Number.isFinite(g)) notes.push(blocking('guidance_scale', 'is empty: enter a number.'));
  else if (g < 0) notes.push(blocking('guidance_scale', `must be 0 or more, not ${g}.`, { label: 'Use 0', patch: { guidance_scale: 0 } }));
  const seed = sample.seed;
  if (!Number.isFinite(seed)) notes.push(blocking('seed', 'is empty: enter -1 for a random seed.', { label: 'Use -1', patch: { seed: -1 } }));
  else if (!Number.isInteger(seed) || seed < -1) notes.push(blocking('seed', `must be -1 (random) or a whole number 0 or more, not ${seed}.`, { label: 'Use -1', patch: { seed: -1 } }));
  if (arch.batch) notes.push(wholeAtLeast('batch_size', sample.batch_size, 1, maxBatch(arch)));
  if (arch.modality === 'video') {
    notes.push(wholeAtLeast('num_frames', sample.num_frames, 1));
    if (!(sample.fps > 0)) notes.push(blocking('fps', `must be more than 0, not ${Number.isFinite(sample.fps) ? sample.fps : 'empty'}.`));
  }
  if (arch.modality === 'audio' && !(sample.duration > 0 && sample.duration <= 600)) {
    notes.push(blocking('duration', `must be more than 0 and at most 600 seconds, not ${Number.isFinite(sample.duration) ? sample.duration : 'empty'}.`));
  }
  return notes.filter((n): n is FieldNote => n !== null);
}

export const notesFor = (notes: FieldNote[], field: CheckedField) => notes.filter((n) => n.field === field);

/** Why Generate is off, from the blocking notes (null: none block). */
export function blockingSummary(notes: FieldNote[]): string | null {
  const b = notes.filter((n) => n.blocking);
  if (!b.length) return null;
  return `Fix ${b.length === 1 ? 'this field' : 'these fields'} first: ${b.map((n) => n.message).join(' ')}`;
}
