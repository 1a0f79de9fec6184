'use client';
// The result viewer: one result at the largest size that fits the window, in a modal <dialog>
// (Escape closes it, the focus stays inside and goes back where it was), previous/next over the
// list viewerList.ts builds (arrow keys too), two results side by side, and the send-to actions
// (the gallery's own: useInputImages.ts's useAsInput, useSettingsRestore.ts's reuse).
import { useEffect, useRef, useState } from 'react';
import type { UpscaleAction } from './controlHires';
import ResultMedia from './ResultMedia';
import UpscaleChooser from './UpscaleChooser';
import { sourceLabel } from '@/utils/historySource';
import type { GalleryItem } from './types';
import { fileUrl } from './useGallery';
import { useMediaUrl } from './useMediaUrl';
import { positionText, stepIndex } from './viewerList';

/** Where a result can be sent: the form's input image, for this task. */
export type SendTask = 'img2img' | 'inpaint';

export interface ViewerActions {
  /** set where the arch takes an input image; why not, or null */
  onSendTo?: (item: GalleryItem, task: SendTask) => Promise<string | null>;
  /** the arch paints a mask (inpaint) */
  canInpaint: boolean;
  /** an image's Upscale (task upscale), while the engine runs */
  upscale?: UpscaleAction;
}

interface Props extends ViewerActions {
  onReuse: (item: GalleryItem) => void;
  items: GalleryItem[];
  index: number;
  onIndex: (index: number) => void;
  onClose: () => void;
}

const FOCUSABLE = 'button:not([disabled]), a[href], video, audio, select, input, [tabindex]:not([tabindex="-1"])';

function Pane({ item, label }: { item: GalleryItem; label: string }) {
  const { src, error } = useMediaUrl(fileUrl(item));
  const r = item.result;
  return (
    <figure className="viewer-pane" data-testid="viewer-pane" data-key={item.key} aria-label={label}>
      <ResultMedia key={item.key} item={item} src={src} error={error} testId="viewer-media" />
      <figcaption className="muted small">
        <span className="prompt">{String(item.sample.prompt ?? '') || 'no prompt'}</span>
        {' · '}
        {r.width && r.height ? `${r.width}×${r.height} · ` : ''}seed {r.seed}
        {item.source && item.source !== 'ui' && (
          <span data-testid="viewer-source">
            {' · via '}
            {sourceLabel(item.source)}
            {item.client ? ` (${item.client})` : ''}
          </span>
        )}
      </figcaption>
    </figure>
  );
}

