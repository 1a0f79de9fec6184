import { describe, expect, it } from 'vitest';
import {
  FrameParser,
  FrameStreamError,
  decodeFloat16,
  encodeFloat16,
  encodeFrame,
  latentFrameToImage,
  projectLatent,
  readFrames,
  type Frame,
} from '@/utils/engineStream';

const RID = 'req-1';

function sampleStream(): { bytes: Uint8Array; frames: Frame[] } {
  const latentValues = [0.5, -0.25, 1, 0, 2, -1, 0.125, 0.75];
  const frames: Frame[] = [
    { header: { type: 'start', request_id: RID, modality: 'image', preview: { rgb_factors: null, rgb_bias: null } }, payload: new Uint8Array(0) },
    { header: { type: 'status', request_id: RID, stage: 'loading', message: 'Loading zimage — ünïcode ✓' }, payload: new Uint8Array(0) },
    { header: { type: 'progress', request_id: RID, step: 1, total: 2, elapsed: 0.1 }, payload: new Uint8Array(0) },
    { header: { type: 'latent', request_id: RID, step: 1, total: 2, layout: 'BCHW', shape: [1, 2, 2, 2], dtype: 'float16' }, payload: encodeFloat16(latentValues) },
    { header: { type: 'result', request_id: RID, url: '/outputs/a.png', relpath: 'a.png' }, payload: new Uint8Array(0) },
    { header: { type: 'end', request_id: RID, status: 'ok' }, payload: new Uint8Array(0) },
  ];
  const parts = frames.map((f) => encodeFrame(f.header, f.payload));
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    bytes.set(p, o);
    o += p.length;
  }
  return { bytes, frames };
}

function parseInPieces(bytes: Uint8Array, cuts: number[]): Frame[] {
  const parser = new FrameParser();
  const out: Frame[] = [];
  let prev = 0;
  for (const cut of [...cuts, bytes.length]) {
    out.push(...parser.push(bytes.subarray(prev, cut)));
    prev = cut;
  }
  parser.finish();
  return out;
}

describe('FrameParser', () => {
  const { bytes, frames } = sampleStream();

  it('parses a whole stream in one chunk', () => {
    expect(parseInPieces(bytes, [])).toEqual(frames);
  });

  it('parses the stream split at every single byte boundary', () => {
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(parseInPieces(bytes, [cut]), `split at byte ${cut}`).toEqual(frames);
    }
  });

  it('parses the stream fed one byte at a time', () => {
    const cuts = Array.from({ length: bytes.length - 1 }, (_, i) => i + 1);
    expect(parseInPieces(bytes, cuts)).toEqual(frames);
  });

  it('returns a frame as soon as its last byte arrives, not later', () => {
    const parser = new FrameParser();
    const first = encodeFrame(frames[0].header);
    expect(parser.push(first.subarray(0, first.length - 1))).toEqual([]);
    expect(parser.push(first.subarray(first.length - 1))).toHaveLength(1);
    expect(parser.pending).toBe(0);
  });

  it('keeps payload bytes exact (latent decodes to the encoded values)', () => {
    const latent = parseInPieces(bytes, [7, 100, 101])[3];
    expect(Array.from(decodeFloat16(latent.payload))).toEqual([0.5, -0.25, 1, 0, 2, -1, 0.125, 0.75]);
  });

  it('rejects a zero or oversized header length', () => {
    expect(() => new FrameParser().push(new Uint8Array([0, 0, 0, 0]))).toThrow(/header length 0/);
    expect(() => new FrameParser({ maxHeaderBytes: 100 }).push(new Uint8Array([0, 1, 0, 0]))).toThrow(FrameStreamError);
    // "HTTP" read as a length: someone sent text, not frames
    expect(() => new FrameParser().push(new TextEncoder().encode('HTTP/1.1 500'))).toThrow(/not an engine frame stream/);
  });

  it('rejects a header that is not JSON, not UTF-8, or lacks type/request_id', () => {
    const raw = (header: Uint8Array) => {
      const out = new Uint8Array(4 + header.length + 8);
      new DataView(out.buffer).setUint32(0, header.length, true);
      out.set(header, 4);
      return out;
    };
    const enc = (s: string) => new TextEncoder().encode(s);
    expect(() => new FrameParser().push(raw(enc('{not json')))).toThrow(/not JSON/);
    expect(() => new FrameParser().push(raw(new Uint8Array([0x7b, 0xff, 0xfe, 0x7d])))).toThrow(/not valid UTF-8/);
    expect(() => new FrameParser().push(raw(enc('[1,2]')))).toThrow(/expected a JSON object/);
    expect(() => new FrameParser().push(raw(enc('{"type":"end"}')))).toThrow(/"request_id" must be strings/);
  });

  it('rejects an absurd payload length', () => {
    const f = encodeFrame({ type: 'latent', request_id: RID });
    new DataView(f.buffer).setUint32(f.length - 4, 0xffffffff, true); // high word of u64
    expect(() => new FrameParser().push(f)).toThrow(/payload length over 2\^53/);
    const g = encodeFrame({ type: 'latent', request_id: RID });
    new DataView(g.buffer).setUint32(g.length - 8, 5000, true);
    expect(() => new FrameParser({ maxPayloadBytes: 4096 }).push(g)).toThrow(/payload length 5000 exceeds 4096/);
  });

  it('finish() reports a stream cut inside a frame', () => {
    const parser = new FrameParser();
    parser.push(bytes.subarray(0, 10));
    expect(() => parser.finish()).toThrow(/stream ended inside a frame/);
    const clean = new FrameParser();
    clean.push(bytes);
    expect(() => clean.finish()).not.toThrow();
  });
});

