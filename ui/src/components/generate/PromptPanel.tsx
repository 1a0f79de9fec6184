'use client';
// The sample settings. Which fields show depends on the arch's ArchInfo from the engine.
// A value the engine would refuse or change gets a note under its field (formChecks.ts); the field
// keeps what the person typed.
import { notesFor, type FieldNote } from './formChecks';
import NumberField, { FieldNotes } from './NumberField';
import { maxBatch } from './tasks';
import type { ArchInfo, SampleForm, SamplerInfo } from './types';

interface Props {
  arch: ArchInfo;
  sample: SampleForm;
  notes: FieldNote[];
  onChange: (patch: Partial<SampleForm>) => void;
}

/** One of the arch's sample extras (GET /models: its default and type), as a number, checkbox or text. */
function ExtraField({ name, def, type: served, value, onChange }: { name: string; def: unknown; type?: string; value: unknown; onChange: (v: unknown) => void }) {
  const type = served ?? (typeof def === 'number' ? 'float' : typeof def === 'boolean' ? 'bool' : 'str');
  return (
    <label className="field">
      {name}
      {type === 'float' || type === 'int' ? (
        <input
          type="number"
          step={type === 'int' ? 1 : 'any'}
          value={value === null || value === undefined || Number.isNaN(value) ? '' : Number(value)}
          placeholder={def === null ? 'automatic' : undefined}
          onChange={(e) => onChange(e.target.value === '' ? null : Number(e.target.value))}
          aria-label={name}
        />
      ) : type === 'bool' ? (
        <input type="checkbox" checked={Boolean(value)} onChange={(e) => onChange(e.target.checked)} aria-label={name} />
      ) : (
        <textarea rows={2} value={String(value ?? '')} onChange={(e) => onChange(e.target.value)} aria-label={name} />
      )}
    </label>
  );
}

/** "DPM++ 2M Karras": A1111's name for a sampler with its schedule. */
const samplerLabel = (s: SamplerInfo) => (s.schedule && s.schedule !== 'automatic' ? `${s.label} ${s.schedule[0].toUpperCase()}${s.schedule.slice(1)}` : s.label);

/** A scheduler of the arch's `samplers`, or the model's own. */
function SamplerSelect({ samplers, value, onChange }: { samplers: SamplerInfo[]; value: string; onChange: (name: string) => void }) {
  return (
    <label className="field">
      Sampler
      <select value={samplers.some((x) => x.name === value) ? value : ''} onChange={(e) => onChange(e.target.value)} aria-label="Sampler" data-testid="sampler-select">
        <option value="">Default (the model&apos;s own)</option>
        {samplers.map((x) => (
          <option key={x.name} value={x.name} title={x.scheduler}>
            {samplerLabel(x)}
          </option>
        ))}
      </select>
    </label>
  );
}

const randomSeed = () => Math.floor(Math.random() * 2 ** 31);

export default function PromptPanel({ arch, sample, notes, onChange }: Props) {
  const samplers = arch.samplers ?? [];
  const num = { notes, onFix: onChange };
  const promptNotes = notesFor(notes, 'prompt');

  return (
    <section className="card" aria-label="Prompt">
      <h3>Prompt</h3>
      <label className="field">
        Prompt
        <textarea
          rows={3}
          value={sample.prompt}
          onChange={(e) => onChange({ prompt: e.target.value })}
          placeholder="a red fox in fresh snow"
          aria-label="Prompt"
          aria-describedby={promptNotes.length ? 'note-for-prompt' : undefined}
          data-testid="prompt"
        />
        <FieldNotes id="note-for-prompt" notes={promptNotes} onChange={onChange} />
      </label>
      {arch.uses_negative_prompt && (
        <label className="field">
          Negative prompt
          <textarea rows={2} value={sample.negative_prompt} onChange={(e) => onChange({ negative_prompt: e.target.value })} aria-label="Negative prompt" />
        </label>
      )}
      {Object.entries(arch.sample_extras).map(([key, def]) => (
        <ExtraField key={key} name={key} def={def} type={arch.sample_extra_types?.[key]} value={sample.extras[key]} onChange={(v) => onChange({ extras: { ...sample.extras, [key]: v } })} />
      ))}
      {arch.modality !== 'audio' && (
        <div className="row">
          <NumberField {...num} label="Width" field="width" value={sample.width} step={arch.size_divisor} min={arch.size_divisor} onChange={(v) => onChange({ width: v })} testId="width" />
          <NumberField {...num} label="Height" field="height" value={sample.height} step={arch.size_divisor} min={arch.size_divisor} onChange={(v) => onChange({ height: v })} testId="height" />
          <span className="muted small">multiples of {arch.size_divisor}</span>
        </div>
      )}
      <div className="row">
        <NumberField {...num} label="Steps" field="num_inference_steps" value={sample.num_inference_steps} min={1} onChange={(v) => onChange({ num_inference_steps: v })} testId="steps" />
        <NumberField {...num} label="Guidance" field="guidance_scale" value={sample.guidance_scale} min={0} step={0.1} onChange={(v) => onChange({ guidance_scale: v })} />
      </div>
      {(samplers.length > 0 || arch.batch) && (
        <div className="row wrap">
          {samplers.length > 0 && <SamplerSelect samplers={samplers} value={sample.sampler} onChange={(sampler) => onChange({ sampler })} />}
          {arch.batch && (
            <NumberField {...num} label={`Batch size (1-${maxBatch(arch)})`} field="batch_size" value={sample.batch_size} min={1} max={maxBatch(arch)} onChange={(v) => onChange({ batch_size: v })} testId="batch-size" />
          )}
        </div>
      )}
      <div className="row">
        <NumberField {...num} label="Seed (-1 = random)" field="seed" value={sample.seed} min={-1} onChange={(v) => onChange({ seed: v })} testId="seed" />
        <button type="button" onClick={() => onChange({ seed: randomSeed() })} title="Pick a random seed" aria-label="Pick a random seed">
          Random
        </button>
      </div>
      {arch.modality === 'video' && (
        <div className="row">
          <NumberField {...num} label="Frames" field="num_frames" value={sample.num_frames} min={1} onChange={(v) => onChange({ num_frames: v })} />
          <NumberField {...num} label="FPS" field="fps" value={sample.fps} min={1} onChange={(v) => onChange({ fps: v })} />
        </div>
      )}
      {arch.modality === 'audio' && (
        <div className="row">
          <NumberField {...num} label="Duration (s)" field="duration" value={sample.duration} step={0.5} min={0.5} onChange={(v) => onChange({ duration: v })} />
        </div>
      )}
      <label className="field">
        Output format
        <select value={sample.output_ext} onChange={(e) => onChange({ output_ext: e.target.value })} aria-label="Output format">
          {arch.output_exts.map((ext) => (
            <option key={ext} value={ext}>
              {ext}
            </option>
          ))}
        </select>
      </label>
    </section>
  );
}
