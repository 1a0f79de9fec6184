'use client';
// Input images and the task, all from the arch's `tasks` (GET /models): the input image (img2img,
// inpaint, i2v) with its mask painter, strength and resize mode; the reference images of an edit
// task (ctrl_img, ctrl_img_1..3, as many slots as it takes); the task itself (automatic by default:
// the engine infers it from the inputs, and the form shows which).
import type { Ref } from 'react';
import ImageDrop from './ImageDrop';
import MaskPainter, { type MaskPainterHandle } from './MaskPainter';
import ReferenceSlots from './ReferenceSlots';
import { StrengthField, TaskSelect } from './TaskFields';
import { presentInputs } from './requestBody';
import {
  RESIZE_MODES,
  archTakes,
  effectiveTask,
  inferTask,
  inputsOf,
  referenceSlots,
  strengthFor,
  taskInfo,
  taskNotes,
  tasksOf,
} from './tasks';
import { IMAGE_INPUTS, type ArchInfo, type ImageInput, type SampleForm } from './types';

interface Props {
  arch: ArchInfo;
  sample: SampleForm;
  job: { id: string; name: string } | null;
  maskPainted: boolean;
  painterRef: Ref<MaskPainterHandle>;
  uploadMask: (png: Blob) => Promise<string>;
  onMaskPaint: (hasPaint: boolean) => void;
  onChange: (patch: Partial<SampleForm>) => void;
}

/** Whether the arch takes any input image (the panel shows only then). */
export function archTakesInputs(arch: ArchInfo): boolean {
  return IMAGE_INPUTS.some((k) => archTakes(arch, k)) || referenceSlots(arch).length > 0;
}

export default function InputsPanel({ arch, sample, job, maskPainted, painterRef, uploadMask, onMaskPaint, onChange }: Props) {
  const tasks = tasksOf(arch);
  const present = presentInputs(sample, maskPainted);
  const inferred = inferTask(arch, present);
  const task = effectiveTask(arch, sample, present);
  const t = taskInfo(arch, task);
  const strength = strengthFor(arch, task, sample);
  const images = sample.images;
  const setImage = (key: ImageInput, id: string | null) => {
    const next = { ...images, [key]: id };
    if (key === 'init_img') next.mask_img = null; // a mask belongs to its image
    onChange({ images: next });
  };
  const slots = referenceSlots(arch);
  const initTasks = tasks.filter((x) => inputsOf(x).includes('init_img')).map((x) => x.name);
  const takesMask = archTakes(arch, 'mask_img');
  const notes = taskNotes(arch, sample, present);

  return (
    <section className="card" aria-label="Input images" data-testid="inputs-panel">
      <h3>Input images</h3>
      {tasks.length > 1 && <TaskSelect arch={arch} chosen={sample.task} task={task} inferred={inferred} onTask={(name) => onChange({ task: name })} />}
      {initTasks.length > 0 && (
        <>
          <ImageDrop
            label={`${arch.modality === 'video' ? 'First frame' : 'Input image'} (${initTasks.join(', ')})`}
            testId="init-drop"
            assetId={images.init_img ?? null}
            job={job}
            onChange={(id) => setImage('init_img', id)}
          />
          {takesMask && images.init_img && job && (
            <MaskPainter
              key={images.init_img}
              ref={painterRef}
              job={job}
              imageAsset={images.init_img}
              maskAsset={images.mask_img ?? null}
              upload={uploadMask}
              onPaint={onMaskPaint}
            />
          )}
        </>
      )}
      {t && inputsOf(t).includes('init_img') && (
        <label className="field">
          Resize mode (the input to {sample.width}×{sample.height})
          <select value={sample.resize_mode || 'crop'} onChange={(e) => onChange({ resize_mode: e.target.value })} aria-label="Resize mode" data-testid="resize-mode">
            {RESIZE_MODES.map((m) => (
              <option key={m.value} value={m.value}>
                {m.label}
              </option>
            ))}
          </select>
        </label>
      )}
      {strength !== null && t && <StrengthField task={t} strength={strength} chosen={sample.strength} onStrength={(v) => onChange({ strength: v })} />}
      <ReferenceSlots arch={arch} slots={slots} images={images} job={job} onImages={(next) => onChange({ images: next })} />
      {notes.length > 0 && (
        <ul className="task-notes small" data-testid="task-notes">
          {notes.map((n) => (
            <li key={n}>{n}</li>
          ))}
        </ul>
      )}
    </section>
  );
}
