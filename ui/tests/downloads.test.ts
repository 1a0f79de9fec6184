// The /library page's downloads and lists: the Download box's body (repo id or URL), a row's progress
// and bytes left, which downloads just finished, the filter over every list (the missing defaults
// too), the empty-list message, and the sources in their order.
import { describe, expect, it } from 'vitest';
import { downloadBody, isUrl, newlyDone, progressFraction, progressText, type DownloadRow } from '@/components/library/downloads';
import { emptyMessage, filterArchs, filterEntries, groupBySource, pickerGroups, type ArchPresence, type LibraryEntry } from '@/components/library/library';

const row = (over: Partial<DownloadRow>): DownloadRow => ({
  id: 'a',
  kind: 'hub',
  source: 'o/r',
  revision: null,
  dest: '/cache',
  path: null,
  status: 'running',
  bytes_done: 0,
  bytes_total: null,
  bytes_left: null,
  error: null,
  ...over,
});

const entry = (over: Partial<LibraryEntry>): LibraryEntry => ({
  name: 'x',
  source: 'folder',
  path: '/m/x',
  repo: null,
  kind: 'pipeline',
  arch: 'sd1',
  variant: null,
  role: null,
  dtype: 'f32',
  format: 'f32 diffusers',
  bytes: 1000,
  complete: true,
  missing: [],
  model: { arch: 'sd1', name_or_path: '/m/x' },
  ...over,
});

describe('downloadBody', () => {
  const form = { source: '', folder: '/models', kind: '', revision: '' };
  it('sends a repo id into the hub cache, with its revision when given', () => {
    expect(downloadBody({ ...form, source: ' owner/name ' })).toEqual({ body: { repo_id: 'owner/name' } });
    expect(downloadBody({ ...form, source: 'owner/name', revision: 'v2' })).toEqual({ body: { repo_id: 'owner/name', revision: 'v2' } });
  });
  it('sends a URL with its folder and kind', () => {
    expect(downloadBody({ ...form, source: 'https://h/f.safetensors', kind: 'vae' })).toEqual({ body: { url: 'https://h/f.safetensors', dest: '/models', kind: 'vae' } });
    expect(downloadBody({ ...form, source: 'http://h/f.safetensors', folder: '' })).toEqual({ body: { url: 'http://h/f.safetensors' } });
  });
  it('refuses an empty source, and one that is neither', () => {
    expect(downloadBody(form)).toEqual({ error: expect.stringContaining('repo id') });
    expect(downloadBody({ ...form, source: 'just words' })).toEqual({ error: expect.stringContaining('neither') });
    expect(downloadBody({ ...form, source: 'ftp://h/f' })).toEqual({ error: expect.stringContaining('neither') });
  });
  it('tells a URL from a repo id', () => {
    expect([isUrl('HTTPS://x/y'), isUrl('o/r'), isUrl('')]).toEqual([true, false, false]);
  });
});

describe('a download row', () => {
  it('says bytes done, total and left, and its fraction', () => {
    const d = row({ bytes_done: 3 * 1024 * 1024, bytes_total: 10 * 1024 * 1024, bytes_left: 7 * 1024 * 1024 });
    expect(progressText(d)).toBe('3.0 MiB of 10 MiB, 7.0 MiB left');
    expect(progressFraction(d)).toBeCloseTo(0.3);
  });
  it('has no fraction before its total is known', () => {
    expect(progressFraction(row({ bytes_done: 10 }))).toBeNull();
    expect(progressText(row({ bytes_done: 10 }))).toBe('10 B so far');
  });
  it('says done, failed with why, cancelled where', () => {
    expect(progressText(row({ status: 'done', bytes_total: 2048, bytes_done: 2048 }))).toBe('done, 2.0 KiB');
    expect(progressText(row({ status: 'done', bytes_total: 0 }))).toBe('done (nothing left to fetch)');
    expect(progressFraction(row({ status: 'done', bytes_total: 0 }))).toBe(1);
    expect(progressText(row({ status: 'failed', error: 'HTTP 404 from h' }))).toBe('failed: HTTP 404 from h');
    expect(progressText(row({ status: 'cancelled', bytes_done: 5, bytes_total: 10, bytes_left: 5 }))).toBe('cancelled at 5 B of 10 B, 5 B left');
  });
  it('finds the downloads that have just finished', () => {
    const before = [row({ id: 'a' }), row({ id: 'b', status: 'done' })];
    const after = [row({ id: 'a', status: 'done' }), row({ id: 'b', status: 'done' }), row({ id: 'c', status: 'done' })];
    expect(newlyDone(before, after)).toEqual(['a', 'c']);
    expect(newlyDone(after, after)).toEqual([]);
  });
});

describe('the lists and the filter', () => {
  const archs: ArchPresence[] = [
    { arch: 'flux', variant: 'dev', repo: 'black-forest-labs/FLUX.1-dev', default_present: false, download: 'hf download black-forest-labs/FLUX.1-dev' },
    { arch: 'sd1', variant: null, repo: 'stable-diffusion-v1-5/stable-diffusion-v1-5', default_present: false, download: 'hf download x' },
  ];
  it('applies to the missing defaults too', () => {
    expect(filterArchs(archs, '').length).toBe(2);
    expect(filterArchs(archs, 'FLUX dev').map((a) => a.arch)).toEqual(['flux']);
    expect(filterArchs(archs, 'nothing')).toEqual([]);
  });
  it('says "no model matches" only for a filter, else that nothing is listed', () => {
    expect(emptyMessage('')).toBe('No models are listed on this machine.');
    expect(emptyMessage('  ')).toBe('No models are listed on this machine.');
    expect(emptyMessage(' foo ')).toBe('No model matches "foo".');
  });
  it('lists the loaded model first, then the tiny ones, and a source word filters', () => {
    const entries = [
      entry({ name: 'b', source: 'hub' }),
      entry({ name: 'tiny:zimage', source: 'tiny', arch: 'zimage' }),
      entry({ name: 'tiny:zimage', source: 'loaded', arch: 'zimage' }),
    ];
    expect(groupBySource(entries).map((g) => g.source)).toEqual(['loaded', 'tiny', 'hub']);
    expect(filterEntries(entries, 'tiny zimage').map((e) => e.source)).toEqual(['tiny', 'loaded']);
  });
  it('keeps the Generate picker to the files found (not the tiny or loaded ones)', () => {
    const entries = [entry({ source: 'tiny', name: 'tiny:sd1' }), entry({ source: 'loaded' }), entry({ source: 'folder', name: 'mine' })];
    const groups = pickerGroups(entries, ['sd1']);
    expect(groups.flatMap((g) => g.options.map((o) => o.entry.source))).toEqual(['folder']);
  });
});
