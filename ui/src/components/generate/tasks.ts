// Tasks and input images, from the arch's `tasks` in GET /models (never a per-arch table here): which
// inputs the form offers. Which task a request runs is the engine's answer (POST /resolve, useResolve.ts).
import { REFERENCE_INPUTS, type ArchInfo, type SampleInput, type SampleForm, type TaskInfo } from './types';

/** Words for `sample.resize_mode`'s choices (GET /models `fields.resize_mode.choices`): how the engine
 * brings init_img and mask_img to the request size (A1111's modes). */
export const RESIZE_LABELS: Record<string, string> = {
  crop: 'Crop and resize (cover, cut the overflow)',
  resize: 'Just resize (stretch)',
  fill: 'Resize and fill (fit inside, pad)',
};

export const tasksOf = (arch: ArchInfo): TaskInfo[] => arch.tasks ?? [];

export function taskInfo(arch: ArchInfo, name: string | null | undefined): TaskInfo | null {
  return (name && tasksOf(arch).find((t) => t.name === name)) || null;
}

/** The inputs a task needs, then those it may also take. */
export const inputsOf = (task: TaskInfo): string[] => [...task.needs, ...task.takes];

/** Whether any of the arch's tasks takes this input. */
export function archTakes(arch: ArchInfo, input: SampleInput): boolean {
  return tasksOf(arch).some((t) => inputsOf(t).includes(input));
}

/** The reference-image slots an edit arch offers: ctrl_img, then ctrl_img_1..3 as far as its tasks take them. */
export function referenceSlots(arch: ArchInfo): SampleInput[] {
  if (!arch.tasks) return arch.needs_ctrl_img ? ['ctrl_img'] : []; // an older engine: one control image
  return REFERENCE_INPUTS.filter((r) => archTakes(arch, r));
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
export function withoutReference(images: SampleForm['images'], slots: SampleInput[], slot: SampleInput): SampleForm['images'] {
  const at = slots.indexOf(slot);
  if (at < 0) return { ...images, [slot]: null };
  const kept = slots.map((s) => images[s] ?? null).filter((_, i) => i !== at);
  const out = { ...images };
  slots.forEach((s, i) => {
    out[s] = kept[i] ?? null;
  });
  return out;
}
