'use client';
// The sample settings. Which fields show depends on the arch's ArchInfo from the engine.
import { useState } from 'react';
import { apiFetch, describeError } from '@/utils/api';
import { ctrlImageField, snapToDivisor } from './requestBody';
import type { ArchInfo, SampleForm } from './types';

interface Props {
  arch: ArchInfo;
  sample: SampleForm;
  jobId: string | null;
  onChange: (patch: Partial<SampleForm>) => void;
}

const randomSeed = () => Math.floor(Math.random() * 2 ** 31);

function NumberField(props: {
  label: string;
  value: number;
  step?: number;
  min?: number;
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
        onChange={(e) => props.onChange(e.target.value === '' ? NaN : Number(e.target.value))}
        onBlur={props.onBlur}
        aria-label={props.label}
        data-testid={props.testId}
      />
    </label>
  );
}

export default function PromptPanel({ arch, sample, jobId, onChange }: Props) {
  const [upload, setUpload] = useState<{ busy: boolean; error: string | null }>({ busy: false, error: null });
  const ctrlField = ctrlImageField(arch);
  const snap = (key: 'width' | 'height') => onChange({ [key]: snapToDivisor(sample[key], arch.size_divisor) });

  const uploadCtrl = async (file: File | undefined) => {
    if (!file) return;
    if (!jobId) {
      setUpload({ busy: false, error: 'Start the engine first: control images are uploaded to it.' });
      return;
    }
    setUpload({ busy: true, error: null });
    const safeName = file.name.replace(/[^A-Za-z0-9_.-]/g, '_').replace(/^[^A-Za-z0-9]+/, '').slice(0, 90) || 'control.png';
    try {
      const res = await apiFetch(`/api/inference/assets?name=${encodeURIComponent(safeName)}&job=${jobId}`, {
        method: 'POST',
        headers: { 'content-type': file.type || 'application/octet-stream' },
        body: file,
      });
      if (!res.ok) throw new Error((await describeError(res)).message);
      const stored = (await res.json()) as { name: string; path: string };
      onChange({ ctrl_img: stored.path, ctrl_img_name: file.name });
      setUpload({ busy: false, error: null });
    } catch (err) {
      setUpload({ busy: false, error: `Upload failed: ${(err as Error).message}` });
    }
  };

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
      {ctrlField && (
        <div className="field">
          {ctrlField === 'required' ? 'Control image (required)' : 'Reference image (optional: the prompt edits it)'}
          <input type="file" accept="image/*" disabled={upload.busy} onChange={(e) => uploadCtrl(e.target.files?.[0])} aria-label="Control image" />
          {sample.ctrl_img && (
            <span className="small">
              uploaded: {sample.ctrl_img_name}{' '}
              <button type="button" onClick={() => onChange({ ctrl_img: null, ctrl_img_name: null })}>
                remove
              </button>
            </span>
          )}
          {upload.busy && <span className="muted small">uploading…</span>}
          {upload.error && <div className="alert error">{upload.error}</div>}
        </div>
      )}
    </section>
  );
}
