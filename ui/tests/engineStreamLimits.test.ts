// The frame parser's limits: the same three numbers as the engine's protocol.py, every breach a
// FrameStreamError (never another exception, never a frame the engine's own reader would refuse).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FRAME_LIMITS, FrameParser, FrameStreamError, encodeFrame } from '@/utils/engineStream';

const enc = (s: string) => new TextEncoder().encode(s);

/** A frame from raw header bytes and a declared payload length (no payload bytes). */
function raw(header: Uint8Array, payloadLen = 0): Uint8Array {
  const out = new Uint8Array(4 + header.length + 8);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, header.length, true);
  out.set(header, 4);
  dv.setUint32(4 + header.length, payloadLen % 2 ** 32, true);
  dv.setUint32(8 + header.length, Math.floor(payloadLen / 2 ** 32), true);
  return out;
}

function nested(levels: number): Uint8Array {
  // the header object is level 1
  return enc(`{"type":"x","request_id":"r","a":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`);
}

describe('frame limits', () => {
  it('are the engine protocol.py limits', () => {
    const py = readFileSync(new URL('../../extensions_built_in/inference_engine/protocol.py', import.meta.url), 'utf-8');
    const value = (name: string) => {
      const m = py.match(new RegExp(`^${name} = (\\d+) << (\\d+)|^${name} = (\\d+)`, 'm'));
      if (!m) throw new Error(`protocol.py has no ${name}`);
      return m[1] !== undefined ? Number(m[1]) * 2 ** Number(m[2]) : Number(m[3]);
    };
    expect(FRAME_LIMITS).toEqual({
      maxHeaderBytes: value('MAX_HEADER'),
      maxPayloadBytes: value('MAX_PAYLOAD'),
      maxDepth: value('MAX_DEPTH'),
    });
  });

  it('refuses a payload length over 512 MiB (it took up to 2 GiB)', () => {
    const header = enc('{"type":"latent","request_id":"r"}');
    expect(new FrameParser().push(raw(header, FRAME_LIMITS.maxPayloadBytes))).toEqual([]); // waits for it
    expect(() => new FrameParser().push(raw(header, FRAME_LIMITS.maxPayloadBytes + 1))).toThrow(FrameStreamError);
    expect(() => new FrameParser().push(raw(header, 2 ** 31))).toThrow(/payload length 2147483648 exceeds/);
  });

  it('refuses a header nested deeper than the limit, before JSON.parse sees it', () => {
    expect(new FrameParser().push(raw(nested(FRAME_LIMITS.maxDepth)))[0].header.type).toBe('x');
    expect(() => new FrameParser().push(raw(nested(FRAME_LIMITS.maxDepth + 1)))).toThrow(/nest/);
    expect(() => new FrameParser().push(raw(nested(100_000)))).toThrow(FrameStreamError);
    // brackets inside strings (escaped quotes too) do not count
    const s = JSON.stringify({ type: 'x', request_id: 'r', s: '[{'.repeat(1000) + '\\"['.repeat(10) });
    expect(new FrameParser().push(raw(enc(s)))[0].header.s).toMatch(/^\[\{\[\{/);
  });

  it('refuses a header the engine refuses: a BOM, NaN', () => {
    expect(() => new FrameParser().push(raw(enc('\ufeff{"type":"x","request_id":"r"}')))).toThrow(FrameStreamError);
    expect(() => new FrameParser().push(raw(enc('{"type":"x","request_id":"r","n":NaN}')))).toThrow(FrameStreamError);
  });

  it('stays broken after an error', () => {
    const parser = new FrameParser();
    expect(() => parser.push(raw(enc('{"type":"latent","request_id":"r"}'), 2 ** 40))).toThrow(FrameStreamError);
    expect(() => parser.push(encodeFrame({ type: 'end', request_id: 'r' }))).toThrow(/payload length/);
    expect(() => parser.finish()).toThrow(FrameStreamError);
  });

  it('encodeFrame holds headers to the same limits', () => {
    const deep = JSON.parse('['.repeat(FRAME_LIMITS.maxDepth) + ']'.repeat(FRAME_LIMITS.maxDepth));
    expect(() => encodeFrame({ type: 'x', request_id: 'r', a: deep })).toThrow(/nest/);
    expect(() => encodeFrame({ type: 'x', request_id: 'r', a: 'x'.repeat(FRAME_LIMITS.maxHeaderBytes) })).toThrow(/header/);
  });
});
