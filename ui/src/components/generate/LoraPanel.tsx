'use client';
// LoRAs: files from the engine's lora_folder (GET /loras) for the chosen arch, several at once, each
// with a strength and its trigger words (one click appends them to the prompt); a path outside the
// folder can be typed (under the engine's model roots). The picks go into the request as `model.loras`.
// The LoRA folder and the model roots are set on the engine's settings page, linked from here.
import Link from 'next/link';
import { useEffect, useState } from 'react';
import { settingsHref } from '@/components/jobs/engineSettingsForm';
import LoraPickRow from './LoraPickRow';
import { addPick, fileOfPick, lorasForArch, resolvePicks } from './loras';
import { problemPlace, problemText, type ResolveProblem } from './resolveRequest';
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
  /** what the engine refuses in the request (POST /resolve): shown on the LoRA it names */
  problem?: ResolveProblem | null;
}

export default function LoraPanel({ jobId, running, arch, picks, prompt, onPicks, onPrompt, problem = null }: Props) {
  const place = problem ? problemPlace(problem) : null;
  const refused = problem && place && 'lora' in place ? { index: place.lora, text: problemText(problem) } : null;
  const { data, error, loading, refresh } = useLoras(jobId, arch, running);
  const files = data?.loras ?? [];
  const picked = new Set(picks.map((p) => fileOfPick(files, data?.folder ?? null, p.path)?.path ?? p.path));

  // picks restored from a file carry only a file name: point them at the folder's file of that name
  useEffect(() => {
    if (!data) return;
    const resolved = resolvePicks(picks, data.loras, data.folder);
    if (resolved !== picks) onPicks(resolved);
  }, [data, picks]); // eslint-disable-line react-hooks/exhaustive-deps

  const setScale = (i: number, scale: number) => onPicks(picks.map((p, k) => (k === i ? { ...p, scale } : p)));
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
          This engine has no LoRA folder (<code>engine.lora_folder</code>).{' '}
          {jobId && (
            <Link href={settingsHref(jobId, 'lora_folder')} data-testid="lora-folder-link">
              Set the LoRA folder
            </Link>
          )}{' '}
          to a folder of <code>.safetensors</code> LoRAs: they are listed here. A path under the engine&apos;s model roots can still be typed below.
        </div>
      )}
      {data?.folder && files.length === 0 && (
        <div className="muted small" data-testid="lora-empty">
          No LoRA files in <code>{data.folder}</code> yet: put <code>.safetensors</code> files there, then Refresh.
        </div>
      )}
      {files.length > 0 && <AddFromFolder files={files} arch={arch} picked={picked} onAdd={(path) => onPicks(addPick(picks, path))} />}
      {picks.map((p, i) => (
        <LoraPickRow
          key={p.path}
          pick={p}
          file={fileOfPick(files, data?.folder ?? null, p.path)}
          folder={data?.folder ?? null}
          arch={arch}
          prompt={prompt}
          onScale={(scale) => setScale(i, scale)}
          onRemove={() => onPicks(picks.filter((_, k) => k !== i))}
          onPrompt={onPrompt}
          refused={refused?.index === i ? refused.text : null}
          jobId={jobId}
        />
      ))}
      <AddPath onAdd={(path) => onPicks(addPick(picks, path))} />
    </section>
  );
}

/** The folder's files for this arch (then those of unknown arch) to add, the picked and unreadable ones disabled. */
function AddFromFolder({ files, arch, picked, onAdd }: { files: LoraFile[]; arch: string; picked: Set<string>; onAdd: (path: string) => void }) {
  const groups = lorasForArch(files, arch);
  const option = (f: LoraFile) => (
    <option key={f.path} value={f.path} disabled={picked.has(f.path) || !!f.error} title={f.error ?? f.path}>
      {f.name}
      {f.error ? ' (unreadable)' : ''}
    </option>
  );
  return (
    <label className="field">
      Add a LoRA
      <select value="" onChange={(e) => e.target.value && onAdd(e.target.value)} aria-label="Add a LoRA" data-testid="lora-select">
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
  );
}

/** A LoRA path typed (outside the folder, or one the listing does not show yet). */
function AddPath({ onAdd }: { onAdd: (path: string) => void }) {
  const [typed, setTyped] = useState('');
  const addTyped = () => {
    if (!typed.trim()) return;
    onAdd(typed);
    setTyped('');
  };
  return (
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
        placeholder="or a path under the engine's model roots or LoRA folder: /models/loras/x.safetensors"
        aria-label="LoRA path"
        data-testid="lora-path"
      />
      <button type="button" onClick={addTyped} disabled={!typed.trim()} data-testid="lora-path-add">
        Add
      </button>
    </div>
  );
}
