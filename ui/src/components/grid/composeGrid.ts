'use client';
// The grid's one PNG, drawn on a canvas in the browser: the cell images (each contained in its box,
// a cell without an image says why) and the axis labels, as gridLayout places them.
import { gridLayout } from './gridLayout';

const FONT = (px: number) => `${px}px system-ui, -apple-system, "Segoe UI", sans-serif`;
/** Chromium refuses a canvas past this on a side. */
const MAX_SIDE = 16384;

export interface ComposeInput {
  xLabels: string[];
  yLabels: string[];
  /** row by row; null: the cell has no image, `missing[i]` says why */
  images: (ImageBitmap | null)[];
  missing: string[];
}

export async function composeGridPng(input: ComposeInput): Promise<{ blob: Blob; width: number; height: number }> {
  const drawn = input.images.filter((b): b is ImageBitmap => !!b);
  if (!drawn.length) throw new Error('no cell has an image');
  const cellW = Math.max(...drawn.map((b) => b.width));
  const cellH = Math.max(...drawn.map((b) => b.height));
  const canvas = document.createElement('canvas');
  const ctx = canvas.getContext('2d');
  if (!ctx) throw new Error('this browser gives no 2D canvas');
  const measure = (text: string, px: number) => {
    ctx.font = FONT(px);
    return ctx.measureText(text).width;
  };
  const layout = gridLayout({ cellW, cellH, xLabels: input.xLabels, yLabels: input.yLabels, measure });
  if (layout.width > MAX_SIDE || layout.height > MAX_SIDE) {
    throw new Error(`the grid would be ${layout.width}×${layout.height} px, over the browser's ${MAX_SIDE} px a side`);
  }
  canvas.width = layout.width;
  canvas.height = layout.height;
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, layout.width, layout.height);
  ctx.fillStyle = '#111111';
  ctx.font = FONT(layout.fontPx);
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'center';
  for (const { box, text } of layout.xLabels) ctx.fillText(text, box.x + box.w / 2, box.y + box.h / 2);
  for (const { box, text } of layout.yLabels) ctx.fillText(text, box.x + box.w / 2, box.y + box.h / 2);
  layout.cells.forEach((box, i) => {
    const img = input.images[i];
    if (!img) {
      ctx.fillStyle = '#eeeeee';
      ctx.fillRect(box.x, box.y, box.w, box.h);
      ctx.fillStyle = '#aa0000';
      ctx.font = FONT(Math.max(10, Math.round(layout.fontPx * 0.7)));
      ctx.fillText(input.missing[i] || 'no image', box.x + box.w / 2, box.y + box.h / 2, box.w - 4);
      ctx.fillStyle = '#111111';
      ctx.font = FONT(layout.fontPx);
      return;
    }
    const scale = Math.min(box.w / img.width, box.h / img.height);
    const w = img.width * scale;
    const h = img.height * scale;
    ctx.drawImage(img, box.x + (box.w - w) / 2, box.y + (box.h - h) / 2, w, h);
  });
  const blob = await new Promise<Blob | null>((resolve) => canvas.toBlob(resolve, 'image/png'));
  if (!blob) throw new Error('the canvas could not be encoded as PNG');
  return { blob, width: layout.width, height: layout.height };
}
