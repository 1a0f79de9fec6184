// The inpainting mask: what the painter draws (a coloured overlay with alpha) to the PNG the engine
// takes as `sample.mask_img` (8-bit greyscale, white = repaint, at the input image's resolution), and
// back (a stored mask shown as the overlay again). Pure: the canvas work is maskCanvas.ts.
import { featherMask } from './maskEdits';

/** Overlay pixels at or above this alpha are mask (white); below, kept (black). A binary mask: the
 * brush's anti-aliased rim does not become a half-repainted band. */
export const MASK_ALPHA_THRESHOLD = 128;

/** The overlay colour the painter draws the mask in (RGB). */
export const OVERLAY_RGB: [number, number, number] = [255, 56, 56];

/** RGBA overlay -> greyscale mask bytes (one per pixel): 255 where painted, 0 elsewhere. */
export function maskFromOverlay(rgba: ArrayLike<number>, width: number, height: number): Uint8Array {
  const n = width * height;
  if (rgba.length !== n * 4) throw new Error(`overlay has ${rgba.length} bytes, not ${n * 4} (${width}x${height} RGBA)`);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = rgba[i * 4 + 3] >= MASK_ALPHA_THRESHOLD ? 255 : 0;
  return out;
}

/** A stored mask's RGBA pixels (as a canvas reads them) -> the overlay: painted where the mask is light. */
export function overlayFromMask(rgba: ArrayLike<number>, color: [number, number, number] = OVERLAY_RGB): Uint8ClampedArray<ArrayBuffer> {
  const out = new Uint8ClampedArray(rgba.length);
  for (let i = 0; i < rgba.length; i += 4) {
    const light = 0.299 * rgba[i] + 0.587 * rgba[i + 1] + 0.114 * rgba[i + 2];
    if (light >= 128 && rgba[i + 3] >= MASK_ALPHA_THRESHOLD) {
      out[i] = color[0];
      out[i + 1] = color[1];
      out[i + 2] = color[2];
      out[i + 3] = 255;
    }
  }
  return out;
}

/** Whether any pixel of an RGBA overlay is mask. */
export function overlayHasPaint(rgba: ArrayLike<number>): boolean {
  for (let i = 3; i < rgba.length; i += 4) if (rgba[i] >= MASK_ALPHA_THRESHOLD) return true;
  return false;
}

/** A pointer position (client coordinates) on an element showing a width x height image -> image pixels. */
export function toImagePoint(
  clientX: number,
  clientY: number,
  rect: { left: number; top: number; width: number; height: number },
  width: number,
  height: number,
): { x: number; y: number } {
  const sx = rect.width > 0 ? width / rect.width : 1;
  const sy = rect.height > 0 ? height / rect.height : 1;
  return { x: (clientX - rect.left) * sx, y: (clientY - rect.top) * sy };
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** zlib (RFC 1950) of the bytes, by the platform's CompressionStream (browsers, Node 18+). */
async function zlibDeflate(bytes: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(new CompressionStream('deflate'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, data.length);
  for (let i = 0; i < 4; i++) out[4 + i] = type.charCodeAt(i);
  out.set(data, 8);
  view.setUint32(8 + data.length, crc32(out.subarray(4, 8 + data.length)));
  return out;
}

const COLOR_TYPE: Record<number, number> = { 1: 0, 3: 2, 4: 6 };

/** An 8-bit PNG of `channels` 1 (grey), 3 (RGB) or 4 (RGBA) interleaved bytes, rows unfiltered. */
export async function encodePng(width: number, height: number, channels: 1 | 3 | 4, data: Uint8Array): Promise<Uint8Array> {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) throw new Error(`bad PNG size ${width}x${height}`);
  const stride = width * channels;
  if (data.length !== stride * height) throw new Error(`PNG data has ${data.length} bytes, not ${stride * height}`);
  const raw = new Uint8Array((stride + 1) * height);
  for (let y = 0; y < height; y++) raw.set(data.subarray(y * stride, (y + 1) * stride), y * (stride + 1) + 1); // filter 0
  const ihdr = new Uint8Array(13);
  const v = new DataView(ihdr.buffer);
  v.setUint32(0, width);
  v.setUint32(4, height);
  ihdr[8] = 8;
  ihdr[9] = COLOR_TYPE[channels];
  const parts = [new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr), chunk('IDAT', await zlibDeflate(raw)), chunk('IEND', new Uint8Array(0))];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The mask PNG for an overlay: greyscale, white = repaint, the overlay's size, its edge feathered by
 * `feather` px (maskEdits.ts); null when nothing is painted. */
export async function maskPngFromOverlay(rgba: ArrayLike<number>, width: number, height: number, feather = 0): Promise<Uint8Array | null> {
  const grey = maskFromOverlay(rgba, width, height);
  if (!grey.some((v) => v)) return null;
  return encodePng(width, height, 1, featherMask(grey, width, height, feather));
}
