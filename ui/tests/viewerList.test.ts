// The list the result viewer walks and its previous/next bounds.
import { describe, expect, it } from 'vitest';
import type { GalleryItem } from '@/components/generate/types';
import { positionText, stepIndex, viewerItems } from '@/components/generate/viewerList';

const item = (key: string): GalleryItem => ({
  key,
  requestId: `r-${key}`,
  jobId: 'j',
  jobName: 'engine',
  result: { relpath: `${key}.png`, kind: 'image', seed: 1, ext: 'png', bytes: 1 } as GalleryItem['result'],
  model: {},
  sample: {},
  createdAt: '2026-01-01T00:00:00Z',
});

describe('viewerItems', () => {
  it('puts the session results first, then the gallery, each key once', () => {
    const keys = viewerItems([item('c'), item('b')], [item('c'), item('a'), item('b'), item('z')]).map((i) => i.key);
    expect(keys).toEqual(['c', 'b', 'a', 'z']);
  });
  it('is the gallery alone when the session has none, and empty when neither has any', () => {
    expect(viewerItems([], [item('a'), item('b')]).map((i) => i.key)).toEqual(['a', 'b']);
    expect(viewerItems([], [])).toEqual([]);
  });
});

describe('stepIndex', () => {
  it('moves within the list', () => {
    expect(stepIndex(0, 1, 3)).toBe(1);
    expect(stepIndex(2, -1, 3)).toBe(1);
  });
  it('stops at either end', () => {
    expect(stepIndex(0, -1, 3)).toBeNull();
    expect(stepIndex(2, 1, 3)).toBeNull();
    expect(stepIndex(0, 1, 1)).toBeNull();
    expect(stepIndex(0, 1, 0)).toBeNull();
  });
});

it('positionText counts from one', () => {
  expect(positionText(1, 5)).toBe('2 of 5');
});
