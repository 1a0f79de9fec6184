'use client';
// The prompt next to Generate: the prompt (and the negative prompt where the arch takes one), Generate
// (Queue while one runs; "Start engine and generate" with the engine down), Cancel, the batch count and
// "keep generating". On a phone its actions stay in view at the bottom of the window (globals.css).
import { MAX_BATCH_COUNT } from './batchCount';
import { notesFor, type FieldNote } from './formChecks';
import { ACTIVE_PHASES, type GenView } from './generationView';
import { FieldNotes } from './NumberField';
import type { ArchInfo, SampleForm } from './types';
import type { useSubmit } from './useSubmit';

interface Props {
  /** null before any /models answer: the prompt alone, kept for the forms to come */
  arch: ArchInfo | null;
  sample: SampleForm | null;
  notes: FieldNote[];
  onChange: (patch: Partial<SampleForm>) => void;
  submit: ReturnType<typeof useSubmit>;
  view: GenView;
  onCancel: () => void;
}

function PromptBoxes({ arch, sample, notes, onChange }: Pick<Props, 'arch' | 'sample' | 'notes' | 'onChange'>) {
  const promptNotes = notesFor(notes, 'prompt');
  return (
    <div className="generate-bar-prompts">
      <label className="field">
        Prompt
        <textarea
          rows={3}
          value={sample?.prompt ?? ''}
          onChange={(e) => onChange({ prompt: e.target.value })}
          placeholder="a red fox in fresh snow"
          aria-label="Prompt"
          aria-describedby={promptNotes.length ? 'note-for-prompt' : undefined}
          data-testid="prompt"
        />
        <FieldNotes id="note-for-prompt" notes={promptNotes} onChange={onChange} />
      </label>
      {arch?.fields.negative_prompt && sample && (
        <label className="field">
          Negative prompt
          <textarea rows={1} value={sample.negative_prompt} onChange={(e) => onChange({ negative_prompt: e.target.value })} aria-label="Negative prompt" />
          <FieldNotes id="note-for-negative_prompt" notes={notesFor(notes, 'negative_prompt')} onChange={onChange} />
        </label>
      )}
    </div>
  );
}

function GenerateActions({ submit, view, onCancel }: Pick<Props, 'submit' | 'view' | 'onCancel'>) {
  const active = ACTIVE_PHASES.has(view.phase);
  const { canGenerate, label, whyNot, count, setCount } = submit;
  return (
    <div className="generate-actions" data-testid="generate-actions">
      <div className="row wrap">
        {/* while one runs, another is queued behind it */}
        <button className="primary" onClick={() => void submit.generate()} disabled={!canGenerate} data-testid="generate-button" title={active ? 'Queue another with these settings (Ctrl/Cmd+Enter)' : 'Ctrl/Cmd+Enter'}>
          {active && label === 'Generate' ? 'Queue' : label}
        </button>
        {active && (
          <button onClick={onCancel} disabled={view.cancelling} data-testid="cancel-button">
            {view.cancelling ? 'Cancelling…' : 'Cancel'}
          </button>
        )}
        <label className="inline-field" title="How many requests one Generate sends, each its own seed (seed, seed + batch size, … ; -1: random each)">
          Batch count{' '}
          <input
            type="number"
            min={1}
            max={MAX_BATCH_COUNT}
            step={1}
            value={Number.isFinite(count) ? count : ''}
            onChange={(e) => setCount(e.target.value === '' ? NaN : Number(e.target.value))}
            aria-label="Batch count"
            data-testid="batch-count"
          />
        </label>
      </div>
      <label className="small" data-testid="detach">
        <input type="checkbox" checked={submit.detach} onChange={(e) => submit.setDetach(e.target.checked)} /> keep generating when this page closes (re-attach on return)
      </label>
      {whyNot && (
        <div className="muted small" data-testid="why-not">
          {whyNot}
        </div>
      )}
    </div>
  );
}

export default function GenerateBar(props: Props) {
  return (
    <section className="card generate-bar" aria-label="Prompt and Generate" data-testid="generate-bar">
      <PromptBoxes arch={props.arch} sample={props.sample} notes={props.notes} onChange={props.onChange} />
      <GenerateActions submit={props.submit} view={props.view} onCancel={props.onCancel} />
    </section>
  );
}
