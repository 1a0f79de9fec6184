// The mask painter's pure parts: the undo stack (a step, undo, redo, a new step ending the redo
// branch, the limit), its keys, invert, and feather on a small mask (the PNG sent: greyscale, the
// mask's size, a soft edge of the asked radius).
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { featherMask, invertMask, overlayFromGrey } from '@/components/generate/maskEdits';
import { UndoStack, historyKey } from '@/components/generate/maskHistory';
import { OVERLAY_RGB, maskFromOverlay, maskPngFromOverlay } from '@/components/generate/maskPng';

describe('UndoStack', () => {
  it('undo and redo walk the steps; a new step ends the redo branch', () => {
    const h = new UndoStack<string>();
    expect([h.canUndo, h.canRedo]).toEqual([false, false]);
    expect(h.undo('empty')).toBeNull();
    h.push('empty'); // stroke 1 drawn: now 'one'
    h.push('one'); // stroke 2: now 'two'
    expect(h.undo('two')).toBe('one');
    expect(h.undo('one')).toBe('empty');
    expect(h.undo('empty')).toBeNull();
    expect([h.canUndo, h.canRedo]).toEqual([false, true]);
    expect(h.redo('empty')).toBe('one');
    expect(h.redo('one')).toBe('two');
    expect(h.redo('two')).toBeNull();
    expect(h.undo('two')).toBe('one');
    h.push('one'); // invert: a new step from 'one'
    expect(h.canRedo).toBe(false);
    expect(h.undo('inverted')).toBe('one');
    h.reset();
    expect([h.canUndo, h.canRedo]).toEqual([false, false]);
  });

  it('keeps at most `limit` steps, dropping the oldest', () => {
    const h = new UndoStack<number>(3);
    for (let i = 0; i < 5; i++) h.push(i);
    expect([h.undo(5), h.undo(4), h.undo(3), h.undo(2)]).toEqual([4, 3, 2, null]);
  });
});

describe('historyKey', () => {
  const k = (key: string, mods: Partial<{ ctrlKey: boolean; metaKey: boolean; shiftKey: boolean; altKey: boolean }> = {}) =>
    historyKey({ key, ctrlKey: false, metaKey: false, shiftKey: false, altKey: false, ...mods });
  it('Ctrl/Cmd+Z undoes; Ctrl+Shift+Z and Ctrl+Y redo; nothing else', () => {
    expect(k('z', { ctrlKey: true })).toBe('undo');
    expect(k('z', { metaKey: true })).toBe('undo');
    expect(k('Z', { ctrlKey: true, shiftKey: true })).toBe('redo');
    expect(k('y', { ctrlKey: true })).toBe('redo');
    expect(k('z')).toBeNull();
    expect(k('z', { ctrlKey: true, altKey: true })).toBeNull();
    expect(k('x', { ctrlKey: true })).toBeNull();
  });
});

/** A w x h mask: 255 inside the rectangle [x0, x1) x [y0, y1). */
const rect = (w: number, h: number, x0: number, x1: number, y0: number, y1: number) =>
  Uint8Array.from({ length: w * h }, (_, i) => (i % w >= x0 && i % w < x1 && Math.floor(i / w) >= y0 && Math.floor(i / w) < y1 ? 255 : 0));

describe('invert', () => {
  it('swaps repainted and kept, and twice is the mask again', () => {
    const m = rect(4, 3, 1, 3, 0, 2);
    expect(Array.from(invertMask(m))).toEqual(Array.from(m, (v) => 255 - v));
    expect(Array.from(invertMask(invertMask(m)))).toEqual(Array.from(m));
  });
  it('the grey mask drawn as the overlay reads back as the same mask', () => {
    const m = rect(5, 4, 0, 2, 1, 4);
    const o = overlayFromGrey(m, OVERLAY_RGB);
    expect(Array.from(o.subarray(5 * 4, 5 * 4 + 4))).toEqual([...OVERLAY_RGB, 255]);
    expect(Array.from(maskFromOverlay(o, 5, 4))).toEqual(Array.from(m));
  });
});

describe('feather', () => {
  const W = 32;
  const H = 16;
  const m = rect(W, H, 8, 24, 0, H); // a band, full height: the edge runs along x = 8 and x = 24

  it('0 keeps the mask; a radius softens its edge over about that many pixels, symmetric, the far parts kept', () => {
    expect(featherMask(m, W, H, 0)).toBe(m);
    const f = featherMask(m, W, H, 2);
    const row = Array.from(f.subarray(4 * W, 5 * W));
    expect(row[0]).toBe(0);
    expect(row[16]).toBe(255);
    // the edge is half way between x = 7 (out) and x = 8 (in)
    expect(row[7]).toBeGreaterThan(70);
    expect(row[7]).toBeLessThan(128);
    expect(row[8]).toBeGreaterThan(128);
    expect(row[7] + row[8]).toBeGreaterThanOrEqual(254);
    expect(row[7] + row[8]).toBeLessThanOrEqual(256);
    // monotone across the edge, within 3 sigma of it
    for (let x = 2; x < 14; x++) expect(row[x + 1]).toBeGreaterThanOrEqual(row[x]);
    expect(row[1]).toBe(0);
    expect(row.slice(8 - 7, 8 + 7).filter((v) => v > 0 && v < 255).length).toBeGreaterThanOrEqual(8);
    // a wider radius: a wider soft band
    const soft = (r: number) => Array.from(featherMask(m, W, H, r).subarray(4 * W, 5 * W)).filter((v) => v > 5 && v < 250).length;
    expect(soft(3)).toBeGreaterThan(soft(1));
    // every row the same: the blur ran down the columns too, edges repeated (no dark rim at y = 0)
    expect(Array.from(f.subarray(0, W))).toEqual(row);
    expect(() => featherMask(m, W, H + 1, 2)).toThrow(/not 544/);
  });

  it('the PNG sent with a feather: greyscale, the mask size, the blurred bytes', async () => {
    const overlay = overlayFromGrey(m, OVERLAY_RGB);
    const png = (await maskPngFromOverlay(overlay, W, H, 2)) as Uint8Array;
    const view = new DataView(png.buffer, png.byteOffset);
    expect([view.getUint32(16), view.getUint32(20), png[24], png[25]]).toEqual([W, H, 8, 0]);
    const idatLen = view.getUint32(33);
    const raw = zlib.inflateSync(png.subarray(41, 41 + idatLen));
    const rows = Array.from({ length: H }, (_, y) => Array.from(raw.subarray(y * (W + 1) + 1, (y + 1) * (W + 1))));
    const f = featherMask(m, W, H, 2);
    expect(rows.flat()).toEqual(Array.from(f));
    expect(rows[0].some((v) => v > 0 && v < 255)).toBe(true);
  });
});
