// Tasks and input images, from the arch's `tasks` in GET /models (never a per-arch table here):
// which inputs the form offers, which task a request runs (the engine's own inference, mirrored so
// the form can say it), and what the request then carries.
import { REFERENCE_INPUTS, type ArchInfo, type ImageInput, type SampleForm, type TaskInfo } from './types';

/** `sample.resize_mode`: how the engine brings init_img and mask_img to the request size (A1111's modes). */
export const RESIZE_MODES: { value: string; label: string }[] = [
  { value: 'crop', label: 'Crop and resize (cover, cut the overflow)' },
  { value: 'resize', label: 'Just resize (stretch)' },
  { value: 'fill', label: 'Resize and fill (fit inside, pad)' },
];

/** The most images one request may ask for: what the engine serves (engine.limits.max_batch); an
 *  engine that says nothing is asked for one. */
export const maxBatch = (arch: ArchInfo): number => (arch.batch ? arch.max_batch ?? 1 : 1);

/** Which inputs are present: an asset id, or `true` for a mask painted but not uploaded yet. */
export type Present = Partial<Record<ImageInput, unknown>>;

export const tasksOf = (arch: ArchInfo): TaskInfo[] => arch.tasks ?? [];

export function taskInfo(arch: ArchInfo, name: string | null | undefined): TaskInfo | null {
  return (name && tasksOf(arch).find((t) => t.name === name)) || null;
}

/** The inputs a task needs, then those it may also take. */
export const inputsOf = (task: TaskInfo): string[] => [...task.needs, ...task.takes];

/** Whether any of the arch's tasks takes this input. */
export function archTakes(arch: ArchInfo, input: ImageInput): boolean {
  return tasksOf(arch).some((t) => inputsOf(t).includes(input));
}

/** The reference-image slots an edit arch offers: ctrl_img, then ctrl_img_1..3 as far as its tasks take them. */
export function referenceSlots(arch: ArchInfo): ImageInput[] {
  if (!arch.tasks) return arch.needs_ctrl_img ? ['ctrl_img'] : []; // an older engine: one control image
  return REFERENCE_INPUTS.filter((r) => archTakes(arch, r));
}

/**
 * The task the engine infers when a request names none (GenerateImageConfig._resolve_task): a mask ->
 * inpaint, an init image -> img2img (i2v on a video arch), a reference -> edit, none -> the arch's first
 * task that needs no input, else its first. null when the arch has no such task (the engine then
 * refuses the request, naming the input) or lists no tasks.
 */
export function inferTask(arch: ArchInfo, present: Present): string | null {
  const tasks = tasksOf(arch);
  if (!tasks.length) return null;
  let name: string;
  if (present.mask_img) name = 'inpaint';
  else if (present.init_img) name = arch.modality === 'video' ? 'i2v' : 'img2img';
  else if (REFERENCE_INPUTS.some((r) => present[r])) name = 'edit';
  else name = (tasks.find((t) => t.needs.length === 0) ?? tasks[0]).name;
  return taskInfo(arch, name) ? name : null;
}

/** The task a request from this form runs: the chosen one (if the arch has it), else the inferred one. */
export function effectiveTask(arch: ArchInfo, sample: Pick<SampleForm, 'task'>, present: Present): string | null {
  return taskInfo(arch, sample.task) ? sample.task : inferTask(arch, present);
}

/** The strength a request runs with: null where the task takes none, else the form's or the task's default. */
export function strengthFor(arch: ArchInfo, task: string | null, sample: Pick<SampleForm, 'strength'>): number | null {
  const t = taskInfo(arch, task);
  if (!t || t.strength === null || t.strength === undefined) return null;
  return sample.strength ?? t.strength;
}

const INPUT_WORDS: Record<string, string> = {
  init_img: 'the input image',
  mask_img: 'the mask',
  ctrl_img: 'the reference image',
  ctrl_img_1: 'reference image 2',
  ctrl_img_2: 'reference image 3',
  ctrl_img_3: 'reference image 4',
};

/**
 * What the form can tell before submitting: a task the inputs do not fit (the engine would refuse
 * it), an input the task leaves out (not sent), a strength under one step. Plain sentences.
 */
export function taskNotes(arch: ArchInfo, sample: Pick<SampleForm, 'task' | 'strength' | 'num_inference_steps'>, present: Present): string[] {
  if (!tasksOf(arch).length) return [];
  const task = effectiveTask(arch, sample, present);
  const t = taskInfo(arch, task);
  const given = Object.keys(INPUT_WORDS).filter((k) => present[k as ImageInput]);
  if (!t) {
    const served = tasksOf(arch).map((x) => x.name).join(', ');
    return [`${arch.name} has no task for ${given.map((k) => INPUT_WORDS[k]).join(' and ')} (its tasks: ${served}).`];
  }
  const notes: string[] = [];
  for (const need of t.needs) if (!present[need as ImageInput]) notes.push(`${t.name} needs ${INPUT_WORDS[need] ?? need}.`);
  const unused = given.filter((k) => !inputsOf(t).includes(k));
  if (unused.length) notes.push(`${t.name} does not use ${unused.map((k) => INPUT_WORDS[k]).join(' or ')}: it is not sent.`);
  const strength = strengthFor(arch, task, sample);
  const steps = Math.round(Number(sample.num_inference_steps));
  if (strength !== null && steps > 0 && strength * steps < 1) {
    notes.push(`Strength ${strength} of ${steps} steps is less than one step: raise the strength or the steps.`);
  }
  return notes;
}

/** An asset id as the person named the file: POST /assets stores `<8 hex>_<name>`. */
export function assetDisplayName(assetId: string): string {
  const base = assetId.split(/[\\/]/).pop() ?? assetId;
  return base.replace(/^[0-9a-f]{8}_/, '');
}

/** A name POST /assets accepts (a letter or digit first, then letters, digits, '_', '-', '.'; no
 * folders, at most 100), keeping the file's extension. */
export function assetUploadName(fileName: string, fallback = 'image.png'): string {
  const base = fileName.split(/[\\/]/).pop() ?? '';
  const m = /\.([A-Za-z0-9]{1,8})$/.exec(base);
  const ext = m ? `.${m[1]}` : '';
  const stem = (m ? base.slice(0, -m[0].length) : base)
    .replace(/[^A-Za-z0-9_-]/g, '_')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 80);
  if (!stem) return ext ? `image${ext}` : fallback;
  return stem + ext;
}

/** The sample's image inputs without the references from `slot` on shifted one down (a slot cleared). */
export function withoutReference(images: SampleForm['images'], slots: ImageInput[], slot: ImageInput): SampleForm['images'] {
  const at = slots.indexOf(slot);
  if (at < 0) return { ...images, [slot]: null };
  const kept = slots.map((s) => images[s] ?? null).filter((_, i) => i !== at);
  const out = { ...images };
  slots.forEach((s, i) => {
    out[s] = kept[i] ?? null;
  });
  return out;
}
