'use client';
// The inpainting mask, painted over the input image: brush, eraser, brush size, clear, invert, undo/redo
// (buttons, and Ctrl+Z / Ctrl+Shift+Z / Ctrl+Y while the painter has focus), and feather (a blur
// radius at the image's resolution, previewed as a CSS blur of the overlay scaled to its shown size). The canvas has
// the input image's own resolution (the engine sizes the image and the mask by the same resize_mode,
// so they stay aligned at any request size); it is shown scaled over the image. On Generate the page
// asks `commit()`: the painted mask goes up as a greyscale PNG (white = repaint) to POST /assets once
// per change, and its asset id becomes `sample.mask_img` (useMaskCanvas.ts).
import { useRef, useState, type Ref } from 'react';
import { assetUrl } from './assets';
import type { Point, Tool } from './maskCanvas';
import { historyKey } from './maskHistory';
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
  const img = useRef<HTMLImageElement>(null);

  const maxBrush = size ? Math.max(8, Math.round(Math.max(size.w, size.h) / 4)) : 64;
  const brushSize = brush ?? (size ? Math.max(2, Math.round(Math.min(size.w, size.h) / 12)) : 8);

  const pointer = strokeHandlers({ mask, last, tool, brushSize, size, onPaint });
  const onKeyDown = (e: React.KeyboardEvent) => {
    const key = historyKey(e);
    if (!key) return;
    e.preventDefault();
    if (key === 'undo') mask.undo();
    else mask.redo();
  };
  // the feather previewed at the shown size: CSS blur's radius is a standard deviation, as the PNG's
  const shownScale = size && img.current?.clientWidth ? img.current.clientWidth / size.w : 1;

  if (error) return <div className="alert error small">The input image is not available ({error}).</div>;
  return (
    <div className="mask-painter" data-testid="mask-painter" tabIndex={0} onKeyDown={onKeyDown} aria-label="Mask painter (Ctrl+Z undo, Ctrl+Shift+Z or Ctrl+Y redo)">
      <div className="mask-stage">
        {src && (
          // eslint-disable-next-line @next/next/no-img-element
          <img
            ref={img}
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
            data-feather={mask.feather}
            style={mask.feather > 0 ? { filter: `blur(${(mask.feather * shownScale).toFixed(2)}px)` } : undefined}
            aria-label="Mask: paint the area to repaint"
            {...pointer}
          />
        )}
      </div>
      <MaskTools tool={tool} onTool={setTool} brushSize={brushSize} maxBrush={maxBrush} onBrush={setBrush} onClear={mask.clear} />
      <MaskEdits mask={mask} maxFeather={maxBrush} />
      <div className="muted small">Paint the area to repaint (white in the mask); the rest is kept.</div>
      {mask.loadError && <div className="alert error small">{mask.loadError}</div>}
    </div>
  );
}

interface StrokeOpts {
  mask: ReturnType<typeof useMaskCanvas>;
  last: { current: Point | null };
  tool: Tool;
  brushSize: number;
  size: { w: number; h: number } | null;
  onPaint: (hasPaint: boolean) => void;
}

/** The canvas's pointer handlers: a press, its drag and its release are one stroke, one undo step. */
function strokeHandlers({ mask, last, tool, brushSize, size, onPaint }: StrokeOpts) {
  const paintTo = (p: Point) => {
    if (mask.stroke(last.current ?? p, p, tool, brushSize)) last.current = p;
  };
  const point = (e: React.PointerEvent<HTMLCanvasElement>) =>
    toImagePoint(e.clientX, e.clientY, e.currentTarget.getBoundingClientRect(), size?.w ?? 1, size?.h ?? 1);
  return {
    onPointerDown: (e: React.PointerEvent<HTMLCanvasElement>) => {
      if (e.button !== 0) return;
      e.currentTarget.setPointerCapture(e.pointerId);
      // the painter takes focus, so Ctrl+Z undoes this stroke
      e.currentTarget.closest<HTMLElement>('.mask-painter')?.focus({ preventScroll: true });
      last.current = null;
      mask.beginStep();
      paintTo(point(e));
      if (tool === 'brush') onPaint(true);
    },
    onPointerMove: (e: React.PointerEvent<HTMLCanvasElement>) => {
      if (last.current && e.buttons & 1) paintTo(point(e));
    },
    onPointerUp: () => {
      last.current = null;
      const painted = mask.hasPaint();
      if (painted !== null) onPaint(painted);
    },
    onPointerCancel: () => {
      last.current = null;
    },
  };
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

/** Undo, redo, invert, and the feather radius. */
function MaskEdits({ mask, maxFeather }: { mask: ReturnType<typeof useMaskCanvas>; maxFeather: number }) {
  return (
    <div className="row wrap small">
      <button type="button" onClick={mask.undo} disabled={!mask.canUndo} title="Undo (Ctrl+Z)" data-testid="mask-undo">
        Undo
      </button>
      <button type="button" onClick={mask.redo} disabled={!mask.canRedo} title="Redo (Ctrl+Shift+Z, Ctrl+Y)" data-testid="mask-redo">
        Redo
      </button>
      <button type="button" onClick={mask.invert} title="Repaint what is kept, keep what is painted" data-testid="mask-invert">
        Invert
      </button>
      <label className="row" title="Blur the mask's edge by this radius (px of the input image), as A1111's mask blur">
        feather
        <input
          type="range"
          min={0}
          max={maxFeather}
          value={Math.min(mask.feather, maxFeather)}
          onChange={(e) => mask.setFeather(Number(e.target.value))}
          aria-label="Feather"
          data-testid="mask-feather"
        />
        <span className="muted">{mask.feather} px</span>
      </label>
    </div>
  );
}
