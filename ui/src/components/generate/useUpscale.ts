'use client';
// A result's Upscale action: its file uploaded as an asset, then a `task: upscale` request (no
// diffusion; the model it names stays as it was) sent as Generate sends, so its result reaches the
// gallery like any other.
import { apiFetch, describeError } from '@/utils/api';
import { uploadAsset } from './assets';
import { upscaleSample, type UpscaleChoice } from './controlHires';
import { requestModel } from './requestBody';
import type { ArchInfo, GalleryItem, ModelForm } from './types';
import { fileUrl } from './useGallery';

const newRequestId = () => `ui-up-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

export function upscaleBody(arch: ArchInfo | null, model: ModelForm | null, item: GalleryItem, initImg: string, choice: UpscaleChoice) {
  // the form's model where there is one (what the engine holds, most likely), else the result's own
  const m = arch && model ? requestModel(arch, model) : item.model;
  return { model: m, sample: upscaleSample(initImg, choice, item.result.seed ?? 0), request_id: newRequestId(), stream: { latents: 'none', detach: true } };
}

export function useUpscale(
  job: { id: string; name: string } | null,
  forms: { arch: ArchInfo | null; model: ModelForm | null },
  generate: (job: { id: string; name: string }, body: { request_id: string } & Record<string, unknown>) => Promise<void>,
) {
  /** An error in words, or null once the request is sent. */
  return async (item: GalleryItem, choice: UpscaleChoice): Promise<string | null> => {
    if (!job) return 'Start the engine first: the upscale runs on it.';
    try {
      const res = await apiFetch(fileUrl(item));
      if (!res.ok) return `The file could not be read: ${(await describeError(res)).message}`;
      const id = await uploadAsset(job.id, await res.blob(), item.result.relpath.split('/').pop() || 'input.png');
      void generate(job, upscaleBody(forms.arch, forms.model, item, id, choice));
      return null;
    } catch (err) {
      return `The image could not be uploaded: ${(err as Error).message}`;
    }
  };
}
