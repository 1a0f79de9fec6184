'use client';
// Finished results (the history): image, video or audio, with the settings that made them;
// search by prompt, filter by model, view large (ResultViewer.tsx), open, reuse, delete (after a confirm).
import { useEffect, useRef, useState } from 'react';
import ResultMedia from './ResultMedia';
import { formatBytes, runAndWaitText } from '@/utils/format';
import ConfirmDelete from './ConfirmDelete';
import type { UpscaleAction } from './controlHires';
import UpscaleChooser from './UpscaleChooser';
import GalleryFilters from './GalleryFilters';
import { modelKey } from '@/utils/modelIdentity';
import { sourceLabel } from '@/utils/historySource';
import { loraLabel, picksFromSettings } from './loras';
import type { GalleryItem } from './types';
import { fileUrl, type GallerySearch } from './useGallery';
import { useMediaUrl } from './useMediaUrl';

/** Who asked for it, where that was not this page (the CLI, a ComfyUI client, the A1111 routes, ...). */
export function SourceBadge({ item }: { item: Pick<GalleryItem, 'source' | 'client'> }) {
  if (!item.source || item.source === 'ui') return null;
  const label = sourceLabel(item.source);
  return (
    <span className="badge" data-testid="gallery-source-badge" title={item.client ? `${label}, client ${item.client}` : label}>
      {label}
    </span>
  );
}

interface Props {
  items: GalleryItem[];
  search: GallerySearch;
  onReuse: (item: GalleryItem) => void;
  onDelete: (item: GalleryItem) => Promise<string | null>;
  /** set where the current arch takes an input image: put an image result in as the input */
  onUseAsInput?: (item: GalleryItem) => Promise<string | null>;
  /** open the result viewer on this item */
  onView: (item: GalleryItem) => void;
  /** an image result's Upscale (task upscale), while the engine runs */
  upscale?: UpscaleAction;
}

function settingsLine(item: GalleryItem): string {
  const s = item.sample;
  const r = item.result;
  const loras = picksFromSettings(item.model);
  const parts = [
    `${item.model.arch ?? '?'}`,
    r.width && r.height ? `${r.width}×${r.height}` : null,
    s.num_inference_steps !== undefined ? `${s.num_inference_steps} steps` : null,
    s.guidance_scale !== undefined ? `cfg ${s.guidance_scale}` : null,
    `seed ${r.seed}`,
    Number(s.batch_size) > 1 ? `#${(r.index ?? 0) + 1} of ${s.batch_size}` : null,
    s.task && s.task !== 'txt2img' ? String(s.task) : null,
    s.sampler ? `sampler ${s.sampler}` : null,
    loras.length ? `LoRA ${loras.map(loraLabel).join(', ')}` : null,
    r.num_frames ? `${r.num_frames} frames @ ${r.fps} fps` : null,
    r.duration ? `${Number(r.duration).toFixed(1)} s` : null,
    `${r.ext}, ${formatBytes(r.bytes)}`,
    item.timings?.total_s != null ? `took ${runAndWaitText(item.timings.run_s, item.timings.total_s)}` : null,
  ];
  return parts.filter(Boolean).join(' · ');
}

/** The card's media: an image opens the viewer; video and audio play in place. */
function Media({ item, src, error, onView }: { item: GalleryItem; src: string | null; error: string | null; onView: () => void }) {
  const media = <ResultMedia key={item.key} item={item} src={src} error={error} testId="gallery-media" />;
  if (item.result.kind !== 'image' || !src || error) return media;
  return (
    <button className="media-button" onClick={onView} aria-label="View large" data-testid="gallery-view">
      {media}
    </button>
  );
}

interface CardProps {
  item: GalleryItem;
  onReuse: () => void;
  onDelete: () => Promise<void>;
  onUseAsInput?: () => void;
  onView: () => void;
  upscale?: UpscaleAction;
}

