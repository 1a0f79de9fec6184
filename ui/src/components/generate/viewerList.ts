// What the result viewer (ResultViewer.tsx) walks: this page's own results first, then the gallery's,
// each once; and where previous/next lead (they stop at the ends, never wrap).
import type { GalleryItem } from './types';

/** This session's results (newest first), then the gallery's items not already among them. */
export function viewerItems(recent: readonly GalleryItem[], gallery: readonly GalleryItem[]): GalleryItem[] {
  const seen = new Set<string>();
  const out: GalleryItem[] = [];
  for (const item of [...recent, ...gallery]) {
    if (seen.has(item.key)) continue;
    seen.add(item.key);
    out.push(item);
  }
  return out;
}

/** The index `delta` away from `index` in a list of `length`, or null past either end. */
export function stepIndex(index: number, delta: number, length: number): number | null {
  const next = index + delta;
  return next >= 0 && next < length ? next : null;
}

/** "2 of 5" */
export function positionText(index: number, length: number): string {
  return `${index + 1} of ${length}`;
}
