'use client';
// One engine setting as the description says it: its control, its key, doc and default, and the
// refusal (the form's check, or the engine's) under it. A nested settings class is a fieldset.
import { defaultText, type Drafts, type FieldErrors, type FormField } from './engineSettingsForm';

interface Props {
  ff: FormField;
  drafts: Drafts;
  errors: FieldErrors;
  onDraft: (key: string, value: string) => void;
}

function Control({ ff, value, invalid, describedBy, onDraft }: { ff: FormField; value: string; invalid: boolean; describedBy: string; onDraft: (v: string) => void }) {
  const f = ff.field;
  const common = { id: `setting-${ff.key}`, 'data-testid': `setting-${ff.key}`, 'aria-invalid': invalid, 'aria-describedby': describedBy };
  const fallback = `default (${defaultText(f)})`;
  if (ff.control === 'toggle' || ff.control === 'select') {
    const options = ff.control === 'toggle' ? [['true', 'on'], ['false', 'off']] : (f.choices ?? []).map((c) => [String(c), String(c)]);
    return (
      <select {...common} value={value} onChange={(e) => onDraft(e.target.value)}>
        <option value="">{fallback}</option>
        {options.map(([v, label]) => (
          <option key={v} value={v}>
            {label}
          </option>
        ))}
      </select>
    );
  }
  if (ff.control === 'lines' || ff.control === 'json') {
    const placeholder = ff.control === 'lines' ? 'one folder per line' : 'a profile name, or a model as JSON';
    return <textarea {...common} rows={ff.control === 'lines' ? 3 : 2} value={value} placeholder={placeholder} onChange={(e) => onDraft(e.target.value)} />;
  }
  if (ff.control === 'number') {
    const step = f.type === 'int' ? 1 : 'any';
    return <input {...common} type="number" min={f.min} max={f.max} step={step} value={value} placeholder={defaultText(f)} onChange={(e) => onDraft(e.target.value)} />;
  }
  return <input {...common} type="text" value={value} placeholder={defaultText(f)} onChange={(e) => onDraft(e.target.value)} />;
}

export default function SettingsField({ ff, drafts, errors, onDraft }: Props) {
  if (ff.control === 'group') {
    return (
      <fieldset className="settings-group" data-testid={`setting-group-${ff.key}`}>
        <legend>
          {ff.label} <code className="muted small">engine.{ff.key}</code>
        </legend>
        {ff.field.doc && <div className="muted small">{ff.field.doc}</div>}
        {ff.children.map((c) => (
          <SettingsField key={c.key} ff={c} drafts={drafts} errors={errors} onDraft={onDraft} />
        ))}
      </fieldset>
    );
  }
  const error = errors[ff.key];
  const noteId = `setting-note-${ff.key}`;
  return (
    <div className="field setting" data-key={ff.key}>
      <label htmlFor={`setting-${ff.key}`}>
        <span className="setting-label">{ff.label}</span> <code className="small">engine.{ff.key}</code>
      </label>
      <Control ff={ff} value={drafts[ff.key] ?? ''} invalid={!!error} describedBy={noteId} onDraft={(v) => onDraft(ff.key, v)} />
      <span id={noteId} className="small">
        {ff.field.doc && <span className="muted">{ff.field.doc}. </span>}
        <span className="muted">Default: {defaultText(ff.field)}.</span>
        {error && (
          <span className="field-note error" role="alert" data-testid={`setting-error-${ff.key}`}>
            {' '}
            engine.{ff.key}: {error}
          </span>
        )}
      </span>
    </div>
  );
}
