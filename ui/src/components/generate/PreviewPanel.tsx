'use client';
// The live latent canvas (the finished result in its place once the request ends), step i/N with elapsed
// time and ETA (then the decode stage after the last step), status lines, and the outcome in words.
// (Generate, Queue and Cancel: GenerateBar.tsx.)
import { useEffect, useState } from 'react';
import { formatSeconds } from '@/utils/format';
import LatentCanvas from './LatentCanvas';
import ResultMedia from './ResultMedia';
import { ACTIVE_PHASES, afterStepsText, etaSeconds, passText, type GenView } from './generationView';
import type { GalleryItem } from './types';
import { fileUrl } from './useGallery';
import { useMediaUrl } from './useMediaUrl';

interface Props {
  view: GenView;
  onDismiss: () => void;
  /** this request's results so far (every image of a batch), in batch order */
  results: GalleryItem[];
  /** open the result viewer on one */
  onView: (item: GalleryItem) => void;
}

/** One image of the batch: shows it large in the preview. */
function BatchResult({ item, shown, onShow }: { item: GalleryItem; shown: boolean; onShow: () => void }) {
  const { src } = useMediaUrl(fileUrl(item));
  const r = item.result;
  return (
    <figure className="batch-result" data-testid="batch-result" data-index={r.index ?? 0} data-seed={r.seed}>
      {src && r.kind === 'image' ? (
        <button className="media-button" onClick={onShow} aria-pressed={shown} aria-label={`Show result ${(r.index ?? 0) + 1} large`}>
          {/* eslint-disable-next-line @next/next/no-img-element */}
          <img src={src} alt={`result ${(r.index ?? 0) + 1}`} />
        </button>
      ) : (
        <div className="media-missing muted small">{r.kind}</div>
      )}
      <figcaption className="muted small">
        #{(r.index ?? 0) + 1} · seed {r.seed}
      </figcaption>
    </figure>
  );
}

/** The finished result in the latent preview's place, as large as fits; an image opens the viewer, video and audio play here. */
function FinalResult({ item, onView }: { item: GalleryItem; onView: () => void }) {
  const { src, error } = useMediaUrl(fileUrl(item));
  const media = <ResultMedia key={item.key} item={item} src={src} error={error} testId="final-media" />;
  return (
    <figure className="final-result" data-testid="final-result" data-key={item.key} data-kind={item.result.kind}>
      {item.result.kind === 'image' && src && !error ? (
        <button className="media-button" onClick={onView} aria-label="View large, with previous/next and compare" data-testid="final-view">
          {media}
        </button>
      ) : (
        media
      )}
      <figcaption className="row wrap small muted">
        <span>
          {item.result.width && item.result.height ? `${item.result.width}×${item.result.height} · ` : ''}seed {item.result.seed}
        </span>
        <button onClick={onView} data-testid="final-open-viewer">
          Open viewer
        </button>
      </figcaption>
    </figure>
  );
}

/** Step i/N, elapsed, ETA; after the last step the decode (and save) stage instead of an "ETA 0.0 s". */
function ProgressLine({ view, elapsed }: { view: GenView; elapsed: number | null }) {
  const after = afterStepsText(view);
  const eta = ACTIVE_PHASES.has(view.phase) && !after ? etaSeconds(view) : null;
  return (
    <div className="progress" data-testid="progress-text" data-phase={view.phase} data-stage={view.stage ?? ''} data-pass={view.pass ?? ''}>
      <progress max={view.total || 1} value={view.step} />
      <span>
        {passText(view.pass) && <b data-testid="progress-pass">{passText(view.pass)}: </b>}
        {view.total ? `Step ${view.step}/${view.total}` : view.phase === 'reattaching' ? 'Re-attaching…' : 'Starting…'}
        {elapsed !== null && ` · ${formatSeconds(elapsed)} elapsed`}
        {eta !== null && ` · ETA ${formatSeconds(eta)}`}
      </span>
      {after && (
        <b className="after-steps" data-testid="after-steps">
          {after}
        </b>
      )}
    </div>
  );
}

const MESSAGE_CLASS: Record<string, string> = { done: 'ok', cancelled: 'warn', error: 'error', lost: 'error' };

export default function PreviewPanel({ view, onDismiss, results, onView }: Props) {
  const active = ACTIVE_PHASES.has(view.phase);
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return;
    setNow(Date.now());
    const t = setInterval(() => setNow(Date.now()), 250);
    return () => clearInterval(t);
  }, [active]);

  const elapsed = view.startedAt ? Math.max(0, (view.finishedAt ?? now) - view.startedAt) / 1000 : null;
  // once the request ends, its result takes the latent's place (the batch strip picks which one)
  const [picked, setPicked] = useState<string | null>(null);
  const final = active ? undefined : (results.find((r) => r.key === picked) ?? results[0]);

  return (
    <section className="card preview" aria-label="Preview">
      {!active && view.phase !== 'idle' && (
        <div className="row">
          <button className="link" onClick={onDismiss}>
            clear
          </button>
        </div>
      )}
      {final && <FinalResult item={final} onView={() => onView(final)} />}
      {/* kept (hidden) under the result: its last latent stays readable */}
      <div hidden={!!final}>
        <LatentCanvas image={view.image} step={view.latentStep} modality={view.modality} phase={view.phase} />
      </div>
      {(active || view.total > 0) && <ProgressLine view={view} elapsed={elapsed} />}
      {results.length > 1 && (
        <div className="batch-strip" data-testid="batch-strip">
          {results.map((item) => (
            <BatchResult key={item.key} item={item} shown={item.key === final?.key} onShow={() => setPicked(item.key)} />
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
