// The engine's binary frame stream (docs/engine_api.md, "Frames") and the latent -> RGB preview.
//
// A frame is: u32 LE header_len | UTF-8 JSON header | u64 LE payload_len | payload.
// FrameParser is incremental: push() any chunk split at any byte, get whole frames back.
// projectLatent() turns a latent frame into RGBA pixels using only the start frame's preview
// block (rgb_factors / rgb_bias): a channels x 3 matmul plus bias per pixel, no per-arch code.

export interface FrameHeader {
  type: string;
  request_id: string;
  [key: string]: unknown;
}

export interface Frame {
  header: FrameHeader;
  payload: Uint8Array;
}

export class FrameStreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FrameStreamError';
  }
}

// The limits a frame stream is held to, by FrameParser and encodeFrame alike. The engine's
// extensions_built_in/inference_engine/protocol.py (MAX_HEADER, MAX_PAYLOAD, MAX_DEPTH) holds the same
// three numbers, so a frame one side accepts the other does too: change both together (each side's
// tests compare them).
export const FRAME_LIMITS = {
  maxHeaderBytes: 1 << 20, // bytes of header JSON; the largest real header, a start frame, is a few KB
  maxPayloadBytes: 512 << 20, // bytes; a latent preview (a few float16 frames) is a few MB
  maxDepth: 64, // objects and arrays open at once (the header itself is 1); real headers nest 4 deep
} as const;

export interface FrameParserLimits {
  maxHeaderBytes: number;
  maxPayloadBytes: number;
}

