'use client';
// LoRAs: files from the engine's lora_folder (GET /loras) for the chosen arch, several at once, each
// with a strength and its trigger words (one click appends them to the prompt); a path outside the
// folder can be typed. The picks go into the request as `model.loras`.
import { useEffect, useState } from 'react';
import { formatBytes } from '@/utils/format';
import { SCALE_MAX, SCALE_MIN, SCALE_STEP, addPick, appendTrigger, fileOfPick, hasTrigger, lorasForArch, resolvePicks } from './loras';
import type { LoraFile, LoraPick } from './types';
import { useLoras } from './useLoras';

interface Props {
  jobId: string | null;
  /** the engine answers (the listing is read from it) */
  running: boolean;
  arch: string;
  picks: LoraPick[];
  prompt: string;
  onPicks: (picks: LoraPick[]) => void;
  onPrompt: (prompt: string) => void;
}

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

/** What the engine does with a path the folder does not list. */
const pathNote = (path: string, folder: string | null) => {
  const absolute = /^([/~\\]|[A-Za-z]:)/.test(path);
  if (absolute) return folder ? 'not in the LoRA folder: the engine reads this path' : 'a path the engine reads';
  return folder ? `not found in ${folder} (Refresh if it was just added)` : 'a relative path: the engine needs engine.lora_folder to find it';
};

export default function LoraPanel({ jobId, running, arch, picks, prompt, onPicks, onPrompt }: Props) {
  const { data, error, loading, refresh } = useLoras(jobId, arch, running);
  const [typed, setTyped] = useState('');
  const files = data?.loras ?? [];
  const groups = lorasForArch(files, arch);
  const picked = new Set(picks.map((p) => fileOfPick(files, data?.folder ?? null, p.path)?.path ?? p.path));

  // picks restored from a file carry only a file name: point them at the folder's file of that name
  useEffect(() => {
    if (!data) return;
    const resolved = resolvePicks(picks, data.loras, data.folder);
    if (resolved !== picks) onPicks(resolved);
  }, [data, picks]); // eslint-disable-line react-hooks/exhaustive-deps

  const setScale = (i: number, scale: number) => onPicks(picks.map((p, k) => (k === i ? { ...p, scale } : p)));
  const addTyped = () => {
    if (!typed.trim()) return;
    onPicks(addPick(picks, typed));
    setTyped('');
  };

  const option = (f: LoraFile) => (
    <option key={f.path} value={f.path} disabled={picked.has(f.path) || !!f.error} title={f.error ?? f.path}>
      {f.name}
      {f.error ? ' (unreadable)' : ''}
    </option>
  );

  return (
    <section className="card" aria-label="LoRAs" data-testid="lora-panel" data-loading={loading ? 'true' : 'false'} data-folder={data?.folder ?? ''}>
      <div className="row">
        <h3 className="grow">LoRAs</h3>
        <button type="button" onClick={refresh} disabled={!running || loading} title="Read the LoRA folder again" data-testid="lora-refresh">
          {loading ? 'Reading…' : 'Refresh'}
        </button>
      </div>
      {error && (
        <div className="alert error" data-testid="lora-error">
          Could not list the LoRA folder: {error}
        </div>
      )}
      {data && !data.folder && (
        <div className="muted small" data-testid="lora-empty">
          This engine has no LoRA folder. Set <code>engine.lora_folder</code> in its job config (the InferenceEngine process&apos;s{' '}
          <code>engine:</code> section) to a folder of <code>.safetensors</code> LoRAs and restart the engine; a path can still be typed below.
        </div>
      )}
      {data?.folder && files.length === 0 && (
        <div className="muted small" data-testid="lora-empty">
          No LoRA files in <code>{data.folder}</code> yet: put <code>.safetensors</code> files there, then Refresh.
        </div>
      )}
      {files.length > 0 && (
        <label className="field">
          Add a LoRA
          <select value="" onChange={(e) => e.target.value && onPicks(addPick(picks, e.target.value))} aria-label="Add a LoRA" data-testid="lora-select">
            <option value="">
              {groups.matching.length + groups.unknown.length ? `${groups.matching.length + groups.unknown.length} in the folder…` : `none for ${arch}`}
            </option>
            {groups.matching.length > 0 && <optgroup label={arch}>{groups.matching.map(option)}</optgroup>}
            {groups.unknown.length > 0 && <optgroup label="unknown arch">{groups.unknown.map(option)}</optgroup>}
          </select>
          {groups.other > 0 && (
            <span className="muted small" data-testid="lora-other">
              {groups.other} more {groups.other === 1 ? 'is' : 'are'} for other archs
            </span>
          )}
        </label>
      )}
      {picks.map((p, i) => {
        const f = fileOfPick(files, data?.folder ?? null, p.path);
        const name = f?.name ?? p.path;
        const otherArch = f?.arch && f.arch.toLowerCase() !== arch.toLowerCase() ? f.arch : null;
        return (
          <div className="lora-pick" key={p.path} data-testid="lora-pick" data-path={p.path}>
            <div className="row">
              <b className="grow lora-name" title={p.path}>
                {name}
              </b>
              <button type="button" className="link" onClick={() => onPicks(picks.filter((_, k) => k !== i))} title="Remove this LoRA" data-testid="lora-remove">
                remove
              </button>
            </div>
            <div className="muted small">
              {f ? describeFile(f) : pathNote(p.path, data?.folder ?? null)}
              {otherArch && <span className="warn-text"> · made for {otherArch}</span>}
              {f?.error && <span className="warn-text"> · {f.error}</span>}
            </div>
            <div className="row">
              <input
                type="range"
                className="grow"
                min={SCALE_MIN}
                max={SCALE_MAX}
                step={SCALE_STEP}
                value={Math.min(SCALE_MAX, Math.max(SCALE_MIN, p.scale))}
                onChange={(e) => setScale(i, Math.round(Number(e.target.value) * 100) / 100)}
                aria-label={`Strength of ${name}`}
                data-testid="lora-scale-range"
              />
              <ScaleInput value={p.scale} label={`Strength of ${name} (number)`} onChange={(v) => setScale(i, v)} />
            </div>
            {f && f.trigger_words.length > 0 && (
              <div className="row wrap chips">
                {f.trigger_words.map((w) => {
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
      })}
      <div className="row">
        <input
          className="grow"
          value={typed}
          onChange={(e) => setTyped(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter') {
              e.preventDefault();
              addTyped();
            }
          }}
          placeholder="or a path: /path/to/lora.safetensors"
          aria-label="LoRA path"
          data-testid="lora-path"
        />
        <button type="button" onClick={addTyped} disabled={!typed.trim()} data-testid="lora-path-add">
          Add
        </button>
      </div>
    </section>
  );
}
