'use client';
// The mask painter's canvas and what it holds: a stored mask (restored settings, a reload) drawn as
// the overlay, strokes, Clear, and `commit()` for the page: the painted mask goes up as a greyscale PNG
// once per change, giving the asset id in effect.
import { useEffect, useImperativeHandle, useRef, useState, type Ref } from 'react';
import { assetUrl } from './assets';
import { readMaskOverlay, strokeTo, uploadOverlay, type Point, type Tool } from './maskCanvas';
import { overlayHasPaint } from './maskPng';
import type { MaskPainterHandle } from './MaskPainter';

interface Opts {
  ref?: Ref<MaskPainterHandle>;
  jobName: string;
  /** the input image's own size (the canvas has it) */
  size: { w: number; h: number } | null;
  maskAsset: string | null;
  upload: (png: Blob) => Promise<string>;
  onPaint: (hasPaint: boolean) => void;
}

export function useMaskCanvas({ ref, jobName, size, maskAsset, upload, onPaint }: Opts) {
  const canvasRef = useRef<HTMLCanvasElement>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  // the mask as uploaded: `dirty` once painted since; `own` is the asset this painter made
  const dirty = useRef(false);
  const own = useRef<string | null>(null);
  const onPaintRef = useRef(onPaint);
  onPaintRef.current = onPaint;

  const ctx = () => canvasRef.current?.getContext('2d', { willReadFrequently: true }) ?? null;
  const pixels = () => {
    const c = ctx();
    return c && size ? c.getImageData(0, 0, size.w, size.h).data : null;
  };
  /** Nothing painted, nothing uploaded. */
  const reset = () => {
    const c = ctx();
    if (c && size) c.clearRect(0, 0, size.w, size.h);
    dirty.current = false;
    own.current = null;
  };

  useStoredMask({ jobName, size, maskAsset, own, ctx, reset, setLoadError }, (overlay, asset) => {
    own.current = asset;
    dirty.current = false;
    onPaintRef.current(overlayHasPaint(overlay));
  });

  useImperativeHandle(
    ref,
    () => ({
      commit: async () => {
        const data = dirty.current ? pixels() : null;
        if (!data || !size) return maskAsset ?? null;
        own.current = await uploadOverlay(data, size.w, size.h, upload);
        dirty.current = false;
        return own.current;
      },
    }),
    [maskAsset, size, upload], // eslint-disable-line react-hooks/exhaustive-deps
  );

  const stroke = (from: Point, p: Point, tool: Tool, width: number) => {
    const c = ctx();
    if (!c) return false;
    strokeTo(c, from, p, tool, width);
    dirty.current = true;
    return true;
  };

  const clear = () => {
    reset();
    onPaint(false);
  };

  /** Whether any of the overlay is painted (null: no canvas yet). */
  const hasPaint = () => {
    const data = pixels();
    return data ? overlayHasPaint(data) : null;
  };

  return { canvasRef, loadError, stroke, clear, hasPaint };
}

interface StoredMaskOpts {
  jobName: string;
  size: { w: number; h: number } | null;
  maskAsset: string | null;
  /** the asset this painter uploaded: already on the canvas */
  own: { current: string | null };
  ctx: () => CanvasRenderingContext2D | null;
  reset: () => void;
  setLoadError: (e: string | null) => void;
}

/** A stored mask (restored settings, a reload) drawn as the overlay, scaled to the image; `onDrawn` once it is.
 * No mask in the form clears the canvas. */
function useStoredMask({ jobName, size, maskAsset, own, ctx, reset, setLoadError }: StoredMaskOpts, onDrawn: (overlay: Uint8ClampedArray, asset: string) => void) {
  const drawn = useRef(onDrawn);
  drawn.current = onDrawn;
  useEffect(() => {
    const c = ctx();
    if (!size || !c) return;
    if (!maskAsset) {
      reset(); // no mask in the form (cleared, erased, or settings restored without one)
      return;
    }
    if (maskAsset === own.current) return;
    let cancelled = false;
    readMaskOverlay(assetUrl(jobName, maskAsset), size.w, size.h, () => cancelled)
      .then((overlay) => {
        if (!overlay || cancelled) return;
        c.putImageData(new ImageData(overlay, size.w, size.h), 0, 0);
        setLoadError(null);
        drawn.current(overlay, maskAsset);
      })
      .catch((err) => !cancelled && setLoadError(`The stored mask could not be shown: ${(err as Error).message}`));
    return () => {
      cancelled = true;
    };
  }, [size, maskAsset, jobName]); // eslint-disable-line react-hooks/exhaustive-deps
}
