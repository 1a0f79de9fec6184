'use client';
// The /library page's Download box (a hub repo id into the hub cache, or a URL into a model folder and
// the sub-folder of its kind) and one progress row per download: bytes done, total and left, Cancel,
// Resume, Dismiss.
import { useState } from 'react';
import { formatBytes } from './library';
import { downloadBody, isUrl, progressFraction, progressText, type DownloadRow, type DownloadsResponse } from './downloads';

interface Actions {
  start: (body: Record<string, string>) => Promise<boolean>;
  cancel: (id: string) => Promise<boolean>;
  resume: (id: string) => Promise<boolean>;
}

export default function DownloadsPanel({ state, error, actions }: { state: DownloadsResponse | null; error: string | null; actions: Actions }) {
  return (
    <section className="card" aria-label="Downloads" data-testid="downloads">
      <h2>Download a model</h2>
      <DownloadBox folders={state?.model_folders ?? []} kinds={state?.kinds ?? []} start={actions.start} />
      {error && (
        <div className="alert" data-testid="download-error">
          {error}
        </div>
      )}
      {(state?.downloads ?? []).map((d) => (
        <DownloadProgress key={d.id} d={d} actions={actions} />
      ))}
    </section>
  );
}

function DownloadBox({ folders, kinds, start }: { folders: string[]; kinds: string[]; start: Actions['start'] }) {
  const [source, setSource] = useState('');
  const [folder, setFolder] = useState('');
  const [kind, setKind] = useState('');
  const [revision, setRevision] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const url = isUrl(source);

  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    const r = downloadBody({ source, folder: folder || folders[0] || '', kind, revision });
    if ('error' in r) return setProblem(r.error);
    setProblem(null);
    if (await start(r.body)) setSource('');
  };
  return (
    <form className="row" onSubmit={submit} data-testid="download-form">
      <input className="grow" placeholder="Hub repo id (owner/name) or a file's URL" value={source} onChange={(e) => setSource(e.target.value)} data-testid="download-source" aria-label="Repo id or URL" />
      {url ? (
        <>
          <select value={folder || folders[0] || ''} onChange={(e) => setFolder(e.target.value)} data-testid="download-folder" aria-label="Model folder">
            {folders.length === 0 && <option value="">no model folder set (engine.model_folders)</option>}
            {folders.map((f) => (
              <option key={f} value={f}>
                {f}
              </option>
            ))}
          </select>
          <select value={kind} onChange={(e) => setKind(e.target.value)} data-testid="download-kind" aria-label="What it is">
            <option value="">checkpoint (default)</option>
            {kinds.filter((k) => k !== 'checkpoint').map((k) => (
              <option key={k} value={k}>
                {k.replace('_', ' ')}
              </option>
            ))}
          </select>
        </>
      ) : (
        <input placeholder="revision (main)" value={revision} onChange={(e) => setRevision(e.target.value)} data-testid="download-revision" aria-label="Revision" size={12} />
      )}
      <span className="muted small">{url ? 'into the model folder' : 'into the hub cache'}</span>
      <button type="submit" data-testid="download-start">
        Download
      </button>
      {problem && (
        <span className="warn-text small" data-testid="download-problem">
          {problem}
        </span>
      )}
    </form>
  );
}

function DownloadProgress({ d, actions }: { d: DownloadRow; actions: Actions }) {
  const frac = progressFraction(d);
  return (
    <div className="row small" data-testid="download-row" data-status={d.status} data-source={d.source} data-left={d.bytes_left ?? ''}>
      <span className="grow" title={d.path ?? d.dest}>
        {d.source}
        {d.revision ? `@${d.revision}` : ''}
      </span>
      <progress max={1} value={frac ?? undefined} aria-label={`${d.source} progress`} />
      <span data-testid="download-progress">{progressText(d)}</span>
      {d.status === 'running' && (
        <button onClick={() => actions.cancel(d.id)} data-testid="download-cancel">
          Cancel
        </button>
      )}
      {(d.status === 'cancelled' || d.status === 'failed') && (
        <button onClick={() => actions.resume(d.id)} data-testid="download-resume">
          Resume
        </button>
      )}
      {d.status !== 'running' && (
        <button onClick={() => actions.cancel(d.id)} data-testid="download-dismiss" title={`leaves the list; ${formatBytes(d.bytes_done)} on disk stay`}>
          Dismiss
        </button>
      )}
    </div>
  );
}
