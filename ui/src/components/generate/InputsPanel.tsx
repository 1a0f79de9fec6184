'use client';
// Input images and the task, from the arch's `tasks` (GET /models): the input image (img2img,
// inpaint, i2v) with its mask painter, strength and resize mode; the reference images of an edit
// task (ctrl_img, ctrl_img_1..3, as many slots as it takes); the task itself (automatic by default:
// the engine infers it from the inputs, and its POST /resolve answer says which, with the task's
// strength, or what it refuses about the inputs).
import type { Ref } from 'react';
import ImageDrop from './ImageDrop';
import MaskPainter, { type MaskPainterHandle } from './MaskPainter';
import ReferenceSlots from './ReferenceSlots';
import { StrengthField, TaskSelect } from './TaskFields';
import { INPUT_KEYS, problemPlace, problemText } from './resolveRequest';
import { RESIZE_LABELS, archTakes, inputsOf, referenceSlots, tasksOf } from './tasks';
import { INPUT_KIND, SAMPLE_INPUTS, type ArchInfo, type SampleInput, type SampleForm } from './types';
import type { Resolved } from './useResolve';

interface Props {
  arch: ArchInfo;
  sample: SampleForm;
  job: { id: string; name: string } | null;
  painterRef: Ref<MaskPainterHandle>;
  uploadMask: (png: Blob) => Promise<string>;
  onMaskPaint: (hasPaint: boolean) => void;
  onChange: (patch: Partial<SampleForm>) => void;
  /** the engine's answer to the form (useResolve.ts) */
  resolved: Pick<Resolved, 'task' | 'defaultStrength' | 'problem'>;
}

/** Whether the arch takes any input (the panel shows only then). */
export function archTakesInputs(arch: ArchInfo): boolean {
  return SAMPLE_INPUTS.some((k) => archTakes(arch, k)) || referenceSlots(arch).length > 0;
}

const MEDIA_LABELS: Partial<Record<SampleInput, string>> = {
  init_video: 'Input video (its first frames: the source or control video)',
  mask_video: 'Mask video (optional: white is generated)',
  init_audio: 'Input audio',
};

/** The input video, its mask and the input audio, where a task of the arch takes them (v2v, a2a,
 * audio_inpaint); the audio_inpaint region's seconds where the arch serves that task. */
function MediaInputs({ arch, sample, job, onChange }: Pick<Props, 'arch' | 'sample' | 'job' | 'onChange'>) {
  const keys = (['init_video', 'mask_video', 'init_audio'] as const).filter((k) => archTakes(arch, k));
  const region = (key: 'mask_start' | 'mask_end', text: string) =>
    arch.fields[key] ? (
      <label className="field">
        {text}
        <input
          type="number"
          min={0}
          step={0.1}
          value={sample[key] ?? ''}
          onChange={(e) => onChange({ [key]: e.target.value === '' ? null : Number(e.target.value) })}
          aria-label={text}
          data-testid={`${key.replace('_', '-')}`}
        />
      </label>
    ) : null;
  return (
    <>
      {keys.map((key) => (
        <ImageDrop
          key={key}
          kind={INPUT_KIND[key]}
          label={`${MEDIA_LABELS[key]} (${tasksOf(arch).filter((t) => inputsOf(t).includes(key)).map((t) => t.name).join(', ')})`}
          testId={`${key.replace('_', '-')}-drop`}
          assetId={sample.images[key] ?? null}
          job={job}
          onChange={(id) => onChange({ images: { ...sample.images, [key]: id } })}
        />
      ))}
      {sample.images.init_audio && region('mask_start', 'Inpaint from (s)')}
      {sample.images.init_audio && region('mask_end', 'Inpaint to (s)')}
    </>
  );
}

export default function InputsPanel({ arch, sample, job, painterRef, uploadMask, onMaskPaint, onChange, resolved }: Props) {
  const tasks = tasksOf(arch);
  const { task, defaultStrength, problem } = resolved;
  const place = problem ? problemPlace(problem) : null;
  const mine = problem && place && 'sample' in place && INPUT_KEYS.has(place.sample) ? problemText(problem) : null;
  const images = sample.images;
  const setImage = (key: SampleInput, id: string | null) => {
    const next = { ...images, [key]: id };
    if (key === 'init_img') next.mask_img = null; // a mask belongs to its image
    onChange({ images: next });
  };
  const slots = referenceSlots(arch);
  const initTasks = tasks.filter((x) => inputsOf(x).includes('init_img')).map((x) => x.name);
  const takesMask = archTakes(arch, 'mask_img');

  return (
    <section className="card" aria-label="Input images" data-testid="inputs-panel">
      <h3>Input images</h3>
      {tasks.length > 1 && (
        <TaskSelect arch={arch} chosen={sample.task} task={task} unresolved={mine ? 'no task fits these inputs' : null} onTask={(name) => onChange({ task: name })} />
      )}
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
      {images.init_img && (
        <label className="field">
          Resize mode (the input to {sample.width}×{sample.height})
          <select value={sample.resize_mode || 'crop'} onChange={(e) => onChange({ resize_mode: e.target.value })} aria-label="Resize mode" data-testid="resize-mode">
            {(arch.fields.resize_mode?.choices ?? ['crop']).map((m) => (
              <option key={String(m)} value={String(m)}>
                {RESIZE_LABELS[String(m)] ?? String(m)}
              </option>
            ))}
          </select>
        </label>
      )}
      {task && defaultStrength !== null && (
        <StrengthField task={task} defaultStrength={defaultStrength} chosen={sample.strength} spec={arch.fields.strength} onStrength={(v) => onChange({ strength: v })} />
      )}
      <ReferenceSlots arch={arch} slots={slots} images={images} job={job} onImages={(next) => onChange({ images: next })} />
      <MediaInputs arch={arch} sample={sample} job={job} onChange={onChange} />
      {mine && (
        <ul className="task-notes small" data-testid="task-notes">
          <li>{mine}</li>
        </ul>
      )}
    </section>
  );
}
