'use client';
// Quantization of the denoiser and the text encoder (qtype suggestions, any name the engine takes), low_vram, compile
// (model.compile: on, off, or unset for the engine's engine.compile) and the attention kernel (model.attention).
import type { ModelForm } from './types';

const QTYPE_SUGGESTIONS = ['qfloat8', 'qint8', 'qint4'];

type Props = { model: ModelForm; onChange: (patch: Partial<ModelForm>) => void };
type FieldsProps = Props & { attention?: string[] };

/** One quantize switch with its qtype (`quantize`/`qtype`, `quantize_te`/`qtype_te`). */
function QuantizeRow({ model, onChange, flag, qtype }: Props & { flag: 'quantize' | 'quantize_te'; qtype: 'qtype' | 'qtype_te' }) {
  return (
    <div className="row">
      <label>
        <input type="checkbox" checked={model[flag]} onChange={(e) => onChange({ [flag]: e.target.checked })} /> {flag}
      </label>
      <input className="narrow" list="qtype-options" value={model[qtype]} disabled={!model[flag]} onChange={(e) => onChange({ [qtype]: e.target.value })} aria-label={qtype} />
    </div>
  );
}

export default function QuantizeFields({ model, onChange, attention = [] }: FieldsProps) {
  return (
    <>
      <datalist id="qtype-options">
        {QTYPE_SUGGESTIONS.map((q) => (
          <option key={q} value={q} />
        ))}
      </datalist>
      <QuantizeRow model={model} onChange={onChange} flag="quantize" qtype="qtype" />
      <QuantizeRow model={model} onChange={onChange} flag="quantize_te" qtype="qtype_te" />
      <label>
        <input type="checkbox" checked={model.low_vram} onChange={(e) => onChange({ low_vram: e.target.checked })} /> low_vram
      </label>
      <label title="the denoiser compiled (torch.compile): the first request compiles, later ones run faster where compiling pays">
        compile{' '}
        <select
          aria-label="compile"
          value={model.compile === undefined ? '' : model.compile ? 'on' : 'off'}
          onChange={(e) => onChange({ compile: e.target.value === '' ? undefined : e.target.value === 'on' })}
        >
          <option value="">engine default</option>
          <option value="on">on</option>
          <option value="off">off</option>
        </select>
      </label>
      {attention.length > 1 && (
        <label title="the denoiser's attention kernel (diffusers' attention dispatcher): the ones this engine can run">
          attention{' '}
          <select aria-label="attention" value={model.attention ?? 'auto'} onChange={(e) => onChange({ attention: e.target.value === 'auto' ? undefined : e.target.value })}>
            {attention.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
      )}
    </>
  );
}
