'use client';
// The Control panels (ControlNet), where the arch's /models row lists control classes: each an image
// (uploaded as an asset, checked by its header), a control model of GET /library that this arch takes,
// a preprocessor of GET /preprocessors (those whose model is not here disabled, saying so), "Preview
// map" (POST /preprocess), strength and the start/end range, a union model's mode; "Add control" for
// several at once. They go out as `sample.controls` (controlHires.ts).
import { useState } from 'react';
import ImageDrop from './ImageDrop';
import { controlClassOf, controlModelValue, controlModelsFor, newControl, preprocessorUnavailable, type ControlEntry, type PreprocessorInfo } from './controlHires';
import { problemPlace, problemText } from './resolveRequest';
import { RESIZE_LABELS } from './tasks';
import type { ArchInfo, ControlForm } from './types';
import { previewMap } from './useControlLists';
import type { Resolved } from './useResolve';

interface Props {
  arch: ArchInfo;
  controls: ControlForm[];
  job: { id: string; name: string } | null;
  library: readonly { kind: string }[] | null;
  preprocessors: PreprocessorInfo[];
  onControls: (next: ControlForm[]) => void;
  problem: Resolved['problem'];
}

const SLIDERS = ['processor_res', 'threshold_a', 'threshold_b'] as const;

function OneControl(props: {
  index: number;
  arch: ArchInfo;
  c: ControlForm;
  job: Props['job'];
  models: ControlEntry[];
  preprocessors: PreprocessorInfo[];
  onChange: (patch: Partial<ControlForm>) => void;
  onRemove: () => void;
}) {
  const { index, arch, c, job, models, preprocessors, onChange } = props;
  const [map, setMap] = useState<{ image: string; width: number; height: number } | null>(null);
  const [mapState, setMapState] = useState<{ busy: boolean; error: string | null }>({ busy: false, error: null });
  const entry = models.find((m) => controlModelValue(m) === c.model);
  const cls = controlClassOf(arch, entry);
  const pre = preprocessors.find((p) => p.name === c.preprocessor);
  const change = (patch: Partial<ControlForm>) => {
    if ('image' in patch || 'preprocessor' in patch || SLIDERS.some((k) => k in patch)) setMap(null); // the map shown is another's
    onChange(patch);
  };
  const preview = async () => {
    if (!job || !c.image) return;
    setMapState({ busy: true, error: null });
    try {
      setMap(await previewMap(job.id, c));
      setMapState({ busy: false, error: null });
    } catch (err) {
      setMapState({ busy: false, error: (err as Error).message });
    }
  };
  const t = `control-${index}`;
  return (
    <fieldset className="control-unit" data-testid={t}>
      <legend>Control {index + 1}</legend>
      <ImageDrop label="Control image" testId={`${t}-drop`} assetId={c.image} job={job} onChange={(id) => change({ image: id })} />
      <label className="field">
        Control model
        <select value={c.model} onChange={(e) => change({ model: e.target.value, mode: '' })} aria-label={`Control ${index + 1} model`} data-testid={`${t}-model`}>
          <option value="">{models.length ? 'Pick a control model' : `No control model for ${arch.name} in the model folders`}</option>
          {c.model && !entry && <option value={c.model}>{c.model}</option>}
          {models.map((m) => (
            <option key={m.name} value={controlModelValue(m)}>
              {m.name}
              {m.label ? ` (${m.label})` : ''}
            </option>
          ))}
        </select>
      </label>
      {cls && cls.modes.length > 0 && (
        <label className="field">
          Union mode
          <select value={c.mode} onChange={(e) => change({ mode: e.target.value })} aria-label={`Control ${index + 1} union mode`} data-testid={`${t}-mode`}>
            <option value="">Pick the control type</option>
            {cls.modes.map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
        </label>
      )}
      <label className="field">
        Preprocessor
        <select
          value={c.preprocessor}
          onChange={(e) => change({ preprocessor: e.target.value, processor_res: null, threshold_a: null, threshold_b: null })}
          aria-label={`Control ${index + 1} preprocessor`}
          data-testid={`${t}-preprocessor`}
        >
          {!preprocessors.some((p) => p.name === 'none') && <option value="none">none (the image is the map)</option>}
          {preprocessors.map((p) => {
            const why = preprocessorUnavailable(p);
            return (
              <option key={p.name} value={p.name} disabled={!!why} title={why ?? p.description}>
                {p.name === 'none' ? 'none (the image is the map)' : p.name}
                {why ? ` (${why})` : ''}
              </option>
            );
          })}
        </select>
      </label>
      {pre &&
        SLIDERS.map((k) => {
          const spec = pre.params?.[k];
          if (!spec) return null;
          return (
            <label className="field" key={k}>
              {spec.label || k}
              <input
                type="number"
                min={spec.min}
                max={spec.max}
                step={spec.step || 'any'}
                value={c[k] ?? spec.default}
                onChange={(e) => change({ [k]: e.target.value === '' ? null : Number(e.target.value) })}
                aria-label={`Control ${index + 1} ${spec.label || k}`}
                data-testid={`${t}-${k}`}
              />
            </label>
          );
        })}
      <div className="row wrap">
        <button type="button" onClick={() => void preview()} disabled={!c.image || !job || mapState.busy} data-testid={`${t}-preview`}>
          {mapState.busy ? 'Making the map…' : 'Preview map'}
        </button>
        <button type="button" onClick={props.onRemove} data-testid={`${t}-remove`}>
          Remove
        </button>
      </div>
      {map && (
        // eslint-disable-next-line @next/next/no-img-element
        <img className="thumb control-map" src={map.image} alt={`Control ${index + 1} map (${map.width}×${map.height})`} data-testid={`${t}-map`} data-width={map.width} data-height={map.height} />
      )}
      {mapState.error && (
        <div className="alert error small" role="alert" data-testid={`${t}-map-error`}>
          {mapState.error}
        </div>
      )}
      <div className="row wrap">
        <label className="field">
          Strength {c.scale}
          <input type="range" min={0} max={2} step={0.05} value={c.scale} onChange={(e) => change({ scale: Number(e.target.value) })} aria-label={`Control ${index + 1} strength`} />
          <input type="number" min={0} max={10} step={0.05} value={c.scale} onChange={(e) => change({ scale: Number(e.target.value) })} aria-label={`Control ${index + 1} strength value`} data-testid={`${t}-scale`} />
        </label>
        <label className="field">
          Start
          <input type="number" min={0} max={1} step={0.05} value={c.start} onChange={(e) => change({ start: Number(e.target.value) })} aria-label={`Control ${index + 1} start`} data-testid={`${t}-start`} />
        </label>
        <label className="field">
          End
          <input type="number" min={0} max={1} step={0.05} value={c.end} onChange={(e) => change({ end: Number(e.target.value) })} aria-label={`Control ${index + 1} end`} data-testid={`${t}-end`} />
        </label>
        <label className="field">
          Resize mode
          <select value={c.resize_mode} onChange={(e) => change({ resize_mode: e.target.value })} aria-label={`Control ${index + 1} resize mode`}>
            {Object.entries(RESIZE_LABELS).map(([k, v]) => (
              <option key={k} value={k}>
                {v}
              </option>
            ))}
          </select>
        </label>
      </div>
      {c.start >= c.end && <div className="field-note error small">The end must come after the start.</div>}
    </fieldset>
  );
}

export default function ControlPanel({ arch, controls, job, library, preprocessors, onControls, problem }: Props) {
  const models = controlModelsFor(library, arch);
  const mine = problem && (() => {
    const place = problemPlace(problem);
    return 'sample' in place && place.sample === 'controls' ? problemText(problem) : null;
  })();
  const set = (i: number, patch: Partial<ControlForm>) => onControls(controls.map((c, j) => (j === i ? { ...c, ...patch } : c)));
  return (
    <section className="card" aria-label="Control" data-testid="control-panel">
      <h3>Control (ControlNet)</h3>
      {controls.map((c, i) => (
        <OneControl
          key={i}
          index={i}
          arch={arch}
          c={c}
          job={job}
          models={models}
          preprocessors={preprocessors}
          onChange={(p) => set(i, p)}
          onRemove={() => onControls(controls.filter((_, j) => j !== i))}
        />
      ))}
      <button type="button" onClick={() => onControls([...controls, newControl(models.length === 1 ? controlModelValue(models[0]) : '')])} data-testid="control-add">
        Add control
      </button>
      {mine && (
        <div className="alert error small" role="alert" data-testid="control-problem">
          {mine}
        </div>
      )}
    </section>
  );
}
