'use client';
// One axis of the grid: what it varies, its values (typed, checked as you type by the page) and,
// for LoRA strength, which of the base settings' LoRAs.
import { loraLabel } from '@/components/generate/loras';
import type { LoraPick, SamplerInfo } from '@/components/generate/types';
import { AXIS_HINTS, AXIS_KINDS, AXIS_LABELS, type AxisSpec } from './axes';

interface Props {
  name: 'X' | 'Y';
  spec: AxisSpec;
  loras: LoraPick[];
  samplers: SamplerInfo[];
  onChange: (spec: AxisSpec) => void;
}

export default function AxisPicker({ name, spec, loras, samplers, onChange }: Props) {
  const id = name.toLowerCase();
  return (
    <fieldset className="card axis-picker" data-testid={`axis-${id}`}>
      <legend>{name} axis</legend>
      <label className="field">
        {name} varies
        <select value={spec.kind} onChange={(e) => onChange({ ...spec, kind: e.target.value as AxisSpec['kind'] })} aria-label={`${name} axis`} data-testid={`axis-${id}-kind`}>
          {AXIS_KINDS.map((k) => (
            <option key={k} value={k}>
              {AXIS_LABELS[k]}
            </option>
          ))}
        </select>
      </label>
      {spec.kind !== 'none' && (
        <label className="field">
          {name} values
          <input
            value={spec.values}
            onChange={(e) => onChange({ ...spec, values: e.target.value })}
            placeholder={AXIS_HINTS[spec.kind]}
            aria-label={`${name} values`}
            data-testid={`axis-${id}-values`}
          />
          <span className="small">{AXIS_HINTS[spec.kind]}</span>
          {spec.kind === 'sampler' && samplers.length > 0 && <span className="small">This model's: {samplers.map((s) => s.name).join(', ')}</span>}
        </label>
      )}
      {spec.kind === 'lora_strength' && loras.length > 0 && (
        <label className="field">
          {name} LoRA
          <select value={spec.lora ?? ''} onChange={(e) => onChange({ ...spec, lora: e.target.value })} aria-label={`${name} LoRA`}>
            <option value="">the first ({loraLabel(loras[0])})</option>
            {loras.map((p) => (
              <option key={p.path} value={p.path}>
                {loraLabel(p)}
              </option>
            ))}
          </select>
        </label>
      )}
    </fieldset>
  );
}
