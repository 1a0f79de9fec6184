// How frames change what the preview panel says.
import { describe, expect, it } from 'vitest';
import { IDLE, afterStepsText, applyFrame, etaSeconds, type GenView } from '@/components/generate/generationView';
import type { FrameHeader } from '@/utils/engineStream';

const f = (type: string, rest: Record<string, unknown> = {}): FrameHeader => ({ type, request_id: 'r', ...rest });
const run = (frames: FrameHeader[], from: GenView = { ...IDLE, phase: 'submitting', startedAt: 1000 }) =>
  frames.reduce((v, h) => applyFrame(v, h, undefined, 5000), from);

describe('applyFrame', () => {
  it('follows a run to "Done" with step, total, status lines and results', () => {
    const v = run([
      f('start', { modality: 'image', preview: { rgb_factors: null } }),
      f('status', { stage: 'loading', message: 'loading zimage' }),
      f('progress', { step: 1, total: 4, elapsed: 2 }),
      f('progress', { step: 3, total: 4, elapsed: 3 }),
      f('result', { relpath: 'a.png', url: '/outputs/a.png', kind: 'image' }),
      f('end', { status: 'ok' }),
    ]);
    expect(v).toMatchObject({ phase: 'done', step: 3, total: 4, modality: 'image', statusLines: ['loading zimage'], message: 'Done in 3.0 s (waited 1.0 s): 1 file.' });
    expect(v.results).toHaveLength(1);
    expect(v.finishedAt).toBe(5000);
  });

  it('says where a cancel landed', () => {
    const v = run([f('start'), f('progress', { step: 7, total: 200, elapsed: 1 }), f('error', { message: 'cancelled', cancelled: true }), f('end', { status: 'cancelled' })]);
    expect(v).toMatchObject({ phase: 'cancelled', message: 'Cancelled at step 7/200.' });
    const early = run([f('start'), f('error', { message: 'cancelled before it started', cancelled: true }), f('end', { status: 'cancelled' })]);
    expect(early.message).toBe('Cancelled before sampling started.');
  });

  it('keeps the engine\'s error message', () => {
    const v = run([f('start'), f('error', { message: 'ComponentLoadError: not in the local hub cache', cancelled: false }), f('end', { status: 'error' })]);
    expect(v).toMatchObject({ phase: 'error', message: 'Generation failed before sampling started: ComponentLoadError: not in the local hub cache' });
  });

  it('a replayed start frame (re-attach) starts the lists afresh', () => {
    const before = run([f('start'), f('status', { stage: 'queued', message: 'queued (1 in queue)' }), f('result', { relpath: 'x' })]);
    const after = applyFrame(before, f('start'));
    expect(after.statusLines).toEqual([]);
    expect(after.results).toEqual([]);
  });

  it('keeps at most 8 status lines', () => {
    const v = run(Array.from({ length: 12 }, (_, i) => f('status', { stage: 's', message: `m${i}` })));
    expect(v.statusLines).toEqual(['m4', 'm5', 'm6', 'm7', 'm8', 'm9', 'm10', 'm11']);
  });

  it('ignores frame types it does not know', () => {
    const v = run([f('start')]);
    expect(applyFrame(v, f('telemetry'))).toBe(v);
  });
});

describe('etaSeconds', () => {
  it('uses the rate since the first progress frame (model loading excluded)', () => {
    // first progress at 10 s (after loading), step 5 at 12 s: 0.5 s/step, 5 steps left
    expect(etaSeconds({ step: 5, total: 10, elapsed: 12, firstProgress: { step: 1, elapsed: 10 } })).toBe(2.5);
    expect(etaSeconds({ step: 1, total: 10, elapsed: 10, firstProgress: { step: 1, elapsed: 10 } })).toBeNull();
  });
});

describe('after the last step', () => {
  it('"Decoding…" once the engine says it decodes, then "Saving…", none once it ended; the run apart from the wait', () => {
    const frames = [f('start', { modality: 'image' }), f('progress', { step: 1, total: 2, elapsed: 1 }), f('progress', { step: 2, total: 2, elapsed: 12.3 })];
    const sampled = run(frames);
    expect(afterStepsText(sampled)).toBeNull();
    const decoding = applyFrame(sampled, f('status', { stage: 'decoding', message: 'decoding' }));
    expect(afterStepsText(decoding)).toBe('Decoding…');
    expect(etaSeconds(decoding)).toBe(0); // what the panel showed before: "ETA 0.0 s"
    const saving = applyFrame(decoding, f('status', { stage: 'saving', message: 'saving a.png' }));
    expect(afterStepsText(saving)).toBe('Saving…');
    const ended = applyFrame(saving, f('end', { status: 'ok' }), undefined, 1000 + 88_000);
    expect(afterStepsText(ended)).toBeNull();
    expect(ended.message).toBe('Done in 12.3 s (waited 1 min 16 s): 0 files.');
    expect(afterStepsText(applyFrame(sampled, f('status', { stage: 'loading', message: 'loading' })))).toBeNull();
  });
});
