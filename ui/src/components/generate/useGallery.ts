'use client';
// The results gallery, kept in localStorage so it survives a reload.
import { useCallback } from 'react';
import { apiFetch } from '@/utils/api';
import { useStoredState } from '@/utils/useStoredState';
import type { GalleryItem } from './types';

const MAX_ITEMS = 200;

/** Where the UI serves a result from: the job folder's outputs, through /api/files (works with the engine stopped). */
export function fileUrl(item: Pick<GalleryItem, 'jobName' | 'result'>): string {
  const rel = item.result.relpath.split('/').map(encodeURIComponent).join('/');
  return `/api/files/${encodeURIComponent(item.jobName)}/outputs/${rel}`;
}

export function useGallery() {
  const [items, setItems] = useStoredState<GalleryItem[]>('aitk.gallery', []);

  const add = useCallback(
    (item: GalleryItem) => setItems((prev) => (prev.some((p) => p.key === item.key) ? prev : [item, ...prev].slice(0, MAX_ITEMS))),
    [setItems],
  );

  /** Remove from the gallery and delete the file (a file already gone is fine). */
  const remove = useCallback(
    async (item: GalleryItem): Promise<string | null> => {
      const res = await apiFetch(fileUrl(item), { method: 'DELETE' }).catch(() => null);
      setItems((prev) => prev.filter((p) => p.key !== item.key));
      if (res && (res.ok || res.status === 404)) return null;
      return res ? `The file could not be deleted (HTTP ${res.status}); it was removed from the gallery.` : 'The UI server did not answer.';
    },
    [setItems],
  );

  return { items, add, remove };
}