describe('readFrames', () => {
  it('reads frames from a ReadableStream as they arrive and sees the end frame', async () => {
    const { bytes, frames } = sampleStream();
    const seen: string[] = [];
    const body = new ReadableStream<Uint8Array>({
      start(ctrl) {
        for (let i = 0; i < bytes.length; i += 5) ctrl.enqueue(bytes.slice(i, i + 5));
        ctrl.close();
      },
    });
    const { sawEnd } = await readFrames(body, (f) => seen.push(f.header.type));
    expect(sawEnd).toBe(true);
    expect(seen).toEqual(frames.map((f) => f.header.type));
  });

  it('rejects a body cut mid-frame', async () => {
    const { bytes } = sampleStream();
    const body = new ReadableStream<Uint8Array>({
      start(ctrl) {
        ctrl.enqueue(bytes.slice(0, bytes.length - 3));
        ctrl.close();
      },
    });
    await expect(readFrames(body, () => undefined)).rejects.toThrow(/stream ended inside a frame/);
  });
});

describe('float16', () => {
  it('decodes special values and round-trips representable ones', () => {
    const vals = [0, -0, 1, -2, 65504, 2 ** -24, 0.333251953125, Infinity, -Infinity];
    expect(Array.from(decodeFloat16(encodeFloat16(vals)))).toEqual(vals);
    expect(Number.isNaN(decodeFloat16(new Uint8Array([0x01, 0x7e]))[0])).toBe(true);
    expect(() => decodeFloat16(new Uint8Array(3))).toThrow(/odd length/);
  });
});

// ---- projection, checked against values worked out by hand ----------------------------

const px = (img: { frames: Uint8ClampedArray[] }, frame: number, p: number) => Array.from(img.frames[frame].slice(4 * p, 4 * p + 4));

