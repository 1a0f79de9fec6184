// A seeded fuzz of FrameParser (the same properties as testing/tests/test_protocol.py's hypothesis
// fuzz of the engine's reader, under the same FRAME_LIMITS): valid streams round-trip however they
// are split; random and mutated bytes end as they do byte by byte, with FrameStreamError only;
// nesting parses iff within maxDepth; an over-limit length is refused on its prefix. A fixed seed
// and a modest budget: the same inputs every run, in well under a second or two.
import { describe, expect, it } from 'vitest';
import { FRAME_LIMITS, FrameParser, FrameStreamError, encodeFrame, type Frame, type FrameHeader } from '@/utils/engineStream';

/** mulberry32: a small seeded PRNG, so a failure names an input that reproduces. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)); // inclusive
  const pick = <T>(xs: readonly T[]): T => xs[int(0, xs.length - 1)];
  const bytes = (n: number) => Uint8Array.from({ length: n }, () => int(0, 255));
  return { next, int, pick, bytes };
}
type Rng = ReturnType<typeof prng>;

const TYPES = ['start', 'status', 'progress', 'latent', 'result', 'error', 'end'] as const;
const ALPHABET = ['a', 'Z', '0', ' ', '"', '\\', '[', '{', '}', ']', 'ü', '✓', '\n', '\u0000', '\ud83d\ude00', '\ud800'];

function text(rng: Rng, max: number): string {
  return Array.from({ length: rng.int(0, max) }, () => rng.pick(ALPHABET)).join('');
}

function json(rng: Rng, depth: number): unknown {
  const kind = rng.int(0, depth > 0 ? 6 : 4);
  switch (kind) {
    case 0:
      return rng.pick([null, true, false]);
    case 1:
      return rng.int(-(2 ** 31), 2 ** 31);
    case 2:
      return (rng.next() - 0.5) * 10 ** rng.int(-5, 300) || 0; // no -0: JSON has none
    case 3:
    case 4:
      return text(rng, 12);
    case 5:
      return Array.from({ length: rng.int(0, 4) }, () => json(rng, depth - 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = rng.int(0, 4); i > 0; i--) o[`k${text(rng, 4)}`] = json(rng, depth - 1);
      return o;
    }
  }
}

function randomFrames(rng: Rng): Frame[] {
  return Array.from({ length: rng.int(1, 4) }, () => {
    const header: FrameHeader = { type: rng.next() < 0.8 ? rng.pick(TYPES) : text(rng, 8), request_id: text(rng, 16) };
    for (let i = rng.int(0, 3); i > 0; i--) header[`x${text(rng, 6)}`] = json(rng, 3);
    return { header, payload: rng.bytes(rng.int(0, 64)) };
  });
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** The frames the parser handed out before any FrameStreamError, and that error's message (null for a clean end). */
function parse(chunks: Uint8Array[], limits = {}): { frames: Frame[]; error: string | null } {
  const parser = new FrameParser(limits);
  const frames: Frame[] = [];
  try {
    for (const chunk of chunks) frames.push(...parser.push(chunk));
    parser.finish();
  } catch (err) {
    if (!(err instanceof FrameStreamError)) throw err; // anything else fails the test
    return { frames, error: err.message };
  }
  return { frames, error: null };
}

function split(data: Uint8Array, rng: Rng): Uint8Array[] {
  const cuts = [...new Set(Array.from({ length: rng.int(0, 6) }, () => rng.int(0, data.length)))].sort((a, b) => a - b);
  return [0, ...cuts].map((from, i) => data.subarray(from, i < cuts.length ? cuts[i] : data.length));
}

const bytewise = (data: Uint8Array) => Array.from({ length: data.length }, (_, i) => data.subarray(i, i + 1));

/** However the input is split, the parser ends as it does byte by byte: the same error or none, the same frames. */
function agreesWithBytewise(data: Uint8Array, rng: Rng): void {
  const limits = { maxPayloadBytes: 1 << 12 };
  const ref = parse(bytewise(data), limits);
  const got = parse(split(data, rng), limits);
  expect(got.error === null).toBe(ref.error === null);
  expect(got.frames).toEqual(ref.frames.slice(0, got.frames.length));
  if (got.error === null) expect(got.frames).toEqual(ref.frames);
  for (const { header, payload } of got.frames) {
    expect(typeof header.type === 'string' && typeof header.request_id === 'string').toBe(true);
    expect(payload.length).toBeLessThanOrEqual(1 << 12);
  }
}

const EXAMPLES = 150;

