// The preview's source: the engine's decoded `preview` frames when it has a tiny autoencoder for the
// arch (GET /models `preview.decoder`), else latent frames projected here; a decoded frame replaces the
// picture unless a newer one is already shown.
import { describe, expect, it } from 'vitest';
import { applyFrame, IDLE } from '@/components/generate/generationView';
import { engineDecodes, previewStream } from '@/components/generate/previewProjection';
import { buildGenerateBody, modelDefaults, resolvedDefaults, sampleDefaults } from '@/components/generate/requestBody';
import { RequestBook } from '@/components/generate/requestBook';
import { showDecoded } from '@/components/generate/requestStreams';
import type { ArchInfo } from '@/components/generate/types';
import type { Frame, PreviewImage } from '@/utils/engineStream';
import { servedArch } from './archRow';

const withDecoder = (a: ArchInfo, decoder: string | null): ArchInfo => ({ ...a, preview: { ...a.preview, decoder } });

function body(a: ArchInfo) {
  const sample = sampleDefaults(resolvedDefaults(a, ''), a, {});
  return buildGenerateBody(a, modelDefaults(a), sample, 'r1', { detach: false, maxFrames: 8 });
}

const image = (n: number): PreviewImage => ({ width: 1, height: 1, frames: [new Uint8ClampedArray([n, n, n, 255])], mode: 'decoded' });
const frame = (step: number): Frame => ({ header: { type: 'preview', request_id: 'r1', step, total: 4, decoder: 'taesd' }, payload: new Uint8Array([0xff, 0xd8]) });

describe('the preview source', () => {
  it('the served rows say the autoencoder that fits and the projection when the engine has none', () => {
    const sd1 = servedArch('sd1');
    expect(sd1.preview.tae).toBe('taesd');
    expect(sd1.preview.decoder).toBe('projection');
    expect(servedArch('ltx').preview.tae).toBeNull();
    expect(engineDecodes(sd1.preview)).toBe(false);
  });

  it('asks for latents to project without a decoder, for the engine JPEGs with one', () => {
    const sd1 = servedArch('sd1');
    expect(body(sd1).stream).toMatchObject({ latents: 'raw', preview: 'x0', every_n_steps: 1 });
    expect(body(sd1).stream).not.toHaveProperty('preview_image');
    const decoded = body(withDecoder(sd1, 'taesd')).stream;
    expect(decoded).toMatchObject({ latents: 'none', preview_image: 'jpeg', every_n_steps: 1 });
    expect(previewStream(null)).toEqual({ latents: 'raw' });
    expect(previewStream({ decoder: 'taef1' })).toEqual({ latents: 'none', preview_image: 'jpeg' });
  });

  it('a decoded frame is the picture, an older one arriving late is not', () => {
    const v1 = applyFrame(IDLE, frame(2).header, { image: image(2), note: null });
    expect(v1.image?.mode).toBe('decoded');
    expect(v1.latentStep).toBe(2);
    const late = applyFrame(v1, frame(1).header, { image: image(1), note: null });
    expect(late).toBe(v1);
    expect(applyFrame(v1, frame(3).header, { image: image(3), note: null }).latentStep).toBe(3);
  });

  it('showDecoded draws once decoded, and says so when the image cannot be decoded', async () => {
    const views: unknown[] = [];
    const book = new RequestBook({ setView: (v: unknown) => views.push(v) } as never);
    const ctx = book.add({ requestId: 'r1', jobId: 'j', jobName: 'j', startedAt: 0, keepOnClose: false } as never, 'running');
    book.shown = ctx;
    await showDecoded(book, ctx, frame(1), async () => image(9));
    expect(ctx.view.image?.frames[0][0]).toBe(9);
    await showDecoded(book, ctx, frame(2), async () => {
      throw new Error('broken JPEG');
    });
    expect(ctx.view.image?.frames[0][0]).toBe(9);
    expect(ctx.view.previewNote).toMatch(/cannot be shown: broken JPEG/);
    expect(views.length).toBe(2);
  });
});
