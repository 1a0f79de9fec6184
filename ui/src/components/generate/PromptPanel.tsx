'use client';
// The sample settings. Which fields show depends on the arch's ArchInfo from the engine.
import { snapToDivisor } from './requestBody';
import { MAX_BATCH } from './tasks';
import type { ArchInfo, SampleForm, SamplerInfo } from './types';

interface Props {
  arch: ArchInfo;
  sample: SampleForm;
  onChange: (patch: Partial<SampleForm>) => void;
}

/** "DPM++ 2M Karras": A1111's name for a sampler with its schedule. */
const samplerLabel = (s: SamplerInfo) => (s.schedule && s.schedule !== 'automatic' ? `${s.label} ${s.schedule[0].toUpperCase()}${s.schedule.slice(1)}` : s.label);

const randomSeed = () => Math.floor(Math.random() * 2 ** 31);

function NumberField(props: {
  label: string;
  value: number;
  step?: number;
  min?: number;
  max?: number;
  onChange: (v: number) => void;
  onBlur?: () => void;
  testId?: string;
}) {
  return (
    <label className="field">
      {props.label}
      <input
        type="number"
        value={Number.isFinite(props.value) ? props.value : ''}
        step={props.step ?? 1}
        min={props.min}
        max={props.max}
        onChange={(e) => props.onChange(e.target.value === '' ? NaN : Number(e.target.value))}
        onBlur={props.onBlur}
        aria-label={props.label}
        data-testid={props.testId}
      />
    </label>
  );
}

export default function PromptPanel({ arch, sample, onChange }: Props) {
  const snap = (key: 'width' | 'height') => onChange({ [key]: snapToDivisor(sample[key], arch.size_divisor) });
  const samplers = arch.samplers ?? [];
  const clampBatch = () => onChange({ batch_size: Math.min(MAX_BATCH, Math.max(1, Math.round(Number(sample.batch_size) || 1))) });

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
          data-testid="prompt"
        />
      </label>
      {arch.uses_negative_prompt && (
        <label className="field">
          Negative prompt
          <textarea rows={2} value={sample.negative_prompt} onChange={(e) => onChange({ negative_prompt: e.target.value })} aria-label="Negative prompt" />
        </label>
      )}
      {Object.entries(arch.sample_extras).map(([key, def]) => {
        const type = arch.sample_extra_types?.[key] ?? (typeof def === 'number' ? 'float' : typeof def === 'boolean' ? 'bool' : 'str');
        const value = sample.extras[key];
        const set = (v: unknown) => onChange({ extras: { ...sample.extras, [key]: v } });
        return (
          <label className="field" key={key}>
            {key}
            {type === 'float' || type === 'int' ? (
              <input
                type="number"
                step={type === 'int' ? 1 : 'any'}
                value={value === null || value === undefined || Number.isNaN(value) ? '' : Number(value)}
                placeholder={def === null ? 'automatic' : undefined}
                onChange={(e) => set(e.target.value === '' ? null : Number(e.target.value))}
                aria-label={key}
              />
            ) : type === 'bool' ? (
              <input type="checkbox" checked={Boolean(value)} onChange={(e) => set(e.target.checked)} aria-label={key} />
            ) : (
              <textarea rows={2} value={String(value ?? '')} onChange={(e) => set(e.target.value)} aria-label={key} />
            )}
          </label>
        );
      })}
      {arch.modality !== 'audio' && (
        <div className="row">
          <NumberField label="Width" value={sample.width} step={arch.size_divisor} min={arch.size_divisor} onChange={(v) => onChange({ width: v })} onBlur={() => snap('width')} testId="width" />
          <NumberField label="Height" value={sample.height} step={arch.size_divisor} min={arch.size_divisor} onChange={(v) => onChange({ height: v })} onBlur={() => snap('height')} testId="height" />
          <span className="muted small">multiples of {arch.size_divisor}</span>
        </div>
      )}
      <div className="row">
        <NumberField label="Steps" value={sample.num_inference_steps} min={1} onChange={(v) => onChange({ num_inference_steps: v })} testId="steps" />
        <NumberField label="Guidance" value={sample.guidance_scale} step={0.1} onChange={(v) => onChange({ guidance_scale: v })} />
      </div>
      {(samplers.length > 0 || arch.batch) && (
        <div className="row wrap">
          {samplers.length > 0 && (
            <label className="field">
              Sampler
              <select value={samplers.some((x) => x.name === sample.sampler) ? sample.sampler : ''} onChange={(e) => onChange({ sampler: e.target.value })} aria-label="Sampler" data-testid="sampler-select">
                <option value="">Default (the model&apos;s own)</option>
                {samplers.map((x) => (
                  <option key={x.name} value={x.name} title={x.scheduler}>
                    {samplerLabel(x)}
                  </option>
                ))}
              </select>
            </label>
          )}
          {arch.batch && (
            <NumberField label={`Batch size (1-${MAX_BATCH})`} value={sample.batch_size} min={1} max={MAX_BATCH} onChange={(v) => onChange({ batch_size: v })} onBlur={clampBatch} testId="batch-size" />
          )}
        </div>
      )}
      <div className="row">
        <NumberField label="Seed (-1 = random)" value={sample.seed} min={-1} onChange={(v) => onChange({ seed: v })} testId="seed" />
        <button type="button" onClick={() => onChange({ seed: randomSeed() })} title="Pick a random seed">
          Random
        </button>
      </div>
      {arch.modality === 'video' && (
        <div className="row">
          <NumberField label="Frames" value={sample.num_frames} min={1} onChange={(v) => onChange({ num_frames: v })} />
          <NumberField label="FPS" value={sample.fps} min={1} onChange={(v) => onChange({ fps: v })} />
        </div>
      )}
      {arch.modality === 'audio' && (
        <div className="row">
          <NumberField label="Duration (s)" value={sample.duration} step={0.5} min={0.5} onChange={(v) => onChange({ duration: v })} />
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