function ItemCard({ item, onReuse, onDelete, onUseAsInput, onView, upscale }: CardProps) {
  const [upscaling, setUpscaling] = useState(false);
  const { src, error } = useMediaUrl(fileUrl(item));
  const [confirming, setConfirming] = useState(false);
  // "Keep" (or Escape) gives the focus back to Delete
  const deleteButton = useRef<HTMLButtonElement>(null);
  const wasConfirming = useRef(false);
  useEffect(() => {
    if (wasConfirming.current && !confirming) deleteButton.current?.focus();
    wasConfirming.current = confirming;
  }, [confirming]);
  return (
    <figure
      className="gallery-item"
      data-testid="gallery-item"
      data-kind={item.result.kind}
      data-request={item.requestId}
      data-model={modelKey(item.model)}
      data-source={item.source ?? ''}
    >
      <Media item={item} src={src} error={error} onView={onView} />
      <figcaption>
        <div className="prompt" title={String(item.sample.prompt ?? '')}>
          {String(item.sample.prompt ?? '') || <i>no prompt</i>}
        </div>
        <div className="muted small">
          <SourceBadge item={item} /> {settingsLine(item)}
        </div>
        <div className="row wrap">
          <button onClick={onView} title="Show it large, with previous/next and compare">
            View
          </button>
          <a className="button" href={src ?? undefined} target="_blank" rel="noreferrer" aria-disabled={!src}>
            Open
          </a>
          <button onClick={onReuse} title="Load these settings into the form">
            Reuse
          </button>
          {onUseAsInput && item.result.kind === 'image' && (
            <button onClick={onUseAsInput} title="Use this image as the input image (img2img, inpaint)">
              Use as input
            </button>
          )}
          {upscale && item.result.kind === 'image' && (
            <button onClick={() => setUpscaling((u) => !u)} aria-expanded={upscaling} title="Upscale this image (no diffusion)" data-testid="gallery-upscale">
              Upscale
            </button>
          )}
          {!confirming && (
            <button ref={deleteButton} className="danger" onClick={() => setConfirming(true)} data-testid="gallery-delete">
              Delete
            </button>
          )}
        </div>
        {upscaling && upscale && (
          <UpscaleChooser upscalers={upscale.upscalers} initial={upscale.initial} onUpscale={(c) => upscale.run(item, c)} onClose={() => setUpscaling(false)} />
        )}
        {confirming && (
          <ConfirmDelete
            question="Delete this result and its file?"
            onConfirm={async () => {
              await onDelete();
              setConfirming(false);
            }}
            onCancel={() => setConfirming(false)}
          />
        )}
      </figcaption>
    </figure>
  );
}

export default function Gallery({ items, search, onReuse, onDelete, onUseAsInput, onView, upscale }: Props) {
  const [error, setError] = useState<string | null>(null);
  const filtered = Boolean(search.filter.q || search.filter.model);
  const shown = error ?? search.error;
  return (
    <section className="card" aria-label="Results" data-testid="gallery" data-saving={search.saving} data-loading={search.loading}>
      <h3>Results</h3>
      <GalleryFilters search={search} />
      {shown && (
        <div className="alert error" role="alert" data-testid="gallery-error">
          {shown}
        </div>
      )}
      {items.length === 0 && !search.loading && (
        <p className="muted" data-testid="gallery-empty">
          {filtered ? 'No results match this search.' : 'Finished images, videos and audio appear here.'}
        </p>
      )}
      <div className="gallery">
        {items.map((item) => (
          <ItemCard
            key={item.key}
            item={item}
            onReuse={() => onReuse(item)}
            onView={() => onView(item)}
            upscale={upscale}
            onUseAsInput={onUseAsInput && (async () => setError(await onUseAsInput(item)))}
            onDelete={async () => setError(await onDelete(item))}
          />
        ))}
      </div>
      {search.hasMore && (
        <button onClick={search.loadMore} data-testid="gallery-more">
          Show older results
        </button>
      )}
    </section>
  );
}
