'use client';
// The inpainting mask, painted over the input image: brush, eraser, brush size, clear. The canvas has
// the input image's own resolution (the engine sizes the image and the mask by the same resize_mode,
// so they stay aligned at any request size); it is shown scaled over the image. On Generate the page
// asks `commit()`: the painted mask goes up as a greyscale PNG (white = repaint) to POST /assets once
// per change, and its asset id becomes `sample.mask_img`.
import { useEffect, useImperativeHandle, useRef, useState, type Ref } from 'react';
import { apiFetch } from '@/utils/api';
import { assetUrl } from './assets';
import { OVERLAY_RGB, maskPngFromOverlay, overlayFromMask, overlayHasPaint, toImagePoint } from './maskPng';
import { useMediaUrl } from './useMediaUrl';

export interface MaskPainterHandle {
  /** Upload the mask if it changed since the last upload; the asset id in effect (null: no mask). */
  commit: () => Promise<string | null>;
}

interface Props {
  ref?: Ref<MaskPainterHandle>;
  job: { id: string; name: string };
  imageAsset: string;
  /** the stored mask in the form (shown when it is not the one painted here) */
  maskAsset: string | null;
  /** uploads the mask PNG, giving its asset id */
  upload: (png: Blob) => Promise<string>;
  onPaint: (hasPaint: boolean) => void;
}

type Tool = 'brush' | 'eraser';

