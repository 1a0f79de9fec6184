// A latent frame as the preview's picture: the arch's colour factors where they fit the latent, else
// the plain channel preview, and a note saying which.
import { decodeFloat16, latentFrameToImage, projectLatent, type Frame, type PreviewImage, type PreviewSpec } from '@/utils/engineStream';

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