export default function ResultViewer({ items, index, onIndex, onClose, onReuse, onSendTo, canInpaint, upscale }: Props) {
  const dialog = useRef<HTMLDialogElement>(null);
  const prevButton = useRef<HTMLButtonElement>(null);
  const nextButton = useRef<HTMLButtonElement>(null);
  const [pinned, setPinned] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [upscaling, setUpscaling] = useState(false);
  const item = items[index];
  const compared = pinned ? items.find((i) => i.key === pinned) : undefined;
  const prev = stepIndex(index, -1, items.length);
  const next = stepIndex(index, 1, items.length);

  // modal while shown; the focus goes back to what had it (the button that opened the viewer)
  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    const d = dialog.current;
    if (d && !d.open) d.showModal();
    return () => {
      d?.close();
      if (opener?.isConnected) opener.focus();
    };
  }, []);

  useEffect(() => {
    setError(null);
    setUpscaling(false);
  }, [index]);

  // the keys are the viewer's while it is open (modal), wherever the focus is
  const onKey = useRef<(e: KeyboardEvent) => void>(() => undefined);
  useEffect(() => {
    const listener = (e: KeyboardEvent) => onKey.current(e);
    document.addEventListener('keydown', listener);
    return () => document.removeEventListener('keydown', listener);
  }, []);

  if (!item) return null;

  const goBy = (delta: number) => {
    const i = stepIndex(index, delta, items.length);
    if (i === null) return;
    onIndex(i);
    // the button pressed turns disabled at an end (its focus would drop out): the other one takes it
    const [pressed, other] = delta < 0 ? [prevButton, nextButton] : [nextButton, prevButton];
    if (stepIndex(i, delta, items.length) === null && document.activeElement === pressed.current) other.current?.focus();
  };

  onKey.current = (e: KeyboardEvent) => {
    const t = e.target as HTMLElement;
    // a player's own keys (seek, volume) and a form control's stay theirs
    const own = t.matches('video, audio, input, select, textarea');
    if (e.key === 'ArrowLeft' && !own) {
      e.preventDefault();
      goBy(-1);
    } else if (e.key === 'ArrowRight' && !own) {
      e.preventDefault();
      goBy(1);
    } else if (e.key === 'Tab') {
      // the focus cycles inside the dialog
      const d = dialog.current;
      const all = Array.from(d?.querySelectorAll<HTMLElement>(FOCUSABLE) ?? []);
      if (!d || !all.length) return;
      const first = all[0];
      const last = all[all.length - 1];
      const at = document.activeElement;
      const outside = !d.contains(at) || at === d;
      if (e.shiftKey && (at === first || outside)) {
        e.preventDefault();
        last.focus();
      } else if (!e.shiftKey && (at === last || outside)) {
        e.preventDefault();
        first.focus();
      }
    }
  };

  const send = async (task: SendTask) => {
    if (!onSendTo) return;
    setBusy(true);
    const why = await onSendTo(item, task);
    setBusy(false);
    if (why) setError(why);
    else onClose();
  };

  const image = item.result.kind === 'image';
  return (
    <dialog
      ref={dialog}
      tabIndex={-1}
      className="viewer"
      aria-label="Result viewer"
      data-testid="viewer"
      data-index={index}
      data-comparing={compared ? 'true' : 'false'}
      onCancel={(e) => {
        e.preventDefault(); // Escape: closed through React, so the focus goes back
        onClose();
      }}
    >
      <div className="row wrap viewer-bar">
        <button ref={prevButton} onClick={() => goBy(-1)} disabled={prev === null} aria-label="Previous result" data-testid="viewer-prev">
          ← Previous
        </button>
        <span className="small" data-testid="viewer-position" aria-live="polite">
          {positionText(index, items.length)}
        </span>
        <button ref={nextButton} onClick={() => goBy(1)} disabled={next === null} aria-label="Next result" data-testid="viewer-next">
          Next →
        </button>
        <button
          onClick={() => setPinned(compared ? null : item.key)}
          aria-pressed={!!compared}
          title={compared ? 'Show one result' : 'Keep this result on the left; previous/next choose the one beside it'}
          data-testid="viewer-compare"
        >
          {compared ? 'Stop comparing' : 'Compare'}
        </button>
        <span className="spacer" />
        <button onClick={onClose} aria-label="Close the viewer" data-testid="viewer-close" autoFocus>
          Close
        </button>
      </div>
      <div className={`viewer-stage${compared ? ' compare' : ''}`}>
        {compared && <Pane item={compared} label="Kept for comparison" />}
        <Pane item={item} label={compared ? 'Compared with' : 'Result'} />
      </div>
      <div className="row wrap">
        {onSendTo && image && (
          <button onClick={() => void send('img2img')} disabled={busy} title="This image as the input image" data-testid="viewer-img2img">
            Send to img2img
          </button>
        )}
        {onSendTo && image && canInpaint && (
          <button onClick={() => void send('inpaint')} disabled={busy} title="This image as the input image, then paint a mask" data-testid="viewer-inpaint">
            Send to inpaint
          </button>
        )}
        {upscale && image && (
          <button onClick={() => setUpscaling((u) => !u)} aria-expanded={upscaling} title="Upscale this image (no diffusion): the result joins the gallery" data-testid="viewer-upscale">
            Send to upscale
          </button>
        )}
        <button
          onClick={() => {
            onReuse(item);
            onClose();
          }}
          title="Load these settings into the form"
          data-testid="viewer-reuse"
        >
          Reuse settings
        </button>
      </div>
      {upscaling && upscale && (
        <UpscaleChooser upscalers={upscale.upscalers} initial={upscale.initial} onUpscale={(c) => upscale.run(item, c)} onClose={onClose} onCancel={() => setUpscaling(false)} testId="viewer-upscale-chooser" />
      )}
      {error && (
        <div className="alert error" role="alert">
          {error}
        </div>
      )}
    </dialog>
  );
}
