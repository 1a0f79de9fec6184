'use client';
// A number field of the sample form with its notes under it (formChecks.ts), each with its one-click
// fix ("Use 1008"); the field keeps what the person typed.
import { inputBounds, notesFor, type CheckedField, type FieldNote } from './formChecks';
import type { FieldSpec, SampleForm } from './types';

/** The notes of one field, each with its fix button; `id` is what the field's aria-describedby names. */
export function FieldNotes({ id, notes, onChange }: { id: string; notes: FieldNote[]; onChange: (patch: Partial<SampleForm>) => void }) {
  if (!notes.length) return null;
  return (
    <span id={id} className="field-notes">
      {notes.map((n) => (
        <span key={n.message} className={`field-note ${n.blocking || n.engine ? 'error' : 'warn'}`} data-testid={`note-${n.field}`}>
          {n.message}
          {n.fix && (
            <button type="button" className="link" onClick={() => onChange(n.fix!.patch)} data-testid={`fix-${n.field}`}>
              {n.fix.label}
            </button>
          )}
        </span>
      ))}
    </span>
  );
}

export default function NumberField(props: {
  label: string;
  field: CheckedField;
  value: number;
  notes: FieldNote[];
  /** the field as the engine serves it (GET /models `fields`): the input's min, max and step */
  spec?: FieldSpec;
  /** the spinner's step where the field has no multiple */
  step?: number;
  onChange: (v: number) => void;
  onFix: (patch: Partial<SampleForm>) => void;
  testId?: string;
}) {
  const mine = notesFor(props.notes, props.field);
  const bounds = props.spec ? inputBounds(props.spec, props.step) : { step: props.step };
  const noteId = `note-for-${props.field}`;
  return (
    <label className="field">
      {props.label}
      <input
        type="number"
        value={Number.isFinite(props.value) ? props.value : ''}
        step={bounds.step ?? 'any'}
        min={bounds.min}
        max={bounds.max}
        onChange={(e) => props.onChange(e.target.value === '' ? NaN : Number(e.target.value))}
        aria-label={props.label}
        aria-invalid={mine.some((n) => n.blocking) || undefined}
        aria-describedby={mine.length ? noteId : undefined}
        data-testid={props.testId}
      />
      <FieldNotes id={noteId} notes={mine} onChange={props.onFix} />
    </label>
  );
}
