// The queue panel's rows and which of the page's requests the preview follows.
import { describe, expect, it } from 'vitest';
import {
  STEP_RATE_WEIGHT,
  chooseFollow,
  impliedStepSeconds,
  queueRows,
  shortModel,
  smoothStepSeconds,
  startText,
  stepsAhead,
  toCollect,
  withSteadyStarts,
  type QueueReq,
  type QueueSnapshot,
} from '@/components/generate/queueView';

const req = (id: string, rest: Partial<QueueReq> = {}): QueueReq => ({
  request_id: id,
  status: 'queued',
  arch: 'zimage',
  model: 'tiny:zimage',
  width: 64,
  height: 64,
  steps: 8,
  batch_size: 1,
  prompt: `prompt ${id}`,
  step: 0,
  total: 0,
  ...rest,
});
const snap = (running: string | null, queued: string[], finished: string[] = []): QueueSnapshot => ({
  running: running ? req(running, { status: 'running' }) : null,
  batch: running ? [req(running, { status: 'running' })] : [],
  queued: queued.map((id) => req(id)),
  finished: finished.map((id) => req(id, { status: 'ok' })),
});

describe('queue rows', () => {
  it('lists the running call, then the queued in order with place, size, steps and estimated start', () => {
    const s = snap('run', ['a', 'b']);
    s.batch = [req('run', { status: 'running', step: 3, total: 8 }), req('mate', { status: 'running', step: 3, total: 8 })];
    s.queued[0].estimated_start = 12.4;
    s.queued[1] = req('b', { estimated_start: null, width: 1024, height: 768, batch_size: 2, steps: 30, pinned: true, model: 'Tongyi-MAI/Z-Image-Turbo' });
    const rows = queueRows(s, new Set(['a']));
    expect(rows.map((r) => [r.id, r.state, r.position, r.start])).toEqual([
      ['run', 'running', null, 'step 3/8'],
      ['mate', 'running', null, 'step 3/8'],
      ['a', 'queued', 0, '~12 s'],
      ['b', 'queued', 1, 'unknown'],
    ]);
    expect(rows[2]).toMatchObject({ mine: true, last: false, model: 'tiny:zimage', size: '64×64', steps: '8' });
    expect(rows[3]).toMatchObject({ mine: false, last: true, pinned: true, model: 'Z-Image-Turbo', size: '1024×768 ×2', steps: '30' });
    expect(queueRows(null, new Set())).toEqual([]);
  });

  it('says the estimated start in words people read', () => {
    expect([startText(0.4), startText(59.4), startText(125), startText(3 * 3600 + 120), startText(null), startText(undefined), startText(-1)]).toEqual([
      '~0 s',
      '~59 s',
      '~2 min 5 s',
      '~3 h 2 min',
      'unknown',
      'unknown',
      'unknown',
    ]);
  });

  it('names a model by its last part', () => {
    expect(shortModel('/models/checkpoints/flux-dev.safetensors', 'flux')).toBe('flux-dev.safetensors');
    expect(shortModel('org/repo/', 'flux')).toBe('repo');
    expect(shortModel('', 'flux')).toBe('flux');
    expect(shortModel(undefined, 'sd1')).toBe('sd1');
  });
});

describe('which request the preview follows', () => {
  it('the one of ours the engine runs, else the shown one until it ends, else ours in queue order', () => {
    // ours b and c wait behind another client's request: the shown one stays
    expect(chooseFollow(['b', 'c'], { id: 'b', ended: false }, snap('x', ['c', 'b']))).toBe('b');
    // the engine runs c (moved up): the preview follows it
    expect(chooseFollow(['b', 'c'], { id: 'b', ended: false }, snap('c', ['b']))).toBe('c');
    // the shown one ended: the first of ours in the engine's order, not the order they were sent
    expect(chooseFollow(['b', 'c'], { id: 'a', ended: true }, snap('x', ['c', 'b']))).toBe('c');
    // no answer yet (a reload): the first sent
    expect(chooseFollow(['b', 'c'], { id: 'a', ended: true }, null)).toBe('b');
    // one the engine finished meanwhile is collected, not shown after the last
    expect(chooseFollow(['d'], { id: 'c', ended: true }, snap(null, [], ['d', 'c']))).toBeNull();
    // write-behind: d sampled, c ran while d's files were written, c ended before d's stream did.
    // The preview stays on c, the last to run (d is collected), though the answer is from c's run.
    const whileWriting = snap('c', [], ['a']);
    whileWriting.writing = [req('d', { status: 'running' })];
    expect(chooseFollow(['d'], { id: 'c', ended: true }, whileWriting)).toBeNull();
    expect(toCollect([{ id: 'd', sentAt: 100 }], whileWriting, 200)).toEqual(['d']);
    // writing with nothing run after it (a reload while its files are written): it is the last, shown
    const lastWriting = snap(null, [], ['a']);
    lastWriting.writing = [req('d', { status: 'running' })];
    expect(chooseFollow(['d'], null, lastWriting)).toBe('d');
    // nothing of ours left
    expect(chooseFollow([], { id: 'a', ended: true }, snap(null, []))).toBeNull();
    expect(chooseFollow([], null, null)).toBeNull();
  });

  it('collects ours the engine finished, or no longer knows, without showing them', () => {
    const ours = [
      { id: 'done', sentAt: 100 },
      { id: 'waiting', sentAt: 100 },
      { id: 'gone', sentAt: 100 },
      { id: 'just-sent', sentAt: 300 },
    ];
    expect(toCollect(ours, snap('x', ['waiting'], ['done']), 200)).toEqual(['done', 'gone']);
    expect(toCollect(ours, null, 200)).toEqual([]);
  });
});

