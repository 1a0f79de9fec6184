'use client';
// The inpainting mask, painted over the input image: brush, eraser, brush size, clear. The canvas has
// the input image's own resolution (the engine sizes the image and the mask by the same resize_mode,
// so they stay aligned at any request size); it is shown scaled over the image. On Generate the page
// asks `commit()`: the painted mask goes up as a greyscale PNG (white = repaint) to POST /assets once
// per change, and its asset id becomes `sample.mask_img` (useMaskCanvas.ts).
import { useRef, useState, type Ref } from 'react';
import { assetUrl } from './assets';
import type { Point, Tool } from './maskCanvas';
import { toImagePoint } from './maskPng';
import { useMaskCanvas } from './useMaskCanvas';
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

export default function MaskPainter({ ref, job, imageAsset, maskAsset, upload, onPaint }: Props) {
  const { src, error } = useMediaUrl(assetUrl(job.name, imageAsset));
  const [size, setSize] = useState<{ w: number; h: number } | null>(null);
  const [tool, setTool] = useState<Tool>('brush');
  const [brush, setBrush] = useState<number | null>(null);
  const mask = useMaskCanvas({ ref, jobName: job.name, size, maskAsset, upload, onPaint });
  const last = useRef<Point | null>(null);

  const maxBrush = size ? Math.max(8, Math.round(Math.max(size.w, size.h) / 4)) : 64;
  const brushSize = brush ?? (size ? Math.max(2, Math.round(Math.min(size.w, size.h) / 12)) : 8);

  const paintTo = (p: Point) => {
    if (mask.stroke(last.current ?? p, p, tool, brushSize)) last.current = p;
  };
  const point = (e: React.PointerEvent<HTMLCanvasElement>) =>
    toImagePoint(e.clientX, e.clientY, e.currentTarget.getBoundingClientRect(), size?.w ?? 1, size?.h ?? 1);

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
            ref={mask.canvasRef}
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
              const painted = mask.hasPaint();
              if (painted !== null) onPaint(painted);
            }}
            onPointerCancel={() => {
              last.current = null;
            }}
          />
        )}
      </div>
      <MaskTools tool={tool} onTool={setTool} brushSize={brushSize} maxBrush={maxBrush} onBrush={setBrush} onClear={mask.clear} />
      <div className="muted small">Paint the area to repaint (white in the mask); the rest is kept.</div>
      {mask.loadError && <div className="alert error small">{mask.loadError}</div>}
    </div>
  );
}

/** Brush or eraser, the brush size, Clear mask. */
function MaskTools(props: { tool: Tool; onTool: (t: Tool) => void; brushSize: number; maxBrush: number; onBrush: (px: number) => void; onClear: () => void }) {
  const { tool, onTool, brushSize, maxBrush } = props;
  return (
    <div className="row wrap small">
      <label>
        <input type="radio" name="mask-tool" checked={tool === 'brush'} onChange={() => onTool('brush')} /> brush
      </label>
      <label>
        <input type="radio" name="mask-tool" checked={tool === 'eraser'} onChange={() => onTool('eraser')} aria-label="eraser" /> eraser
      </label>
      <label className="row">
        size
        <input
          type="range"
          min={1}
          max={maxBrush}
          value={Math.min(brushSize, maxBrush)}
          onChange={(e) => props.onBrush(Number(e.target.value))}
          aria-label="Brush size"
          data-testid="brush-size"
        />
        <span className="muted">{brushSize} px</span>
      </label>
      <button type="button" onClick={props.onClear} data-testid="mask-clear">
        Clear mask
      </button>
    </div>
  );
}
