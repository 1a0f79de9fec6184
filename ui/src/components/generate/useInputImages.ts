'use client';
// The input images' side of the Generate page: the mask painter's handle and its upload, a mask
// erased, a gallery image taken as the input image, and the painted mask committed before a request
// goes (its asset id is the request's mask_img).
import { useRef, useState } from 'react';
import { apiFetch, describeError } from '@/utils/api';
import { uploadAsset } from './assets';
import { normalizeSample } from './requestBody';
import type { MaskPainterHandle } from './MaskPainter';
import type { GalleryItem, SampleForm } from './types';
import { fileUrl } from './useGallery';
import type { GenerateForms } from './useGenerateForms';

export function useInputImages(job: { id: string } | null, forms: Pick<GenerateForms, 'sample' | 'setSample' | 'setMaskPainted'>) {
  const { sample, setSample, setMaskPainted } = forms;
  const painter = useRef<MaskPainterHandle>(null);
  /** the painted mask is going up */
  const [preparing, setPreparing] = useState(false);

  const uploadMask = (png: Blob) => {
    if (!job) return Promise.reject(new Error('the engine is not running'));
    return uploadAsset(job.id, png, 'mask.png');
  };

  const onMaskPaint = (has: boolean) => {
    setMaskPainted(has);
    // every stroke erased: no mask (the stored one too)
    if (!has) {
      setSample((prev) => {
        const p = prev ? normalizeSample(prev) : null;
        return p?.images.mask_img ? { ...p, images: { ...p.images, mask_img: null } } : prev;
      });
    }
  };

  /** The sample with the painted mask uploaded (once per change); throws when the upload fails. */
  const commitMask = async (s: SampleForm): Promise<SampleForm> => {
    if (!painter.current || !s.images.init_img) return s;
    setPreparing(true);
    try {
      const mask = await painter.current.commit();
      if (mask === (s.images.mask_img ?? null)) return s;
      const next = { ...s, images: { ...s.images, mask_img: mask } };
      setSample(next);
      return next;
    } finally {
      setPreparing(false);
    }
  };

  /** A gallery image as the input image: its file uploaded to the engine's assets; an error in words, or null.
   * `task`: the form's task from then on ('' automatic; unset: kept as it was). */
  const useAsInput = async (item: GalleryItem, task?: string): Promise<string | null> => {
    if (!job || !sample) return 'Start the engine first: input images are uploaded to it.';
    try {
      const res = await apiFetch(fileUrl(item));
      if (!res.ok) return `The file could not be read: ${(await describeError(res)).message}`;
      const id = await uploadAsset(job.id, await res.blob(), item.result.relpath.split('/').pop() || 'input.png');
      setSample((prev) => {
        const p = prev ? normalizeSample(prev) : sample;
        return { ...p, task: task ?? p.task, images: { ...p.images, init_img: id, mask_img: null } };
      });
      setMaskPainted(false);
      window.scrollTo({ top: 0, behavior: 'smooth' });
      return null;
    } catch (err) {
      return `The image could not be uploaded: ${(err as Error).message}`;
    }
  };

  return { painter, preparing, uploadMask, onMaskPaint, commitMask, useAsInput };
}
