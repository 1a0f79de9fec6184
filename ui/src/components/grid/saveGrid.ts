'use client';
// The finished grid as one labelled PNG: each cell's image read through /api/files, drawn on a
// canvas (composeGrid), and saved under the engine job's outputs folder by POST /api/grids.
import { apiFetch, describeError } from '@/utils/api';
import { fileUrl } from '@/components/generate/useGallery';
import { composeGridPng } from './composeGrid';
import type { CellState } from './useGridRun';
import type { SavedGrid } from '@/server/gridFiles';

// the route's answer, as the server module defines it (a type only: nothing of the server is bundled)
export type { SavedGrid } from '@/server/gridFiles';

async function bitmapOf(jobName: string, cell: CellState): Promise<ImageBitmap | null> {
  if (!cell.result || cell.result.kind !== 'image') return null;
  const res = await apiFetch(fileUrl({ jobName, result: cell.result }));
  if (!res.ok) return null;
  return createImageBitmap(await res.blob());
}

export async function saveGrid(job: { id: string; name: string }, xLabels: string[], yLabels: string[], cells: CellState[]): Promise<SavedGrid> {
  const images = await Promise.all(cells.map((c) => bitmapOf(job.name, c).catch(() => null)));
  try {
    const missing = cells.map((c, i) => (images[i] ? '' : c.phase === 'done' ? 'image unreadable' : c.phase));
    const { blob } = await composeGridPng({ xLabels, yLabels, images, missing });
    const res = await apiFetch(`/api/grids?job=${encodeURIComponent(job.id)}`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: blob });
    if (!res.ok) throw new Error((await describeError(res)).message);
    return (await res.json()) as SavedGrid;
  } finally {
    for (const b of images) b?.close();
  }
}
