// The preview's picture: the engine's decoded `preview` frames where it has a tiny autoencoder for the
// model (TAESD and kin: sharper than any projection), else a latent frame projected here with the arch's
// colour factors where they fit the latent, else the plain channel preview, and a note saying which.
import { decodeFloat16, latentFrameToImage, projectLatent, type Frame, type PreviewImage, type PreviewSpec } from '@/utils/engineStream';

/** Whether the engine decodes this arch's previews with a tiny autoencoder (its /models `preview.decoder`). */
export function engineDecodes(preview: PreviewSpec | null | undefined): boolean {
  return Boolean(preview?.decoder && preview.decoder !== 'projection');
}

/** The stream keys that pick the preview source: the engine's JPEG frames, or latents projected here. */
export function previewStream(preview: PreviewSpec | null | undefined): { latents: 'raw' | 'none'; preview_image?: 'jpeg' } {
  return engineDecodes(preview) ? { latents: 'none', preview_image: 'jpeg' } : { latents: 'raw' };
}

/** A `preview` frame's JPEG as RGBA pixels (the browser's own decoder). */
export async function decodePreviewFrame(frame: Frame): Promise<PreviewImage> {
  const bitmap = await createImageBitmap(new Blob([frame.payload as BlobPart], { type: 'image/jpeg' }));
  const canvas = document.createElement('canvas');
  canvas.width = bitmap.width;
  canvas.height = bitmap.height;
  const ctx = canvas.getContext('2d');
  if (!ctx) throw new Error('no 2D canvas');
  ctx.drawImage(bitmap, 0, 0);
  bitmap.close();
  const pixels = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  return { width: canvas.width, height: canvas.height, frames: [new Uint8ClampedArray(pixels)], mode: 'decoded' };
}

/** Project a latent frame; with factors that do not fit, fall back to the plain channel preview and say so. */
export function projectForPreview(frame: Frame, preview: PreviewSpec | null): { image: PreviewImage | null; note: string | null } {
  try {
    return { image: latentFrameToImage(frame, preview), note: null };
  } catch (err) {
    try {
      const h = frame.header;
      const image = projectLatent(decodeFloat16(frame.payload), h.shape as number[], String(h.layout ?? preview?.layout), null);
      return { image, note: `Preview without colour factors (${(err as Error).message}).` };
    } catch (err2) {
      return { image: null, note: `This latent cannot be previewed: ${(err2 as Error).message}` };
    }
  }
}
