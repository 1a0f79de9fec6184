'use client';
// The model: arch (from GET /models), name_or_path, quantization, low_vram, LoRA.
import type { ArchInfo, ModelForm } from './types';

const QTYPE_SUGGESTIONS = ['qfloat8', 'qint8', 'qint4'];

interface Props {
  archs: ArchInfo[];
  arch: ArchInfo | null;
  model: ModelForm;
  onArch: (name: string) => void;
  onChange: (patch: Partial<ModelForm>) => void;
}

export default function ModelPanel({ archs, arch, model, onArch, onChange }: Props) {
  return (
    <section className="card" aria-label="Model">
      <h3>Model</h3>
      <label className="field">
        Arch
        <select value={model.arch} onChange={(e) => onArch(e.target.value)} aria-label="Arch" data-testid="arch-select">
          {archs.map((a) => (
            <option key={a.name} value={a.name}>
              {a.name} ({a.modality})
            </option>
          ))}
        </select>
      </label>
      {arch?.description && <div className="muted small">{arch.description}</div>}
      <label className="field">
        name_or_path
        <input
          list="name-or-path-options"
          value={model.name_or_path}
          onChange={(e) => onChange({ name_or_path: e.target.value })}
          placeholder={arch?.default_name_or_path}
          aria-label="name_or_path"
          data-testid="name-or-path"
        />
        <datalist id="name-or-path-options">
          {arch && <option value={arch.default_name_or_path}>the arch&apos;s weights</option>}
          {arch && <option value={`tiny:${arch.name}`}>tiny random-weight test model</option>}
        </datalist>
      </label>
      <datalist id="qtype-options">
        {QTYPE_SUGGESTIONS.map((q) => (
          <option key={q} value={q} />
        ))}
      </datalist>
      <div className="row">
        <label>
          <input type="checkbox" checked={model.quantize} onChange={(e) => onChange({ quantize: e.target.checked })} /> quantize
        </label>
        <input
          className="narrow"
          list="qtype-options"
          value={model.qtype}
          disabled={!model.quantize}
          onChange={(e) => onChange({ qtype: e.target.value })}
          aria-label="qtype"
        />
      </div>
      <div className="row">
        <label>
          <input type="checkbox" checked={model.quantize_te} onChange={(e) => onChange({ quantize_te: e.target.checked })} /> quantize_te
        </label>
        <input
          className="narrow"
          list="qtype-options"
          value={model.qtype_te}
          disabled={!model.quantize_te}
          onChange={(e) => onChange({ qtype_te: e.target.value })}
          aria-label="qtype_te"
        />
      </div>
      <label>
        <input type="checkbox" checked={model.low_vram} onChange={(e) => onChange({ low_vram: e.target.checked })} /> low_vram
      </label>
      <div className="row">
        <label className="field grow">
          LoRA path
          <input value={model.lora_path} onChange={(e) => onChange({ lora_path: e.target.value })} placeholder="/path/to/lora.safetensors" />
        </label>
        <label className="field">
          scale
          <input
            className="narrow"
            type="number"
            step="0.05"
            value={model.lora_scale}
            disabled={!model.lora_path.trim()}
            onChange={(e) => onChange({ lora_scale: Number(e.target.value) })}
          />
        </label>
      </div>
    </section>
  );
}
