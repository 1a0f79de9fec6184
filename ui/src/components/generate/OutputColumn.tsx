'use client';
// The Generate page's output column: the live preview with Generate (and the batch of the request it
// shows), the engine's queue, and the results gallery.
import Gallery from './Gallery';
import PreviewPanel from './PreviewPanel';
import QueuePanel from './QueuePanel';
import type { GalleryItem } from './types';
import type { useEngineQueue } from './useEngineQueue';
import type { useGallery } from './useGallery';
import type { useGeneration } from './useGeneration';

interface Props {
  gen: ReturnType<typeof useGeneration>;
  queue: ReturnType<typeof useEngineQueue>;
  gallery: ReturnType<typeof useGallery>;
  canGenerate: boolean;
  whyNot: string | null;
  onGenerate: () => void;
  detach: boolean;
  onDetach: (detach: boolean) => void;
  onReuse: (item: GalleryItem) => void;
  /** where the arch takes an input image */
  onUseAsInput?: (item: GalleryItem) => Promise<string | null>;
}

export default function OutputColumn({ gen, queue, gallery, canGenerate, whyNot, onGenerate, detach, onDetach, onReuse, onUseAsInput }: Props) {
  const batchResults = gen.view.requestId
    ? gallery.recent.filter((i) => i.requestId === gen.view.requestId).sort((a, b) => (a.result.index ?? 0) - (b.result.index ?? 0))
    : [];
  return (
    <div className="output">
      <PreviewPanel
        view={gen.view}
        canGenerate={canGenerate}
        whyNot={whyNot}
        onGenerate={onGenerate}
        onCancel={gen.cancel}
        onDismiss={gen.dismiss}
        detach={detach}
        onDetach={onDetach}
        results={batchResults}
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
      />
      <Gallery items={gallery.items} search={gallery.search} onReuse={onReuse} onDelete={gallery.remove} onUseAsInput={onUseAsInput} />
    </div>
  );
}