/** Whether JSON bytes nest objects/arrays deeper than `limit` (brackets inside strings do not count); as protocol.py check_depth. */
function jsonDepthOver(bytes: Uint8Array, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next byte
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

type Need = 'header_len' | 'header' | 'payload_len' | 'payload';

export class FrameParser {
  private buf = new Uint8Array(1 << 16);
  private start = 0; // first unread byte in buf
  private end = 0; // one past the last byte in buf
  private need: Need = 'header_len';
  private headerLen = 0;
  private payloadLen = 0;
  private header: FrameHeader | null = null;
  private consumed = 0; // bytes of the stream fully parsed, for error messages
  private failed: FrameStreamError | null = null; // a broken stream stays broken
  private readonly limits: FrameParserLimits;
  // ignoreBOM: a BOM stays in the text and JSON.parse refuses it, as the engine's reader does
  private readonly decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

  /** Limits may be lowered (tests), never raised past FRAME_LIMITS. */
  constructor(limits: Partial<FrameParserLimits> = {}) {
    this.limits = {
      maxHeaderBytes: Math.min(limits.maxHeaderBytes ?? Infinity, FRAME_LIMITS.maxHeaderBytes),
      maxPayloadBytes: Math.min(limits.maxPayloadBytes ?? Infinity, FRAME_LIMITS.maxPayloadBytes),
    };
  }

  /** Bytes received but not yet part of a whole frame. */
  get pending(): number {
    return this.end - this.start;
  }

  /** Feed bytes; returns every frame they complete, in order. */
  push(chunk: Uint8Array): Frame[] {
    if (this.failed) throw new FrameStreamError(this.failed.message);
    this.append(chunk);
    const frames: Frame[] = [];
    try {
      for (;;) {
        const frame = this.next();
        if (!frame) break;
        frames.push(frame);
      }
    } catch (err) {
      if (err instanceof FrameStreamError) this.failed = err;
      throw err;
    }
    return frames;
  }

  /** The stream is over: throws when it stopped inside a frame. */
  finish(): void {
    if (this.failed) throw new FrameStreamError(this.failed.message);
    if (this.need !== 'header_len' || this.pending > 0) {
      const want = this.wanted();
      this.failed = new FrameStreamError(
        `stream ended inside a frame at byte ${this.consumed}: expected the ${this.need.replace('_', ' ')} ` +
          `(${want} bytes), got ${this.pending}`,
      );
      throw this.failed;
    }
  }

  private wanted(): number {
    switch (this.need) {
      case 'header_len':
        return 4;
      case 'header':
        return this.headerLen;
      case 'payload_len':
        return 8;
      case 'payload':
        return this.payloadLen;
    }
  }

  private append(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    if (this.end + chunk.length > this.buf.length) {
      const live = this.end - this.start;
      if (live + chunk.length <= this.buf.length && this.start > 0) {
        this.buf.copyWithin(0, this.start, this.end);
      } else {
        const grown = new Uint8Array(Math.max(this.buf.length * 2, live + chunk.length));
        grown.set(this.buf.subarray(this.start, this.end));
        this.buf = grown;
      }
      this.start = 0;
      this.end = live;
    }
    this.buf.set(chunk, this.end);
    this.end += chunk.length;
  }

  private take(n: number): Uint8Array {
    const out = this.buf.slice(this.start, this.start + n);
    this.start += n;
    this.consumed += n;
    if (this.start === this.end) this.start = this.end = 0;
    return out;
  }

  private next(): Frame | null {
    for (;;) {
      if (this.pending < this.wanted()) return null;
      switch (this.need) {
        case 'header_len': {
          const b = this.take(4);
          this.headerLen = new DataView(b.buffer).getUint32(0, true);
          if (this.headerLen === 0 || this.headerLen > this.limits.maxHeaderBytes) {
            throw new FrameStreamError(
              `bad frame at byte ${this.consumed - 4}: header length ${this.headerLen} is not in 1..${this.limits.maxHeaderBytes}` +
                ' (not an engine frame stream?)',
            );
          }
          this.need = 'header';
          break;
        }
        case 'header': {
          this.header = this.parseHeader(this.take(this.headerLen));
          this.need = 'payload_len';
          break;
        }
        case 'payload_len': {
          const dv = new DataView(this.take(8).buffer);
          const lo = dv.getUint32(0, true);
          const hi = dv.getUint32(4, true);
          const len = hi * 2 ** 32 + lo;
          if (hi >= 2 ** 21 || len > this.limits.maxPayloadBytes) {
            throw new FrameStreamError(
              `bad ${this.header?.type} frame: payload length ${hi >= 2 ** 21 ? 'over 2^53' : len} exceeds ${this.limits.maxPayloadBytes} bytes`,
            );
          }
          this.payloadLen = len;
          this.need = 'payload';
          break;
        }
        case 'payload': {
          const payload = this.take(this.payloadLen);
          const header = this.header as FrameHeader;
          this.header = null;
          this.need = 'header_len';
          return { header, payload };
        }
      }
    }
  }

  private parseHeader(bytes: Uint8Array): FrameHeader {
    const at = this.consumed - bytes.length;
    if (jsonDepthOver(bytes, FRAME_LIMITS.maxDepth)) {
      throw new FrameStreamError(`bad frame header at byte ${at}: nests deeper than ${FRAME_LIMITS.maxDepth} levels`);
    }
    let text: string;
    try {
      text = this.decoder.decode(bytes);
    } catch {
      throw new FrameStreamError(`bad frame header at byte ${at}: not valid UTF-8`);
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new FrameStreamError(`bad frame header at byte ${at}: not JSON (${(err as Error).message}): ${text.slice(0, 80)}`);
    }
    if (!value || typeof value !== 'object' || Array.isArray(value)) {
      throw new FrameStreamError(`bad frame header at byte ${at}: expected a JSON object, got ${text.slice(0, 80)}`);
    }
    const h = value as Record<string, unknown>;
    if (typeof h.type !== 'string' || typeof h.request_id !== 'string') {
      throw new FrameStreamError(`bad frame header at byte ${at}: "type" and "request_id" must be strings: ${text.slice(0, 120)}`);
    }
    return h as FrameHeader;
  }
}

/** Encode one frame (the engine's format, held to FRAME_LIMITS); used by tests and fakes. */
export function encodeFrame(header: FrameHeader, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  let text: string;
  try {
    text = JSON.stringify(header);
  } catch (err) {
    throw new FrameStreamError(`frame header cannot be encoded: ${(err as Error).message}`);
  }
  const h = new TextEncoder().encode(text);
  if (h.length > FRAME_LIMITS.maxHeaderBytes) {
    throw new FrameStreamError(`frame header is ${h.length} bytes, over the ${FRAME_LIMITS.maxHeaderBytes} limit`);
  }
  if (jsonDepthOver(h, FRAME_LIMITS.maxDepth)) {
    throw new FrameStreamError(`frame header nests deeper than ${FRAME_LIMITS.maxDepth} levels`);
  }
  if (payload.length > FRAME_LIMITS.maxPayloadBytes) {
    throw new FrameStreamError(`frame payload is ${payload.length} bytes, over the ${FRAME_LIMITS.maxPayloadBytes} limit`);
  }
  const out = new Uint8Array(4 + h.length + 8 + payload.length);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, h.length, true);
  out.set(h, 4);
  dv.setUint32(4 + h.length, payload.length % 2 ** 32, true);
  dv.setUint32(8 + h.length, Math.floor(payload.length / 2 ** 32), true);
  out.set(payload, 12 + h.length);
  return out;
}