export default function MaskPainter({ ref, job, imageAsset, maskAsset, upload, onPaint }: Props) {
  const { src, error } = useMediaUrl(assetUrl(job.name, imageAsset));
  const canvasRef = useRef<HTMLCanvasElement>(null);
  const [size, setSize] = useState<{ w: number; h: number } | null>(null);
  const [tool, setTool] = useState<Tool>('brush');
  const [brush, setBrush] = useState<number | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const last = useRef<{ x: number; y: number } | null>(null);
  // the mask as uploaded: `dirty` once painted since; `own` is the asset this painter made
  const dirty = useRef(false);
  const own = useRef<string | null>(null);
  const onPaintRef = useRef(onPaint);
  onPaintRef.current = onPaint;

  const maxBrush = size ? Math.max(8, Math.round(Math.max(size.w, size.h) / 4)) : 64;
  const brushSize = brush ?? (size ? Math.max(2, Math.round(Math.min(size.w, size.h) / 12)) : 8);

  const ctx = () => canvasRef.current?.getContext('2d', { willReadFrequently: true }) ?? null;
  const pixels = () => {
    const c = ctx();
    return c && size ? c.getImageData(0, 0, size.w, size.h).data : null;
  };

  // a stored mask (restored settings, a reload) is drawn as the overlay, scaled to the image
  useEffect(() => {
    const c = ctx();
    if (!size || !c) return;
    if (!maskAsset) {
      // no mask in the form (cleared, erased, or settings restored without one)
      c.clearRect(0, 0, size.w, size.h);
      dirty.current = false;
      own.current = null;
      return;
    }
    if (maskAsset === own.current) return;
    let cancelled = false;
    (async () => {
      const res = await apiFetch(assetUrl(job.name, maskAsset));
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const bitmap = await createImageBitmap(await res.blob());
      if (cancelled) return;
      const off = document.createElement('canvas');
      off.width = size.w;
      off.height = size.h;
      const o = off.getContext('2d') as CanvasRenderingContext2D;
      o.drawImage(bitmap, 0, 0, size.w, size.h);
      const overlay = overlayFromMask(o.getImageData(0, 0, size.w, size.h).data);
      c.putImageData(new ImageData(overlay, size.w, size.h), 0, 0);
      own.current = maskAsset;
      dirty.current = false;
      setLoadError(null);
      onPaintRef.current(overlayHasPaint(overlay));
    })().catch((err) => !cancelled && setLoadError(`The stored mask could not be shown: ${(err as Error).message}`));
    return () => {
      cancelled = true;
    };
  }, [size, maskAsset, job.name]); // eslint-disable-line react-hooks/exhaustive-deps

  useImperativeHandle(
    ref,
    () => ({
      commit: async () => {
        if (!dirty.current) return maskAsset ?? null;
        const data = pixels();
        if (!data || !size) return maskAsset ?? null;
        const png = await maskPngFromOverlay(data, size.w, size.h);
        const id = png ? await upload(new Blob([png as Uint8Array<ArrayBuffer>], { type: 'image/png' })) : null;
        own.current = id;
        dirty.current = false;
        return id;
      },
    }),
    [maskAsset, size, upload], // eslint-disable-line react-hooks/exhaustive-deps
  );

  const paintTo = (p: { x: number; y: number }) => {
    const c = ctx();
    if (!c) return;
    const from = last.current ?? p;
    c.save();
    c.globalCompositeOperation = tool === 'eraser' ? 'destination-out' : 'source-over';
    c.strokeStyle = c.fillStyle = `rgb(${OVERLAY_RGB.join(',')})`;
    c.lineWidth = brushSize;
    c.lineCap = 'round';
    c.lineJoin = 'round';
    c.beginPath();
    if (from.x === p.x && from.y === p.y) {
      c.arc(p.x, p.y, brushSize / 2, 0, Math.PI * 2);
      c.fill();
    } else {
      c.moveTo(from.x, from.y);
      c.lineTo(p.x, p.y);
      c.stroke();
    }
    c.restore();
    last.current = p;
    dirty.current = true;
  };

  const point = (e: React.PointerEvent<HTMLCanvasElement>) =>
    toImagePoint(e.clientX, e.clientY, e.currentTarget.getBoundingClientRect(), size?.w ?? 1, size?.h ?? 1);

  const clear = () => {
    const c = ctx();
    if (c && size) c.clearRect(0, 0, size.w, size.h);
    dirty.current = false;
    own.current = null;
    onPaint(false);
  };

  if (error) return <div className="alert error small">The input image is not available ({error}).</div>;
  return (
    <div className="mask-painter" data-testid="mask-painter">
      <div className="mask-stage">
        {src && (
          // eslint-disable-next-line @next/next/no-img-element
          <img
            src={src}
            alt="input"
            draggable={false}
            onLoad={(e) => setSize({ w: e.currentTarget.naturalWidth, h: e.currentTarget.naturalHeight })}
          />
        )}
        {size && (
          <canvas
            ref={canvasRef}
            width={size.w}
            height={size.h}
            data-testid="mask-canvas"
            aria-label="Mask: paint the area to repaint"
            onPointerDown={(e) => {
              if (e.button !== 0) return;
              e.currentTarget.setPointerCapture(e.pointerId);
              last.current = null;
              paintTo(point(e));
              if (tool === 'brush') onPaint(true);
            }}
            onPointerMove={(e) => {
              if (last.current && e.buttons & 1) paintTo(point(e));
            }}
            onPointerUp={() => {
              last.current = null;
              const data = pixels();
              if (data) onPaint(overlayHasPaint(data));
            }}
            onPointerCancel={() => {
              last.current = null;
            }}
          />
        )}
      </div>
      <div className="row wrap small">
        <label>
          <input type="radio" name="mask-tool" checked={tool === 'brush'} onChange={() => setTool('brush')} /> brush
        </label>
        <label>
          <input type="radio" name="mask-tool" checked={tool === 'eraser'} onChange={() => setTool('eraser')} aria-label="eraser" /> eraser
        </label>
        <label className="row">
          size
          <input
            type="range"
            min={1}
            max={maxBrush}
            value={Math.min(brushSize, maxBrush)}
            onChange={(e) => setBrush(Number(e.target.value))}
            aria-label="Brush size"
            data-testid="brush-size"
          />
          <span className="muted">{brushSize} px</span>
        </label>
        <button type="button" onClick={clear} data-testid="mask-clear">
          Clear mask
        </button>
      </div>
      <div className="muted small">Paint the area to repaint (white in the mask); the rest is kept.</div>
      {loadError && <div className="alert error small">{loadError}</div>}
    </div>
  );
}
