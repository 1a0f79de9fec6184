// The mask painter's whole-mask edits on greyscale mask bytes (one per pixel, 255 = repaint): invert,
// feather, and the grey mask shown as the overlay again (pure; maskPng.ts turns them into the PNG).
/** The kept area becomes the repainted one and back. */
export function invertMask(grey: Uint8Array): Uint8Array {
  return grey.map((v) => 255 - v);
}

/** Gaussian weights for one side of a blur of standard deviation `sigma` (out to 3 sigma), summing to 1. */
function gaussianKernel(sigma: number): Float32Array {
  const half = Math.max(1, Math.ceil(sigma * 3));
  const k = new Float32Array(half * 2 + 1);
  let sum = 0;
  for (let i = -half; i <= half; i++) sum += k[i + half] = Math.exp(-(i * i) / (2 * sigma * sigma));
  return k.map((v) => v / sum);
}

/** One blur pass along rows (`step` 1) or columns (`step` width); edges repeat the border pixel. */
function blurPass(src: Float32Array, width: number, height: number, k: Float32Array, alongRows: boolean): Float32Array {
  const out = new Float32Array(src.length);
  const half = (k.length - 1) / 2;
  const [len, lines] = alongRows ? [width, height] : [height, width];
  for (let line = 0; line < lines; line++) {
    for (let i = 0; i < len; i++) {
      let acc = 0;
      for (let j = -half; j <= half; j++) {
        const t = Math.min(len - 1, Math.max(0, i + j));
        acc += k[j + half] * src[alongRows ? line * width + t : t * width + line];
      }
      out[alongRows ? line * width + i : i * width + line] = acc;
    }
  }
  return out;
}

/**
 * The mask's edge softened by a Gaussian blur of standard deviation `radius` px (at the mask's own
 * resolution): what A1111's mask_blur and CSS blur() call the radius, so the painter's preview
 * (a CSS blur scaled to the shown size) matches the PNG sent. 0 keeps the mask as it is.
 */
export function featherMask(grey: Uint8Array, width: number, height: number, radius: number): Uint8Array {
  if (grey.length !== width * height) throw new Error(`mask has ${grey.length} bytes, not ${width * height} (${width}x${height})`);
  if (!(radius > 0)) return grey;
  const k = gaussianKernel(radius);
  const blurred = blurPass(blurPass(Float32Array.from(grey), width, height, k, true), width, height, k, false);
  return Uint8Array.from(blurred, (v) => Math.round(Math.min(255, Math.max(0, v))));
}

/** Greyscale mask bytes -> the overlay the painter draws (painted where the mask is light). */
export function overlayFromGrey(grey: Uint8Array, color: [number, number, number]): Uint8ClampedArray<ArrayBuffer> {
  const out = new Uint8ClampedArray(grey.length * 4);
  for (let i = 0; i < grey.length; i++) {
    if (grey[i] < 128) continue;
    out.set([color[0], color[1], color[2], 255], i * 4);
  }
  return out;
}