/**
 * Read a frame stream to its end, calling onFrame for each frame as it arrives.
 * Resolves with whether an `end` frame was seen; rejects on malformed input or a read error.
 */
export async function readFrames(body: ReadableStream<Uint8Array>, onFrame: (frame: Frame) => void): Promise<{ sawEnd: boolean }> {
  const parser = new FrameParser();
  const reader = body.getReader();
  let sawEnd = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      for (const frame of parser.push(value)) {
        if (frame.header.type === 'end') sawEnd = true;
        onFrame(frame);
      }
    }
  } catch (err) {
    await reader.cancel().catch(() => undefined);
    throw err;
  } finally {
    reader.releaseLock();
  }
  parser.finish();
  return { sawEnd };
}

// ---- float16 ---------------------------------------------------------------------------

let halfTable: Float32Array | null = null;

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** Little-endian IEEE float16 bytes -> Float32Array. */
export function decodeFloat16(bytes: Uint8Array): Float32Array {
  if (bytes.length % 2 !== 0) throw new FrameStreamError(`float16 payload has an odd length (${bytes.length} bytes)`);
  if (!halfTable) {
    halfTable = new Float32Array(65536);
    for (let i = 0; i < 65536; i++) halfTable[i] = halfToFloat(i);
  }
  const out = new Float32Array(bytes.length / 2);
  for (let i = 0, j = 0; i < out.length; i++, j += 2) out[i] = halfTable[bytes[j] | (bytes[j + 1] << 8)];
  return out;
}

