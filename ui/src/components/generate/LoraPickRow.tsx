'use client';
// One LoRA of the request: its file (or the typed path, and what the engine does with it), the arch
// it was made for when that is another, its strength (a slider and a number), and its trigger words
// (one click appends one to the prompt).
import Link from 'next/link';
import { useEffect, useState } from 'react';
import { settingsHref } from '@/components/jobs/engineSettingsForm';
import { formatBytes } from '@/utils/format';
import { SCALE_MAX, SCALE_MIN, SCALE_STEP, appendTrigger, hasTrigger, settingInRefusal } from './loras';
import type { LoraFile, LoraPick } from './types';

/** The strength as a number field: what is typed stays while it is not a number yet ("-", "0."). */
function ScaleInput({ value, label, onChange }: { value: number; label: string; onChange: (v: number) => void }) {
  const [draft, setDraft] = useState(String(value));
  useEffect(() => {
    setDraft((d) => (Number(d) === value && d.trim() !== '' ? d : String(value)));
  }, [value]);
  return (
    <input
      type="number"
      className="lora-scale-value"
      step={SCALE_STEP}
      value={draft}
      onChange={(e) => {
        setDraft(e.target.value);
        const v = Number(e.target.value);
        if (e.target.value.trim() !== '' && Number.isFinite(v)) onChange(v);
      }}
      onBlur={() => setDraft(String(value))}
      aria-label={label}
      data-testid="lora-scale"
    />
  );
}

const describeFile = (f: LoraFile) =>
  [f.format !== 'unknown' ? f.format : null, f.rank ? `rank ${f.rank}` : null, f.alpha ? `alpha ${f.alpha}` : null, formatBytes(f.bytes)]
    .filter(Boolean)
    .join(' · ');

/** What the engine does with a path the folder does not list: it reads only under its model roots. */
const pathNote = (path: string, folder: string | null) => {
  const absolute = /^([/~\\]|[A-Za-z]:)/.test(path);
  if (absolute) {
    return folder
      ? 'not in the LoRA folder: the engine reads it only under its model roots (engine.model_roots)'
      : 'a path: the engine reads it only under its model roots (engine.model_roots) or its LoRA folder';
  }
  return folder ? `not found in ${folder} (Refresh if it was just added)` : 'a relative path: the engine needs engine.lora_folder to find it';
};

interface Props {
  pick: LoraPick;
  /** the folder's file it names (null: a path the folder does not list) */
  file: LoraFile | null;
  folder: string | null;
  arch: string;
  prompt: string;
  onScale: (scale: number) => void;
  onRemove: () => void;
  onPrompt: (prompt: string) => void;
  /** the engine's refusal of this LoRA (POST /resolve) */
  refused?: string | null;
  /** the engine job (its settings page is where a refusal naming a setting is fixed) */
  jobId?: string | null;
}

/** A refusal naming an engine setting says which one to change, and links to it. */
function Refusal({ text, jobId }: { text: string; jobId: string | null }) {
  const setting = settingInRefusal(text);
  return (
    <div className="alert error small" data-testid="lora-problem">
      {text}
      {setting && jobId && (
        <>
          {' '}
          {setting === 'model_roots' ? 'Add its folder to the engine\'s model roots, or set a LoRA folder that holds it, in the ' : 'Set it in the '}
          <Link href={settingsHref(jobId, setting)} data-testid="lora-problem-settings">
            engine settings
          </Link>{' '}
          (<code>engine.{setting}</code>).
        </>
      )}
    </div>
  );
}

export default function LoraPickRow({ pick, file, folder, arch, prompt, onScale, onRemove, onPrompt, refused = null, jobId = null }: Props) {
  const name = file?.name ?? pick.path;
  const otherArch = file?.arch && file.arch.toLowerCase() !== arch.toLowerCase() ? file.arch : null;
  return (
    <div className="lora-pick" data-testid="lora-pick" data-path={pick.path}>
      <div className="row">
        <b className="grow lora-name" title={pick.path}>
          {name}
        </b>
        <button type="button" className="link" onClick={onRemove} title="Remove this LoRA" data-testid="lora-remove">
          remove
        </button>
      </div>
      <div className="muted small">
        {file ? describeFile(file) : pathNote(pick.path, folder)}
        {otherArch && <span className="warn-text"> · made for {otherArch}</span>}
        {file?.error && <span className="warn-text"> · {file.error}</span>}
      </div>
      {refused && <Refusal text={refused} jobId={jobId} />}
      <div className="row">
        <input
          type="range"
          className="grow"
          min={SCALE_MIN}
          max={SCALE_MAX}
          step={SCALE_STEP}
          value={Math.min(SCALE_MAX, Math.max(SCALE_MIN, pick.scale))}
          onChange={(e) => onScale(Math.round(Number(e.target.value) * 100) / 100)}
          aria-label={`Strength of ${name}`}
          data-testid="lora-scale-range"
        />
        <ScaleInput value={pick.scale} label={`Strength of ${name} (number)`} onChange={onScale} />
      </div>
      {file && file.trigger_words.length > 0 && (
        <div className="row wrap chips">
          {file.trigger_words.map((w) => {
            const present = hasTrigger(prompt, w);
            return (
              <button
                type="button"
                key={w}
                className="chip"
                disabled={present}
                onClick={() => onPrompt(appendTrigger(prompt, w))}
                title={present ? 'already in the prompt' : 'append to the prompt'}
                data-testid="lora-trigger"
              >
                {present ? '✓ ' : '+ '}
                {w}
              </button>
            );
          })}
        </div>
      )}
    </div>
  );
}
