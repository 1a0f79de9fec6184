// The mask the painter uploads: overlay alpha -> a binary greyscale PNG (white = repaint) at the
// overlay's size, read back here chunk by chunk (CRCs by node's zlib, the pixels inflated).
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  MASK_ALPHA_THRESHOLD,
  crc32,
  encodePng,
  maskFromOverlay,
  maskPngFromOverlay,
  overlayFromMask,
  overlayHasPaint,
  toImagePoint,
} from '@/components/generate/maskPng';

/** Parse a PNG made by encodePng: IHDR, the inflated unfiltered rows; every chunk's CRC checked. */
function readPng(png: Uint8Array) {
  expect(Array.from(png.subarray(0, 8))).toEqual([137, 80, 78, 71, 13, 10, 26, 10]);
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  const chunks: { type: string; data: Uint8Array }[] = [];
  let at = 8;
  while (at < png.length) {
    const len = view.getUint32(at);
    const type = String.fromCharCode(...png.subarray(at + 4, at + 8));
    const data = png.subarray(at + 8, at + 8 + len);
    expect(view.getUint32(at + 8 + len), `${type} CRC`).toBe(zlib.crc32(png.subarray(at + 4, at + 8 + len)));
    chunks.push({ type, data });
    at += 12 + len;
  }
  expect(chunks.map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
  const ih = new DataView(chunks[0].data.buffer, chunks[0].data.byteOffset, 13);
  const width = ih.getUint32(0);
  const height = ih.getUint32(4);
  const [depth, colorType, compression, filter, interlace] = Array.from(chunks[0].data.subarray(8, 13));
  const channels = { 0: 1, 2: 3, 6: 4 }[colorType] as number;
  const raw = zlib.inflateSync(chunks[1].data); // zlib-wrapped, as PNG wants
  const stride = width * channels;
  expect(raw.length).toBe((stride + 1) * height);
  const pixels = new Uint8Array(stride * height);
  for (let y = 0; y < height; y++) {
    expect(raw[y * (stride + 1)], 'row filter').toBe(0);
    pixels.set(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)), y * stride);
  }
  return { width, height, depth, colorType, compression, filter, interlace, pixels };
}

/** An RGBA overlay w x h with alpha from fn(x, y). */
function overlay(w: number, h: number, alpha: (x: number, y: number) => number): Uint8ClampedArray {
  const o = new Uint8ClampedArray(w * h * 4);
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) o.set([255, 56, 56, alpha(x, y)], (y * w + x) * 4);
  return o;
}

describe('overlay <-> mask', () => {
  it('binary: alpha at or over the threshold is white, the anti-aliased rim below it black', () => {
    const o = overlay(4, 2, (x, y) => [0, MASK_ALPHA_THRESHOLD - 1, MASK_ALPHA_THRESHOLD, 255][x] * (y === 0 ? 1 : 0));
    expect(Array.from(maskFromOverlay(o, 4, 2))).toEqual([0, 0, 255, 255, 0, 0, 0, 0]);
    expect(() => maskFromOverlay(o, 3, 2)).toThrow(/not 24/);
    expect(overlayHasPaint(o)).toBe(true);
    expect(overlayHasPaint(overlay(4, 2, () => 100))).toBe(false);
  });

  it('a stored mask shown again: light pixels painted, dark ones clear; round trip exact', () => {
    const w = 5;
    const h = 3;
    const grey = Uint8Array.from({ length: w * h }, (_, i) => (i % 3 === 0 ? 255 : i % 3 === 1 ? 200 : 20));
    const rgba = new Uint8ClampedArray(w * h * 4);
    grey.forEach((g, i) => rgba.set([g, g, g, 255], i * 4));
    const shown = overlayFromMask(rgba);
    expect(Array.from(maskFromOverlay(shown, w, h))).toEqual(Array.from(grey, (g) => (g >= 128 ? 255 : 0)));
    expect(Array.from(shown.subarray(0, 8))).toEqual([255, 56, 56, 255, 255, 56, 56, 255]);
  });
});

describe('encodePng', () => {
  it('greyscale: 8-bit, colour type 0, the bytes given, every chunk CRC right', async () => {
    const w = 7;
    const h = 5;
    const data = Uint8Array.from({ length: w * h }, (_, i) => (i * 37) % 256);
    const png = readPng(await encodePng(w, h, 1, data));
    expect(png).toMatchObject({ width: 7, height: 5, depth: 8, colorType: 0, compression: 0, filter: 0, interlace: 0 });
    expect(Array.from(png.pixels)).toEqual(Array.from(data));
  });

  it('RGB and RGBA too; sizes checked', async () => {
    const rgb = Uint8Array.from({ length: 3 * 4 * 3 }, (_, i) => i);
    expect(readPng(await encodePng(3, 4, 3, rgb))).toMatchObject({ colorType: 2, pixels: rgb });
    const rgba = Uint8Array.from({ length: 2 * 2 * 4 }, (_, i) => 255 - i);
    expect(readPng(await encodePng(2, 2, 4, rgba))).toMatchObject({ colorType: 6, pixels: rgba });
    await expect(encodePng(3, 4, 3, rgb.subarray(1))).rejects.toThrow(/not 36/);
    await expect(encodePng(0, 4, 1, new Uint8Array(0))).rejects.toThrow(/bad PNG size/);
  });

  it('crc32 is the standard one', () => {
    const bytes = new TextEncoder().encode('IEND');
    expect(crc32(bytes)).toBe(0xae426082);
    expect(crc32(bytes)).toBe(zlib.crc32(bytes));
  });
});

describe('maskPngFromOverlay', () => {
  it('a disc painted on a 64x48 overlay: a 64x48 mask, white exactly inside it', async () => {
    const disc = (x: number, y: number) => ((x - 40) ** 2 + (y - 20) ** 2 <= 100 ? 255 : 0);
    const png = readPng((await maskPngFromOverlay(overlay(64, 48, disc), 64, 48)) as Uint8Array);
    expect([png.width, png.height, png.colorType]).toEqual([64, 48, 0]);
    for (let y = 0; y < 48; y++) for (let x = 0; x < 64; x++) expect(png.pixels[y * 64 + x]).toBe(disc(x, y));
  });

  it('nothing painted: no mask', async () => {
    expect(await maskPngFromOverlay(overlay(8, 8, () => 0), 8, 8)).toBeNull();
  });
});

describe('toImagePoint', () => {
  it('scales the pointer from the shown size to the image pixels', () => {
    const rect = { left: 100, top: 50, width: 256, height: 192 };
    expect(toImagePoint(100, 50, rect, 64, 48)).toEqual({ x: 0, y: 0 });
    expect(toImagePoint(228, 146, rect, 64, 48)).toEqual({ x: 32, y: 24 });
    expect(toImagePoint(356, 242, rect, 64, 48)).toEqual({ x: 64, y: 48 });
  });
});
