// The queue panel's rows and which of the page's requests the preview follows.
import { describe, expect, it } from 'vitest';
import { chooseFollow, queueRows, shortModel, startText, toCollect, type QueueReq, type QueueSnapshot } from '@/components/generate/queueView';

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