describe('FrameParser fuzz (seeded)', () => {
  it('round-trips valid streams, whole and randomly split', () => {
    const rng = prng(1);
    for (let n = 0; n < EXAMPLES; n++) {
      const frames = randomFrames(rng);
      const data = concat(frames.map((f) => encodeFrame(f.header, f.payload)));
      expect(parse([data]), `example ${n}`).toEqual({ frames, error: null });
      expect(parse(split(data, rng)), `example ${n}`).toEqual({ frames, error: null });
    }
  });

  it('round-trips valid streams split at every boundary; a cut-short stream is an error at its end', () => {
    const rng = prng(2);
    for (let n = 0; n < 40; n++) {
      const frames = randomFrames(rng);
      const parts = frames.map((f) => encodeFrame(f.header, f.payload));
      const data = concat(parts);
      const ends = new Set([0]);
      parts.reduce((o, p) => (ends.add(o + p.length), o + p.length), 0);
      // one expect per example (an expect per cut is most of the run time): the cuts that misbehave
      const expected = JSON.stringify(frames);
      const bad: string[] = [];
      for (let cut = 0; cut <= data.length; cut++) {
        const whole = parse([data.subarray(0, cut), data.subarray(cut)]);
        if (whole.error !== null || JSON.stringify(whole.frames) !== expected) bad.push(`cut ${cut}: ${whole.error}`);
        const short = parse([data.subarray(0, cut)]);
        if (JSON.stringify(short.frames) !== JSON.stringify(frames.slice(0, short.frames.length))) bad.push(`cut ${cut} short: frames`);
        if ((short.error === null) !== ends.has(cut)) bad.push(`cut ${cut} short: ${short.error}`);
      }
      expect(bad, `example ${n}`).toEqual([]);
      expect(parse(bytewise(data))).toEqual({ frames, error: null });
    }
  });

  it('random bytes: FrameStreamError or frames, the same however split', () => {
    const rng = prng(3);
    for (let n = 0; n < EXAMPLES; n++) agreesWithBytewise(rng.bytes(rng.int(0, 200)), rng);
  });

  it('mutated valid streams: FrameStreamError or frames, the same however split', () => {
    const rng = prng(4);
    for (let n = 0; n < EXAMPLES; n++) {
      const data = Array.from(concat(randomFrames(rng).map((f) => encodeFrame(f.header, f.payload))));
      for (let e = rng.int(1, 4); e > 0; e--) {
        const at = rng.int(0, data.length);
        const op = rng.pick(['flip', 'insert', 'delete'] as const);
        if (op === 'insert') data.splice(at, 0, rng.int(0, 255));
        else if (at < data.length) {
          if (op === 'flip') data[at] ^= rng.int(1, 255);
          else data.splice(at, 1);
        }
      }
      if (rng.int(0, 2) === 0) data.length = rng.int(0, data.length);
      agreesWithBytewise(Uint8Array.from(data), rng);
    }
  });

  it('nesting parses iff within maxDepth; brackets inside strings never count', () => {
    const rng = prng(5);
    for (let n = 0; n < EXAMPLES; n++) {
      const depth = n < 2 ? [2000, 100_000][n] : rng.int(1, 3 * FRAME_LIMITS.maxDepth);
      const kinds = Array.from({ length: rng.int(1, 8) }, () => rng.pick(['[', '{']));
      const opens = Array.from({ length: depth - 1 }, (_, i) => kinds[i % kinds.length]);
      let value =
        opens.map((o) => (o === '[' ? '[' : '{"k":')).join('') + '0' + opens.reverse().map((o) => (o === '[' ? ']' : '}')).join('');
      const inString = rng.next() < 0.3;
      if (inString) value = JSON.stringify(value);
      const header = new TextEncoder().encode(`{"type":"x","request_id":"r","v":${value}}`);
      const frame = new Uint8Array(4 + header.length + 8);
      new DataView(frame.buffer).setUint32(0, header.length, true);
      frame.set(header, 4);
      const got = parse([frame]);
      if (depth <= FRAME_LIMITS.maxDepth || inString) expect(got.error, `depth ${depth}`).toBeNull();
      else expect(got.error, `depth ${depth}`).toMatch(/nests deeper/);
    }
  });

  it('a length over its limit is refused on its prefix; one within it waits for its bytes', () => {
    const rng = prng(6);
    const header = new TextEncoder().encode('{"type":"latent","request_id":"r"}');
    for (let n = 0; n < EXAMPLES; n++) {
      const hlen = n % 2 ? rng.int(0, 2 ** 32 - 1) : rng.int(0, 2 * FRAME_LIMITS.maxHeaderBytes);
      const prefix = new Uint8Array(4);
      new DataView(prefix.buffer).setUint32(0, hlen, true);
      const h = parse([prefix]);
      if (hlen > FRAME_LIMITS.maxHeaderBytes || hlen === 0) expect(h.error).toMatch(/header length/);
      else expect(h.error).toMatch(/stream ended inside a frame/);

      const hi = n % 3 === 0 ? rng.int(0, 2 ** 32 - 1) : 0;
      const lo = rng.pick([rng.int(0, 2 ** 32 - 1), rng.int(0, 64), FRAME_LIMITS.maxPayloadBytes, FRAME_LIMITS.maxPayloadBytes + 1]);
      const plen = hi * 2 ** 32 + lo;
      const frame = new Uint8Array(4 + header.length + 8 + 16);
      const dv = new DataView(frame.buffer);
      dv.setUint32(0, header.length, true);
      frame.set(header, 4);
      dv.setUint32(4 + header.length, lo, true);
      dv.setUint32(8 + header.length, hi, true);
      const parser = new FrameParser();
      if (plen > FRAME_LIMITS.maxPayloadBytes) {
        expect(() => parser.push(frame), `payload length ${plen}`).toThrow(/payload length/);
      } else {
        const got = parser.push(frame.subarray(0, 12 + header.length + Math.min(plen, 16)));
        expect(got.length, `payload length ${plen}`).toBe(plen <= 16 ? 1 : 0);
      }
    }
  });
});
