// The canvas work of the mask painter (MaskPainter.tsx): a brush or eraser stroke on the overlay, a
// stored mask read back as the overlay at the input image's size, and the overlay uploaded as the mask. The pixel maths is maskPng.ts.
import { apiFetch } from '@/utils/api';
import { OVERLAY_RGB, maskPngFromOverlay, overlayFromMask } from './maskPng';

export type Tool = 'brush' | 'eraser';
export type Point = { x: number; y: number };

/** One stroke segment from `from` to `p` (a dot where they are one point). */
export function strokeTo(c: CanvasRenderingContext2D, from: Point, p: Point, tool: Tool, width: number) {
  c.save();
  c.globalCompositeOperation = tool === 'eraser' ? 'destination-out' : 'source-over';
  c.strokeStyle = c.fillStyle = `rgb(${OVERLAY_RGB.join(',')})`;
  c.lineWidth = width;
  c.lineCap = 'round';
  c.lineJoin = 'round';
  c.beginPath();
  if (from.x === p.x && from.y === p.y) {
    c.arc(p.x, p.y, width / 2, 0, Math.PI * 2);
    c.fill();
  } else {
    c.moveTo(from.x, from.y);
    c.lineTo(p.x, p.y);
    c.stroke();
  }
  c.restore();
}

/** A stored mask (an asset URL) as overlay pixels, scaled to `w`×`h`; null once `cancelled()`. */
export async function readMaskOverlay(url: string, w: number, h: number, cancelled: () => boolean): Promise<Uint8ClampedArray<ArrayBuffer> | null> {
  const res = await apiFetch(url);
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  const bitmap = await createImageBitmap(await res.blob());
  if (cancelled()) return null;
  const off = document.createElement('canvas');
  off.width = w;
  off.height = h;
  const o = off.getContext('2d') as CanvasRenderingContext2D;
  o.drawImage(bitmap, 0, 0, w, h);
  return overlayFromMask(o.getImageData(0, 0, w, h).data);
}

/** The overlay as the mask PNG (feathered by `feather` px), uploaded: its asset id (null: nothing is painted). */
export async function uploadOverlay(rgba: ArrayLike<number>, w: number, h: number, feather: number, upload: (png: Blob) => Promise<string>): Promise<string | null> {
  const png = await maskPngFromOverlay(rgba, w, h, feather);
  return png ? upload(new Blob([png as Uint8Array<ArrayBuffer>], { type: 'image/png' })) : null;
}
