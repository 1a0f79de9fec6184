'use client';
// The Generate page's output column: the live preview (and the batch of the request it shows), the engine's queue, the results gallery, and the result viewer over this page's results and the gallery's.
import { useState } from 'react';
import type { UpscaleAction } from './controlHires';
import Gallery from './Gallery';
import PreviewPanel from './PreviewPanel';
import QueuePanel from './QueuePanel';
import ResultViewer, { type ViewerActions } from './ResultViewer';
import type { GalleryItem } from './types';
import type { useEngineQueue } from './useEngineQueue';
import type { useGallery } from './useGallery';
import type { useGeneration } from './useGeneration';
import { viewerItems } from './viewerList';

interface Props {
  gen: ReturnType<typeof useGeneration>;
  queue: ReturnType<typeof useEngineQueue>;
  gallery: ReturnType<typeof useGallery>;
  onReuse: (item: GalleryItem) => void;
  /** where the arch takes an input image */
  onUseAsInput?: (item: GalleryItem) => Promise<string | null>;
  viewer: ViewerActions;
  /** a result's Upscale (the engine running) */
  upscale?: UpscaleAction;
}

export default function OutputColumn({ gen, queue, gallery, onReuse, onUseAsInput, viewer, upscale }: Props) {
  // the result the viewer shows (its key: the list changes as results come and go)
  const [viewing, setViewing] = useState<string | null>(null);
  const walk = viewerItems(gallery.recent, gallery.items);
  const viewIndex = viewing ? walk.findIndex((i) => i.key === viewing) : -1;
  const batchResults = gen.view.requestId
    ? gallery.recent.filter((i) => i.requestId === gen.view.requestId).sort((a, b) => (a.result.index ?? 0) - (b.result.index ?? 0))
    : [];
  return (
    <div className="output">
      <PreviewPanel
        view={gen.view}
        onDismiss={gen.dismiss}
        results={batchResults}
        onView={(item) => setViewing(item.key)}
      />
      <QueuePanel
        snapshot={queue.snapshot}
        error={queue.error}
        mine={gen.ours}
        notice={gen.notice}
        onCancel={(id) => {
          gen.noteCancel(id);
          return queue.cancel(id);
        }}
        onMove={queue.move}
        live={{ id: gen.view.requestId, step: gen.view.step, total: gen.view.total }}
      />
      <Gallery items={gallery.items} search={gallery.search} onReuse={onReuse} onDelete={gallery.remove} onUseAsInput={onUseAsInput} upscale={upscale} onView={(item) => setViewing(item.key)} />
      {viewIndex >= 0 && <ResultViewer items={walk} index={viewIndex} onIndex={(i) => setViewing(walk[i].key)} onClose={() => setViewing(null)} onReuse={onReuse} {...viewer} />}
    </div>
  );
}
