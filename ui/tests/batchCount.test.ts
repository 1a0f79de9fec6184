// Batch count (batchCount.ts): a count's request bodies, each its own request id and seed, apart from
// the batch size, and the count's own check.
import { describe, expect, it } from 'vitest';
import { countBodies, countProblem, MAX_BATCH_COUNT } from '@/components/generate/batchCount';

const body = (sample: Record<string, unknown>) => ({ model: { arch: 'sd1' }, request_id: 'ui-a', sample, stream: { detach: false } });

describe('batch count', () => {
  it('a set seed: request i starts at seed + i × batch size, so no two images share a seed', () => {
    let n = 0;
    const first = body({ prompt: 'fox', seed: 10, batch_size: 2 });
    const out = countBodies(first, 3, () => `ui-${++n}`);
    expect(out.map((b) => b.request_id)).toEqual(['ui-a', 'ui-1', 'ui-2']);
    expect(out.map((b) => b.sample.seed)).toEqual([10, 12, 14]);
    // the rest of the request is the same, and the first is the body as built
    expect(out.every((b) => b.sample.prompt === 'fox' && b.sample.batch_size === 2 && b.model.arch === 'sd1')).toBe(true);
    expect(out[0]).toBe(first);
    expect(first.sample.seed).toBe(10); // the built body is not changed
    expect(countBodies(body({ seed: 0 }), 2, () => 'x').map((b) => b.sample.seed)).toEqual([0, 1]);
  });

  it('a random seed (-1): random for each request', () => {
    const out = countBodies(body({ seed: -1, batch_size: 4 }), 3, () => 'x');
    expect(out.map((b) => b.sample.seed)).toEqual([-1, -1, -1]);
    expect(countBodies(body({ seed: -1 }), 1, () => 'x')).toHaveLength(1);
  });

  it('a count is a whole number from 1 to the maximum', () => {
    expect(countProblem(1)).toBeNull();
    expect(countProblem(MAX_BATCH_COUNT)).toBeNull();
    for (const bad of [0, -1, 1.5, NaN, MAX_BATCH_COUNT + 1]) expect(countProblem(bad)).toContain('Batch count');
  });
});
