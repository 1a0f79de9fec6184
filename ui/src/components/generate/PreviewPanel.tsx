'use client';
// Generate (Queue while one runs) / Cancel, the live latent canvas, step i/N with elapsed time and ETA, status lines,
// and the outcome in words.
import { useEffect, useState } from 'react';
import { formatSeconds } from '@/utils/format';
import LatentCanvas from './LatentCanvas';
import { ACTIVE_PHASES, etaSeconds, type GenView } from './generationView';
import type { GalleryItem } from './types';
import { fileUrl } from './useGallery';
import { useMediaUrl } from './useMediaUrl';

interface Props {
  view: GenView;
  canGenerate: boolean;
  whyNot: string | null;
  onGenerate: () => void;
  onCancel: () => void;
  onDismiss: () => void;
  /** keep generating when the page closes (the request's `detach`) */
  detach: boolean;
  onDetach: (on: boolean) => void;
  /** this request's results so far (every image of a batch), in batch order */
  results: GalleryItem[];
}

function BatchResult({ item }: { item: GalleryItem }) {
  const { src } = useMediaUrl(fileUrl(item));
  const r = item.result;
  return (
    <figure className="batch-result" data-testid="batch-result" data-index={r.index ?? 0} data-seed={r.seed}>
      {src && r.kind === 'image' ? (
        <a href={src} target="_blank" rel="noreferrer" title="Open the file">
          {/* eslint-disable-next-line @next/next/no-img-element */}
          <img src={src} alt={`result ${(r.index ?? 0) + 1}`} />
        </a>
      ) : (
        <div className="media-missing muted small">{r.kind}</div>
      )}
      <figcaption className="muted small">
        #{(r.index ?? 0) + 1} · seed {r.seed}
      </figcaption>
    </figure>
  );
}

const MESSAGE_CLASS: Record<string, string> = { done: 'ok', cancelled: 'warn', error: 'error', lost: 'error' };

export default function PreviewPanel({ view, canGenerate, whyNot, onGenerate, onCancel, onDismiss, detach, onDetach, results }: Props) {
  const active = ACTIVE_PHASES.has(view.phase);
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return;
    setNow(Date.now());
    const t = setInterval(() => setNow(Date.now()), 250);
    return () => clearInterval(t);
  }, [active]);

  const elapsed = view.startedAt ? Math.max(0, (view.finishedAt ?? now) - view.startedAt) / 1000 : null;
  const eta = active ? etaSeconds(view) : null;

  return (
    <section className="card preview" aria-label="Preview">
      <div className="row">
        {/* while one runs, another is queued behind it */}
        <button className="primary" onClick={onGenerate} disabled={!canGenerate} data-testid="generate-button" title={active ? 'Queue another with these settings (Ctrl/Cmd+Enter)' : 'Ctrl/Cmd+Enter'}>
          {active ? 'Queue' : 'Generate'}
        </button>
        {active && (
          <button onClick={onCancel} disabled={view.cancelling} data-testid="cancel-button">
            {view.cancelling ? 'Cancelling…' : 'Cancel'}
          </button>
        )}
        <span className="muted small">Ctrl/Cmd+Enter</span>
        {!active && view.phase !== 'idle' && (
          <button className="link" onClick={onDismiss}>
            clear
          </button>
        )}
      </div>
      <label className="small" data-testid="detach">
        <input type="checkbox" checked={detach} onChange={(e) => onDetach(e.target.checked)} /> keep generating when this page closes
        (re-attach on return)
      </label>
      {whyNot && !active && (
        <div className="muted small" data-testid="why-not">
          {whyNot}
        </div>
      )}
      <LatentCanvas image={view.image} step={view.latentStep} modality={view.modality} phase={view.phase} />
      {(active || view.total > 0) && (
        <div className="progress" data-testid="progress-text" data-phase={view.phase}>
          <progress max={view.total || 1} value={view.step} />
          <span>
            {view.total ? `Step ${view.step}/${view.total}` : view.phase === 'reattaching' ? 'Re-attaching…' : 'Starting…'}
            {elapsed !== null && ` · ${formatSeconds(elapsed)} elapsed`}
            {eta !== null && ` · ETA ${formatSeconds(eta)}`}
          </span>
        </div>
      )}
      {results.length > 1 && (
        <div className="batch-strip" data-testid="batch-strip">
          {results.map((item) => (
            <BatchResult key={item.key} item={item} />
          ))}
        </div>
      )}
      {view.previewNote && <div className="muted small">{view.previewNote}</div>}
      {view.message && (
        <div className={`alert ${MESSAGE_CLASS[view.phase] ?? 'info'}`} role="status" data-testid="gen-message">
          {view.message}
        </div>
      )}
      {view.statusLines.length > 0 && (
        <ul className="status-lines small" data-testid="status-lines">
          {view.statusLines.map((line, i) => (
            <li key={i}>{line}</li>
          ))}
        </ul>
      )}
    </section>
  );
}