describe('the streamed request in the queue', () => {
  it("its running row shows the stream's step, the others the polled one", () => {
    const s = snap('run', ['a']);
    s.batch = [req('run', { status: 'running', step: 24, total: 30 }), req('mate', { status: 'running', step: 24, total: 30 })];
    const rows = queueRows(s, new Set(['run']), { id: 'run', step: 30, total: 30 });
    expect(rows.map((r) => r.start)).toEqual(['step 30/30', 'step 24/30', 'unknown']);
    // a stream not yet at a step (total 0) leaves the polled one
    expect(queueRows(s, new Set(), { id: 'run', step: 0, total: 0 })[0].start).toBe('step 24/30');
  });
});

describe('steadier start estimates', () => {
  /** The engine's snapshot: `run` at `step` of 30, three queued of 10, 20, 30 steps, estimated at `sps` s/step. */
  const engineSnap = (step: number, sps: number | null): QueueSnapshot => {
    const s = snap('run', ['a', 'b', 'c']);
    s.running = req('run', { status: 'running', step, total: 30, steps: 30 });
    s.batch = [s.running];
    s.queued = [10, 20, 30].map((steps, i) => req('abc'[i], { steps }));
    const ahead = stepsAhead(s);
    s.queued.forEach((r, i) => (r.estimated_start = sps === null ? null : ahead[i] * sps));
    return s;
  };

  it('steps ahead and the step time the engine estimates imply', () => {
    const s = engineSnap(10, 0.5);
    expect(stepsAhead(s)).toEqual([20, 30, 50]);
    expect(impliedStepSeconds(s)).toBeCloseTo(0.5);
    expect(impliedStepSeconds(engineSnap(10, null))).toBeNull();
  });

  it('one sample moves the estimate a little, not from 4 min 47 s to 1 min 24 s; a lasting change is followed', () => {
    // the engine has been at 1.0 s/step; one fast step makes it say 0.29 s/step
    let rate = smoothStepSeconds(null, 1.0);
    expect(rate).toBe(1.0);
    rate = smoothStepSeconds(rate, 0.29);
    // held at half the current rate, moved a quarter of the way
    expect(rate).toBeCloseTo(1.0 + STEP_RATE_WEIGHT * (0.5 - 1.0));
    const shown = withSteadyStarts(engineSnap(10, 0.29), rate).queued.map((r) => r.estimated_start as number);
    expect(shown[2]).toBeCloseTo(50 * 0.875);
    const was = 50 * 1.0;
    expect(shown[2] / was).toBeGreaterThan(0.8); // the engine's own said 0.29 of it
    // the same sample again and again: it gets there
    for (let i = 0; i < 30; i++) rate = smoothStepSeconds(rate, 0.29);
    expect(rate).toBeCloseTo(0.29, 2);
    // nothing observed: unchanged; a rate that is no number is no sample
    expect(smoothStepSeconds(0.4, null)).toBe(0.4);
    expect(smoothStepSeconds(0.4, Number.NaN)).toBe(0.4);
    expect(smoothStepSeconds(0.4, 0)).toBe(0.4);
  });

  it('estimates from the smoothed rate; none known: the engine\'s as they are', () => {
    const s = engineSnap(10, null);
    expect(withSteadyStarts(s, null)).toBe(s);
    expect(withSteadyStarts(s, 2).queued.map((r) => r.estimated_start)).toEqual([40, 60, 100]);
    expect(queueRows(withSteadyStarts(s, 2), new Set()).map((r) => r.start)).toEqual(['step 10/30', '~40 s', '~1 min 0 s', '~1 min 40 s']);
  });
});