/** Float32 -> float16 bits (round to nearest even); for tests and fakes. */
export function floatToHalfBits(value: number): number {
  const f32 = new Float32Array([value]);
  const x = new Uint32Array(f32.buffer)[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++; // a carry into the exponent is right
  return sign | half;
}

export function encodeFloat16(values: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  for (let i = 0; i < values.length; i++) {
    const h = floatToHalfBits(values[i]);
    out[2 * i] = h & 0xff;
    out[2 * i + 1] = h >> 8;
  }
  return out;
}

// ---- latent -> pixels ------------------------------------------------------------------

export type LatentLayout = 'BCHW' | 'BCFHW' | 'BLC';

export interface PreviewSpec {
  family?: string | null;
  layout?: string | null;
  rgb_factors?: number[][] | null;
  rgb_bias?: number[] | null;
  /** the tiny autoencoder that fits this latent space (taesd, taef1…), whether or not the engine has it */
  tae?: string | null;
  /** what makes the engine's preview images: that autoencoder where its file is there, else "projection" */
  decoder?: string | null;
}

export interface PreviewImage {
  width: number;
  height: number;
  /** RGBA, width*height*4 bytes each: one per video frame, else one. */
  frames: Uint8ClampedArray[];
  /** How the pixels were made. */
  mode: 'rgb_factors' | 'channels' | 'heatmap' | 'decoded';
}

const LAYOUT_RANK: Record<LatentLayout, number> = { BCHW: 4, BCFHW: 5, BLC: 3 };

const toByte = (unit: number) => Math.round(Math.min(Math.max(unit, 0), 1) * 255);

function checkShape(data: Float32Array, shape: number[], layout: string): asserts layout is LatentLayout {
  if (!(layout in LAYOUT_RANK)) throw new FrameStreamError(`unknown latent layout "${layout}" (expected BCHW, BCFHW or BLC)`);
  const rank = LAYOUT_RANK[layout as LatentLayout];
  if (shape.length !== rank || !shape.every((n) => Number.isInteger(n) && n > 0)) {
    throw new FrameStreamError(`latent shape [${shape}] does not fit layout ${layout} (${rank} positive dims)`);
  }
  const count = shape.reduce((a, b) => a * b, 1);
  if (count !== data.length) {
    throw new FrameStreamError(`latent shape [${shape}] needs ${count} values, the payload has ${data.length}`);
  }
}

/**
 * Project batch item 0 of a latent to RGBA (docs/engine_api.md, "Preview projection").
 * BCHW/BCFHW with rgb_factors: rgb = sum_c latent[c] * factors[c] + bias, byte = round(clamp((rgb+1)/2) * 255).
 * Without factors: channels 0,1,2 (channel 0 repeated when C < 3), each min/max-normalised per frame.
 * BLC (audio): a channel x time heatmap (row = channel, column = time), normalised by the global min/max.
 */
export function projectLatent(data: Float32Array, shape: number[], layout: string, preview: PreviewSpec | null): PreviewImage {
  checkShape(data, shape, layout);
  if (layout === 'BLC') return heatmap(data, shape[1], shape[2]);
  const [, C] = shape;
  const F = layout === 'BCFHW' ? shape[2] : 1;
  const H = shape[shape.length - 2];
  const W = shape[shape.length - 1];
  const factors = preview?.rgb_factors ?? null;
  if (factors) {
    if (factors.length !== C || !factors.every((row) => Array.isArray(row) && row.length === 3)) {
      throw new FrameStreamError(`rgb_factors is ${factors.length}x${factors[0]?.length ?? 0}, the latent has ${C} channels (need ${C}x3)`);
    }
    const bias = preview?.rgb_bias ?? [0, 0, 0];
    if (bias.length !== 3) throw new FrameStreamError(`rgb_bias needs 3 values, got ${bias.length}`);
  }
  const frames: Uint8ClampedArray[] = [];
  for (let f = 0; f < F; f++) {
    // value of channel c at pixel p of frame f (batch 0)
    const base = (c: number) => (c * F + f) * H * W;
    frames.push(factors ? projectFactors(data, C, H * W, base, factors, preview?.rgb_bias ?? [0, 0, 0]) : projectChannels(data, C, H * W, base));
  }
  return { width: W, height: H, frames, mode: factors ? 'rgb_factors' : 'channels' };
}

function projectFactors(
  data: Float32Array,
  C: number,
  P: number,
  base: (c: number) => number,
  factors: number[][],
  bias: number[],
): Uint8ClampedArray {
  const acc = new Float64Array(P * 3);
  for (let p = 0; p < P; p++) {
    acc[3 * p] = bias[0];
    acc[3 * p + 1] = bias[1];
    acc[3 * p + 2] = bias[2];
  }
  for (let c = 0; c < C; c++) {
    const o = base(c);
    const [fr, fg, fb] = factors[c];
    for (let p = 0; p < P; p++) {
      const v = data[o + p];
      acc[3 * p] += v * fr;
      acc[3 * p + 1] += v * fg;
      acc[3 * p + 2] += v * fb;
    }
  }
  const out = new Uint8ClampedArray(P * 4);
  for (let p = 0; p < P; p++) {
    out[4 * p] = toByte((acc[3 * p] + 1) / 2);
    out[4 * p + 1] = toByte((acc[3 * p + 1] + 1) / 2);
    out[4 * p + 2] = toByte((acc[3 * p + 2] + 1) / 2);
    out[4 * p + 3] = 255;
  }
  return out;
}

function projectChannels(data: Float32Array, C: number, P: number, base: (c: number) => number): Uint8ClampedArray {
  const out = new Uint8ClampedArray(P * 4);
  const channels = [0, C > 1 ? 1 : 0, C > 2 ? 2 : 0];
  channels.forEach((c, k) => {
    const o = base(c);
    let lo = Infinity;
    let hi = -Infinity;
    for (let p = 0; p < P; p++) {
      const v = data[o + p];
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    const span = hi - lo;
    for (let p = 0; p < P; p++) out[4 * p + k] = span > 0 ? toByte((data[o + p] - lo) / span) : 0;
  });
  for (let p = 0; p < P; p++) out[4 * p + 3] = 255;
  return out;
}

function heatmap(data: Float32Array, L: number, C: number): PreviewImage {
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < L * C; i++) {
    if (data[i] < lo) lo = data[i];
    if (data[i] > hi) hi = data[i];
  }
  const span = hi - lo;
  const out = new Uint8ClampedArray(L * C * 4);
  for (let t = 0; t < L; t++) {
    for (let c = 0; c < C; c++) {
      const v = span > 0 ? toByte((data[t * C + c] - lo) / span) : 0;
      const p = 4 * (c * L + t); // row = channel, column = time
      out[p] = out[p + 1] = out[p + 2] = v;
      out[p + 3] = 255;
    }
  }
  return { width: L, height: C, frames: [out], mode: 'heatmap' };
}

/** Decode a latent frame and project it; one call for the preview canvas. */
export function latentFrameToImage(frame: Frame, preview: PreviewSpec | null): PreviewImage {
  const h = frame.header;
  if (h.dtype !== undefined && h.dtype !== 'float16') {
    throw new FrameStreamError(`latent dtype "${String(h.dtype)}" is not supported (expected float16)`);
  }
  if (!Array.isArray(h.shape)) throw new FrameStreamError('latent frame has no shape');
  const layout = String(h.layout ?? preview?.layout ?? '');
  return projectLatent(decodeFloat16(frame.payload), h.shape as number[], layout, preview);
}