describe('projectLatent', () => {
  const factors = [
    [1, 0, 0.5],
    [0, 1, -0.5],
  ];
  const bias = [0.1, -0.1, 0];

  it('BCHW with rgb_factors: matmul + bias, then (x+1)/2 clamped to bytes', () => {
    // C=2, H=1, W=2. pixel0 = (c0=0.2, c1=0.4), pixel1 = (c0=-3, c1=0.6)
    const data = new Float32Array([0.2, -3, 0.4, 0.6]);
    const img = projectLatent(data, [1, 2, 1, 2], 'BCHW', { rgb_factors: factors, rgb_bias: bias });
    expect([img.width, img.height, img.frames.length, img.mode]).toEqual([2, 1, 1, 'rgb_factors']);
    // pixel0: r = 0.2+0.1 = 0.3 -> (1.3/2)*255 = 165.75 -> 166; g = 0.4-0.1 = 0.3 -> 166;
    //         b = 0.1-0.2 = -0.1 -> 0.45*255 = 114.75 -> 115
    expect(px(img, 0, 0)).toEqual([166, 166, 115, 255]);
    // pixel1: r = -3+0.1 = -2.9 -> clamp 0; g = 0.6-0.1 = 0.5 -> 191.25 -> 191; b = -1.5-0.3 = -1.8 -> 0
    expect(px(img, 0, 1)).toEqual([0, 191, 0, 255]);
  });

  it('BCHW without factors: channels 0,1,0 (C=2), each min/max-normalised', () => {
    const data = new Float32Array([1, 3, 2, 10, 20, 15]); // C=2, H=1, W=3
    const img = projectLatent(data, [1, 2, 1, 3], 'BCHW', { rgb_factors: null, rgb_bias: null });
    expect(img.mode).toBe('channels');
    // c0: 1,3,2 -> 0, 255, 127.5->128 ; c1: 10,20,15 -> 0, 255, 128
    expect(px(img, 0, 0)).toEqual([0, 0, 0, 255]);
    expect(px(img, 0, 1)).toEqual([255, 255, 255, 255]);
    expect(px(img, 0, 2)).toEqual([128, 128, 128, 255]);
  });

  it('BCHW fallback with C=1 repeats channel 0; a flat channel is 0', () => {
    expect(px(projectLatent(new Float32Array([0, 4]), [1, 1, 1, 2], 'BCHW', null), 0, 1)).toEqual([255, 255, 255, 255]);
    expect(px(projectLatent(new Float32Array([7, 7]), [1, 1, 1, 2], 'BCHW', null), 0, 1)).toEqual([0, 0, 0, 255]);
  });

  it('BCFHW with rgb_factors: each frame projected from its own slice', () => {
    // C=2, F=2, H=1, W=1: data[c][f]
    const data = new Float32Array([0.2 /*c0 f0*/, 0.6 /*c0 f1*/, 0.4 /*c1 f0*/, -0.2 /*c1 f1*/]);
    const img = projectLatent(data, [1, 2, 2, 1, 1], 'BCFHW', { rgb_factors: factors, rgb_bias: bias });
    expect(img.frames.length).toBe(2);
    expect(px(img, 0, 0)).toEqual([166, 166, 115, 255]); // same pixel as the BCHW case
    // f1: r = 0.6+0.1 = 0.7 -> 216.75 -> 217; g = -0.2-0.1 = -0.3 -> 89.25 -> 89; b = 0.3+0.1 = 0.4 -> 178.5 -> 179
    expect(px(img, 1, 0)).toEqual([217, 89, 179, 255]);
  });

  it('BCFHW without factors normalises per frame', () => {
    // C=1, F=2, H=1, W=2: frame0 = [0, 1], frame1 = [5, 3]
    const img = projectLatent(new Float32Array([0, 1, 5, 3]), [1, 1, 2, 1, 2], 'BCFHW', null);
    expect([px(img, 0, 0)[0], px(img, 0, 1)[0], px(img, 1, 0)[0], px(img, 1, 1)[0]]).toEqual([0, 255, 255, 0]);
  });

  it('BLC: a channel x time heatmap normalised by the global min/max', () => {
    // L=3 (time), C=2: data[t][c]
    const data = new Float32Array([0, 4, 1, 2, 3, 0.5]);
    const img = projectLatent(data, [1, 3, 2], 'BLC', null);
    expect([img.width, img.height, img.mode]).toEqual([3, 2, 'heatmap']);
    // global min 0, max 4. Row 0 = channel 0 over time: 0, 1, 3 -> 0, 63.75->64, 191.25->191
    expect([0, 1, 2].map((t) => px(img, 0, t)[0])).toEqual([0, 64, 191]);
    // Row 1 = channel 1: 4, 2, 0.5 -> 255, 127.5->128, 31.875->32
    expect([0, 1, 2].map((t) => px(img, 0, 3 + t)[0])).toEqual([255, 128, 32]);
  });

  it('uses batch item 0 only', () => {
    const data = new Float32Array([0, 1, /* batch 1: */ 9, 9]);
    const img = projectLatent(data, [2, 1, 1, 2], 'BCHW', null);
    expect([px(img, 0, 0)[0], px(img, 0, 1)[0]]).toEqual([0, 255]);
  });

  it('a batch (sample.batch_size > 1) shows item 0 in every layout, normalised over item 0 alone', () => {
    const video = projectLatent(new Float32Array([0, 1, 5, 3, /* batch 1: */ 90, -90, 90, -90]), [2, 1, 2, 1, 2], 'BCFHW', null);
    expect(video.frames.length).toBe(2);
    expect([px(video, 0, 0)[0], px(video, 0, 1)[0], px(video, 1, 0)[0], px(video, 1, 1)[0]]).toEqual([0, 255, 255, 0]);
    const audio = projectLatent(new Float32Array([0, 4, 1, 2, 3, 0.5, /* batch 1: */ 100, -100, 0, 0, 0, 0]), [2, 3, 2], 'BLC', null);
    expect([audio.width, audio.height]).toEqual([3, 2]);
    expect([0, 1, 2].map((t) => px(audio, 0, t)[0])).toEqual([0, 64, 191]);
  });

  it('raises clear errors on a bad shape, layout or factor table', () => {
    expect(() => projectLatent(new Float32Array(4), [1, 2, 2], 'BCHW', null)).toThrow(/does not fit layout BCHW/);
    expect(() => projectLatent(new Float32Array(5), [1, 1, 2, 2], 'BCHW', null)).toThrow(/needs 4 values, the payload has 5/);
    expect(() => projectLatent(new Float32Array(4), [1, 1, 2, 2], 'NCHW', null)).toThrow(/unknown latent layout/);
    expect(() => projectLatent(new Float32Array(4), [1, 1, 2, 2], 'BCHW', { rgb_factors: factors })).toThrow(/rgb_factors is 2x3, the latent has 1 channels/);
  });

  it('latentFrameToImage decodes float16 and refuses other dtypes', () => {
    const header = { type: 'latent', request_id: RID, layout: 'BCHW', shape: [1, 1, 1, 2], dtype: 'float16' };
    const img = latentFrameToImage({ header, payload: encodeFloat16([-1, 1]) }, null);
    expect([px(img, 0, 0)[0], px(img, 0, 1)[0]]).toEqual([0, 255]);
    expect(() => latentFrameToImage({ header: { ...header, dtype: 'bfloat16' }, payload: new Uint8Array(4) }, null)).toThrow(/not supported/);
  });
});
