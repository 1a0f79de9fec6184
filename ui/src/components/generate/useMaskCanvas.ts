'use client';
// The mask painter's canvas and what it holds: a stored mask (restored settings, a reload) drawn as
// the overlay, strokes, Clear, Invert, undo/redo (each of those one step), the feather radius, and
// `commit()` for the page: the painted mask goes up as a greyscale PNG once per change (feathered),
// giving the asset id in effect.
import { useEffect, useImperativeHandle, useRef, useState, type Ref } from 'react';
import { assetUrl } from './assets';
import { readMaskOverlay, strokeTo, uploadOverlay, type Point, type Tool } from './maskCanvas';
import { invertMask, overlayFromGrey } from './maskEdits';
import { UndoStack } from './maskHistory';
import { OVERLAY_RGB, maskFromOverlay, overlayHasPaint } from './maskPng';
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
  const [feather, setFeatherState] = useState(0);
  // the mask as uploaded: `dirty` once changed since; `own` is the asset this painter made
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
  const steps = useMaskSteps({ ctx, size, pixels, dirty, onPaint: (has) => onPaintRef.current(has) });

  useStoredMask({ jobName, size, maskAsset, own, ctx, reset, setLoadError }, (overlay, asset) => {
    own.current = asset;
    dirty.current = false;
    steps.forget(); // the stored mask is where undo stops
    onPaintRef.current(overlayHasPaint(overlay));
  });

  useImperativeHandle(
    ref,
    () => ({
      commit: async () => {
        const data = dirty.current ? pixels() : null;
        if (!data || !size) return maskAsset ?? null;
        own.current = await uploadOverlay(data, size.w, size.h, feather, upload);
        dirty.current = false;
        return own.current;
      },
    }),
    [maskAsset, size, upload, feather], // eslint-disable-line react-hooks/exhaustive-deps
  );

  const stroke = (from: Point, p: Point, tool: Tool, width: number) => {
    const c = ctx();
    if (!c) return false;
    strokeTo(c, from, p, tool, width);
    dirty.current = true;
    return true;
  };

  /** Whether any of the overlay is painted (null: no canvas yet). */
  const hasPaint = () => {
    const data = pixels();
    return data ? overlayHasPaint(data) : null;
  };

  /** The feather radius (px at the image's resolution): the mask sent changes with it. */
  const setFeather = (px: number) => {
    setFeatherState(px);
    dirty.current = true;
  };

  return { canvasRef, loadError, stroke, hasPaint, feather, setFeather, ...steps };
}

interface StepOpts {
  ctx: () => CanvasRenderingContext2D | null;
  size: { w: number; h: number } | null;
  pixels: () => Uint8ClampedArray | null;
  dirty: { current: boolean };
  onPaint: (hasPaint: boolean) => void;
}

/** The painter's steps: a stroke begun, Clear, Invert, each undoable; the mask kept as grey bytes. */
function useMaskSteps({ ctx, size, pixels, dirty, onPaint }: StepOpts) {
  const history = useRef(new UndoStack<Uint8Array>());
  // re-render when undo/redo become (un)available
  const [, setVersion] = useState(0);
  const bump = () => setVersion((v) => v + 1);

  const grey = () => {
    const data = pixels();
    return data && size ? maskFromOverlay(data, size.w, size.h) : null;
  };
  const draw = (mask: Uint8Array) => {
    const c = ctx();
    if (!c || !size) return;
    c.putImageData(new ImageData(overlayFromGrey(mask, OVERLAY_RGB), size.w, size.h), 0, 0);
    dirty.current = true;
    onPaint(mask.some((v) => v >= 128));
  };
  /** The mask as it is now is kept for undo: a step is about to change it. */
  const beginStep = () => {
    const now = grey();
    if (!now) return false;
    history.current.push(now);
    bump();
    return true;
  };
  const travel = (dir: 'undo' | 'redo') => {
    const now = grey();
    const to = now && (dir === 'undo' ? history.current.undo(now) : history.current.redo(now));
    if (!to) return;
    draw(to);
    bump();
  };
  const clear = () => {
    const now = grey();
    if (!now || !now.some((v) => v)) return;
    beginStep();
    draw(new Uint8Array(now.length));
  };
  const invert = () => {
    const now = grey();
    if (!now || !beginStep()) return;
    draw(invertMask(now));
  };
  const forget = () => {
    history.current.reset();
    bump();
  };
  return {
    beginStep,
    clear,
    invert,
    undo: () => travel('undo'),
    redo: () => travel('redo'),
    forget,
    canUndo: history.current.canUndo,
    canRedo: history.current.canRedo,
  };
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
