'use client';
// The sample settings (the prompt itself sits next to Generate: GenerateBar.tsx). Which fields show, and each number's bounds, are the arch's `fields` from the
// engine (GET /models). A value the engine would refuse or change gets a note under its field
// (formChecks.ts, and the engine's POST /resolve answer); the field keeps what the person typed.
import { useEffect, useState } from 'react';
import { inputBounds, notesFor, type FieldNote } from './formChecks';
import NumberField, { FieldNotes } from './NumberField';
import type { ArchInfo, SampleForm, SamplerInfo } from './types';

interface Props {
  arch: ArchInfo;
  sample: SampleForm;
  notes: FieldNote[];
  onChange: (patch: Partial<SampleForm>) => void;
}

/** One of the arch's sample extras (GET /models: its default and type), as a number, checkbox or text. */
function ExtraField(props: { name: string; def: unknown; type?: string; value: unknown; notes: FieldNote[]; onChange: (v: unknown) => void; onFix: (patch: Partial<SampleForm>) => void }) {
  const { name, def, type: served, value, onChange } = props;
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
      <FieldNotes id={`note-for-${name}`} notes={props.notes} onChange={props.onFix} />
    </label>
  );
}

/** "DPM++ 2M Karras": A1111's name for a sampler with its schedule. */
const samplerLabel = (s: SamplerInfo) => (s.schedule && s.schedule !== 'automatic' ? `${s.label} ${s.schedule[0].toUpperCase()}${s.schedule.slice(1)}` : s.label);

/** A scheduler of the arch's `samplers`, or the model's own. */
function SamplerSelect({ samplers, value, notes, onChange }: { samplers: SamplerInfo[]; value: string; notes: FieldNote[]; onChange: (name: string) => void }) {
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
      <FieldNotes id="note-for-sampler" notes={notes} onChange={() => undefined /* the engine's words: no fix */} />
    </label>
  );
}

/** The flow shift (`sample.shift`): empty is the model's own (archs with a fixed shift: Wan, SD3, Z-Image, ...). */
function ShiftField({ value, onChange }: { value: number | null | undefined; onChange: (shift: number | null) => void }) {
  const [text, setText] = useState(value === null || value === undefined ? '' : String(value));
  useEffect(() => setText(value === null || value === undefined ? '' : String(value)), [value]);
  return (
    <label className="field" title="The flow shift of the sampling schedule; empty: the model's own (ComfyUI's ModelSampling shift)">
      Shift
      <input
        type="number"
        min={0}
        step={0.5}
        value={text}
        placeholder="model's own"
        aria-label="Shift"
        data-testid="shift"
        onChange={(e) => {
          setText(e.target.value);
          const v = e.target.value.trim() === '' ? null : Number(e.target.value);
          if (v === null || (Number.isFinite(v) && v > 0)) onChange(v);
        }}
      />
    </label>
  );
}

const randomSeed = () => Math.floor(Math.random() * 2 ** 31);

export default function PromptPanel({ arch, sample, notes, onChange }: Props) {
  const samplers = arch.samplers ?? [];
  const f = arch.fields;
  const num = { notes, onFix: onChange };
  const batch = f.batch_size ? inputBounds(f.batch_size) : null;

  return (
    <section className="card" aria-label="Settings">
      <h3>Settings</h3>
      {Object.entries(arch.sample_extras).map(([key, def]) => (
        <ExtraField
          key={key}
          name={key}
          def={def}
          type={arch.sample_extra_types?.[key]}
          value={sample.extras[key]}
          notes={notesFor(notes, key)}
          onChange={(v) => onChange({ extras: { ...sample.extras, [key]: v } })}
          onFix={onChange}
        />
      ))}
      {f.width && f.height && (
        <div className="row">
          <NumberField {...num} label="Width" field="width" value={sample.width} spec={f.width} onChange={(v) => onChange({ width: v })} testId="width" />
          <NumberField {...num} label="Height" field="height" value={sample.height} spec={f.height} onChange={(v) => onChange({ height: v })} testId="height" />
          {(f.width.multiple_of ?? 1) > 1 && <span className="muted small">multiples of {f.width.multiple_of}</span>}
        </div>
      )}
      <div className="row">
        <NumberField {...num} label="Steps" field="num_inference_steps" value={sample.num_inference_steps} spec={f.num_inference_steps} onChange={(v) => onChange({ num_inference_steps: v })} testId="steps" />
        <NumberField {...num} label="Guidance" field="guidance_scale" value={sample.guidance_scale} spec={f.guidance_scale} step={0.1} onChange={(v) => onChange({ guidance_scale: v })} />
      </div>
      {(samplers.length > 0 || arch.batch || f.shift) && (
        <div className="row wrap">
          {samplers.length > 0 && <SamplerSelect samplers={samplers} value={sample.sampler} notes={notesFor(notes, 'sampler')} onChange={(sampler) => onChange({ sampler })} />}
          {f.shift && <ShiftField value={sample.shift} onChange={(shift) => onChange({ shift })} />}
          {arch.batch && batch && (
            <NumberField {...num} label={`Batch size (${batch.min}-${batch.max})`} field="batch_size" value={sample.batch_size} spec={f.batch_size} onChange={(v) => onChange({ batch_size: v })} testId="batch-size" />
          )}
        </div>
      )}
      <div className="row">
        <NumberField {...num} label="Seed (-1 = random)" field="seed" value={sample.seed} spec={f.seed} onChange={(v) => onChange({ seed: v })} testId="seed" />
        <button type="button" onClick={() => onChange({ seed: randomSeed() })} title="Pick a random seed" aria-label="Pick a random seed">
          Random
        </button>
      </div>
      {f.num_frames && f.fps && (
        <div className="row">
          <NumberField {...num} label="Frames" field="num_frames" value={sample.num_frames} spec={f.num_frames} onChange={(v) => onChange({ num_frames: v })} />
          <NumberField {...num} label="FPS" field="fps" value={sample.fps} spec={f.fps} onChange={(v) => onChange({ fps: v })} />
        </div>
      )}
      {f.duration && (
        <div className="row">
          <NumberField {...num} label="Duration (s)" field="duration" value={sample.duration} spec={f.duration} step={0.5} onChange={(v) => onChange({ duration: v })} />
        </div>
      )}
      <label className="field">
        Output format
        <select value={sample.output_ext} onChange={(e) => onChange({ output_ext: e.target.value })} aria-label="Output format">
          {(f.output_ext?.choices ?? arch.output_exts).map((ext) => (
            <option key={String(ext)} value={String(ext)}>
              {String(ext)}
            </option>
          ))}
        </select>
        <FieldNotes id="note-for-output_ext" notes={notesFor(notes, 'output_ext')} onChange={onChange} />
      </label>
    </section>
  );
}
