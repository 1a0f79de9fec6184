'use client';
// /jobs/<id>/settings: an engine job's `engine:` block, edited in a form built from the engine's own
// description of it; saving writes the job's config and restarts a running engine (asking first
// when it holds requests). A new engine (no model folders yet) is offered its models folder first.
import Link from 'next/link';
import { useEffect } from 'react';
import { draftsWithPatch, hasModelFolders, type Block } from './engineSettingsForm';
import ModelsFolderOffer from './ModelsFolderOffer';
import SettingsField from './SettingsField';
import StatusBadge from './StatusBadge';
import { useEngineSettings, type EngineSettingsHandle, type SavePhase } from './useEngineSettings';

const PHASE_TEXT: Partial<Record<SavePhase, string>> = {
  saving: 'Checking and saving…',
  stopping: 'Saved. Stopping the engine…',
  starting: 'Saved. Starting the engine with the new settings…',
  restarted: 'Saved: the engine runs with the new settings.',
  saved: 'Saved: the engine reads these settings when it next starts.',
};

function RestartConfirm({ s }: { s: EngineSettingsHandle }) {
  return (
    <div className="alert warn" role="alertdialog" aria-label="Restart the engine?" data-testid="restart-confirm">
      The engine is busy with {s.held} {s.held === 1 ? 'request' : 'requests'}: restart anyway? A restart ends {s.held === 1 ? 'it' : 'them'}.
      <div className="row">
        <button type="button" className="danger" onClick={s.restart} data-testid="restart-anyway">
          Restart anyway
        </button>
        <button type="button" onClick={s.skipRestart} data-testid="restart-later">
          Keep it running (restart later)
        </button>
      </div>
    </div>
  );
}

function SaveBar({ s }: { s: EngineSettingsHandle }) {
  const working = s.phase === 'saving' || s.phase === 'stopping' || s.phase === 'starting';
  const running = s.job?.status === 'running' || s.job?.status === 'queued';
  return (
    <div className="row wrap settings-save">
      <button type="button" className="primary" onClick={s.save} disabled={working || s.phase === 'confirm'} data-testid="settings-save">
        {running ? 'Save and restart the engine' : 'Save'}
      </button>
      <span className="muted small" data-testid="settings-status" data-phase={s.phase} role="status">
        {PHASE_TEXT[s.phase] ?? ''}
      </span>
      {s.job && (s.phase === 'restarted' || s.phase === 'saved') && (
        <Link href={`/generate?job=${s.job.id}`} data-testid="settings-to-generate">
          Back to Generate
        </Link>
      )}
    </div>
  );
}

export default function EngineSettingsPage({ id }: { id: string }) {
  const s = useEngineSettings(id);
  // a link to one setting (#setting-lora_folder, from the LoRA panel): that field, once the form is built
  const built = !!s.desc;
  useEffect(() => {
    const el = built && window.location.hash ? document.getElementById(decodeURIComponent(window.location.hash.slice(1))) : null;
    if (el) {
      el.scrollIntoView({ block: 'center' });
      el.focus();
    }
  }, [built]);
  const fillFolders = async (patch: Block) => {
    Object.entries(draftsWithPatch(s.fields, s.drafts, patch)).forEach(([k, v]) => v !== s.drafts[k] && s.setDraft(k, v));
    return null;
  };
  return (
    <section className="engine-settings" data-testid="engine-settings" data-loaded={s.desc ? 'true' : 'false'}>
      <p>
        <Link href="/jobs">← Jobs</Link>
        {s.job && (
          <>
            {' · '}
            <Link href={`/generate?job=${s.job.id}`}>Generate</Link> · <Link href={`/jobs/${s.job.id}`}>log</Link>
          </>
        )}
      </p>
      <h1>
        Engine settings {s.job && <span className="muted small">{s.job.name}</span>} {s.job && <StatusBadge status={s.job.status} />}
      </h1>
      <p className="muted small">
        The <code>engine:</code> block of this job&apos;s InferenceEngine process. Leave a field empty for the engine&apos;s default.
      </p>
      {s.error && (
        <div className="alert error" role="alert" data-testid="settings-error">
          {s.error}
        </div>
      )}
      {!s.desc && !s.error && <p className="muted">Reading the engine&apos;s settings…</p>}
      {s.desc && !hasModelFolders(s.block) && (
        <div className="card">
          <ModelsFolderOffer onUse={fillFolders} block={s.block} action="Fill in below" />
        </div>
      )}
      {s.desc && (
        <form className="card settings-form" data-testid="settings-form" onSubmit={(e) => (e.preventDefault(), s.save())}>
          {s.fields.map((ff) => (
            <SettingsField key={ff.key} ff={ff} drafts={s.drafts} errors={s.errors} onDraft={s.setDraft} />
          ))}
          {s.phase === 'confirm' && <RestartConfirm s={s} />}
          <SaveBar s={s} />
        </form>
      )}
    </section>
  );
}
