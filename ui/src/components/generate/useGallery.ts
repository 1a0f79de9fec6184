'use client';
// The results gallery: a client of the UI server's history (/api/history), so it survives a
// reload and another browser. Search by prompt, filter by model, pages; add and remove as before.
import { useCallback, useEffect, useRef, useState } from 'react';
import { apiFetch, describeError } from '@/utils/api';
import { modelKey } from '@/utils/modelIdentity';
import { moveLegacyGallery } from './legacyGallery';
import type { GalleryItem } from './types';

const PAGE = 50;
/** how often the first page is read again for rows others wrote (the server's results follower) */
const REFRESH_MS = 2000;

/** Where the UI serves a result from: the job folder's outputs, through /api/files (works with the engine stopped). */
export function fileUrl(item: Pick<GalleryItem, 'jobName' | 'result'>): string {
  const rel = item.result.relpath.split('/').map(encodeURIComponent).join('/');
  return `/api/files/${encodeURIComponent(item.jobName)}/outputs/${rel}`;
}

export interface GalleryFilter {
  /** words of the prompt */
  q: string;
  /** a model key (GET /api/history/models), '' for every model */
  model: string;
  /** a source word (utils/historySource.ts), '' for every source */
  source: string;
}

/** One model of the history (GET /api/history/models). */
export interface HistoryModel {
  model: string;
  arch: string;
  count: number;
  sources?: string[];
}

/** One source of the history (GET /api/history/models `sources`). */
export interface HistorySource {
  source: string;
  count: number;
}

export interface GallerySearch {
  filter: GalleryFilter;
  setFilter: (f: GalleryFilter) => void;
  models: HistoryModel[];
  sources: HistorySource[];
  loading: boolean;
  hasMore: boolean;
  loadMore: () => void;
  /** the history could not be read or written */
  error: string | null;
  /** results being written to the history now */
  saving: number;
}

function matches(item: GalleryItem, f: GalleryFilter): boolean {
  if (f.q && !String(item.sample.prompt ?? '').toLowerCase().includes(f.q.toLowerCase())) return false;
  if (f.source && (item.source ?? 'ui') !== f.source) return false;
  return !f.model || modelKey(item.model) === f.model;
}

async function readJson<T>(url: string, signal?: AbortSignal): Promise<T> {
  const res = await apiFetch(url, { signal });
  if (!res.ok) throw new Error((await describeError(res)).message);
  return (await res.json()) as T;
}

/** One page of the history for a filter, the newest first (`before`: the previous page's `next`). */
function page(f: GalleryFilter, before: string | null, signal?: AbortSignal) {
  const p = new URLSearchParams({ limit: String(PAGE) });
  if (f.q) p.set('q', f.q);
  if (f.model) p.set('model', f.model);
  if (f.source) p.set('source', f.source);
  if (before) p.set('before', before);
  return readJson<{ items: GalleryItem[]; next: string | null }>(`/api/history?${p}`, signal);
}

/** Write a result to the history; throws why it was not saved. */
async function saveResult(item: GalleryItem): Promise<void> {
  const res = await apiFetch('/api/history', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(item) });
  if (!res.ok) throw new Error((await describeError(res)).message);
}

/** Remove a result from the history and delete its file (a file already gone is fine); why not, or null. */
async function deleteResult(item: GalleryItem): Promise<string | null> {
  let res = await apiFetch(`/api/history/${encodeURIComponent(item.key)}`, { method: 'DELETE' }).catch(() => null);
  // never saved (the history was unreachable when it came): its file alone
  if (res?.status === 404) res = await apiFetch(fileUrl(item), { method: 'DELETE' }).catch(() => null);
  if (!res) return 'The UI server did not answer; nothing was deleted.';
  if (!res.ok && res.status !== 404) return `Not deleted: ${(await describeError(res)).message}`;
  return null;
}

/** The models and sources of the history (the filters' lists), read again after each change. */
function useHistoryModels() {
  const [models, setModels] = useState<HistoryModel[]>([]);
  const [sources, setSources] = useState<HistorySource[]>([]);
  const refreshModels = useCallback(() => {
    readJson<{ models: HistoryModel[]; sources?: HistorySource[] }>('/api/history/models')
      .then((b) => {
        setModels(b.models);
        setSources(b.sources ?? []);
      })
      .catch(() => undefined); // the filters keep their last lists
  }, []);
  return { models, sources, refreshModels };
}

/** First: what this browser's old localStorage gallery held moves to the server; `moveNote` says what it left out. */
function useLegacyMove() {
  const [ready, setReady] = useState(false);
  const [moveNote, setMoveNote] = useState<string | null>(null);
  useEffect(() => {
    moveLegacyGallery()
      .then(setMoveNote)
      .finally(() => setReady(true));
  }, []);
  return { ready, moveNote };
}

/** `prev` with the items of `fresh` it lacks, newest first (as the history orders them). */
export function mergeNewer(prev: GalleryItem[], fresh: GalleryItem[]): GalleryItem[] {
  const have = new Set(prev.map((p) => p.key));
  const added = fresh.filter((i) => !have.has(i.key));
  if (!added.length) return prev;
  return [...added, ...prev].sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
}

/**
 * Rows this page did not write (a closed tab's, the A1111/OpenAI routes', the CLI's, the grid's: the
 * UI worker records every engine's results) appear without a reload: the first page for the filter
 * shown is read again every REFRESH_MS while the page is visible.
 */
function useRefresh(
  ready: boolean,
  { filter, items }: { filter: { current: GalleryFilter }; items: { current: GalleryItem[] } },
  setItems: (fn: (prev: GalleryItem[]) => GalleryItem[]) => void,
  refreshModels: () => void,
) {
  useEffect(() => {
    if (!ready) return;
    let busy = false;
    const onFresh = (f: GalleryFilter, fresh: GalleryItem[]) => {
      if (filter.current !== f || mergeNewer(items.current, fresh) === items.current) return;
      setItems((prev) => mergeNewer(prev, fresh));
      refreshModels(); // a new model may have come with them
    };
    const timer = setInterval(() => {
      if (busy || document.visibilityState !== 'visible') return;
      busy = true;
      const f = filter.current;
      page(f, null)
        .then((b) => onFresh(f, b.items))
        .catch(() => undefined) // the next read tries again
        .finally(() => {
          busy = false;
        });
    }, REFRESH_MS);
    return () => clearInterval(timer);
  }, [ready, filter, items, setItems, refreshModels]);
}

/** A ref that holds the latest `value` (read by callbacks that outlive a render). */
function useLatest<T>(value: T) {
  const ref = useRef(value);
  ref.current = value;
  return ref;
}

export function useGallery() {
  const [filter, setFilter] = useState<GalleryFilter>({ q: '', model: '', source: '' });
  const [items, setItems] = useState<GalleryItem[]>([]);
  // this page's own results, whatever the filter (the preview shows a request's batch from them)
  const [recent, setRecent] = useState<GalleryItem[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(0);
  const filterRef = useLatest(filter);
  const recentRef = useLatest(recent);
  const itemsRef = useLatest(items);

  const { models, sources, refreshModels } = useHistoryModels();
  const { ready, moveNote } = useLegacyMove();

  // the first page for the filter shown (a newer filter aborts an older answer)
  useEffect(() => {
    if (!ready) return;
    const ctrl = new AbortController();
    setLoading(true);
    page(filter, null, ctrl.signal)
      .then((b) => {
        // results that came while this page was read (their POST may not have landed yet)
        const mine = recentRef.current.filter((r) => matches(r, filter) && !b.items.some((i) => i.key === r.key));
        setItems([...mine, ...b.items]);
        setNext(b.next);
        setError(null);
      })
      .catch((err) => !ctrl.signal.aborted && setError(`The history could not be read: ${(err as Error).message}`))
      .finally(() => !ctrl.signal.aborted && setLoading(false));
    refreshModels();
    return () => ctrl.abort();
  }, [ready, filter, refreshModels]);

  useRefresh(ready, { filter: filterRef, items: itemsRef }, setItems, refreshModels);

  const loadMore = useCallback(() => {
    if (!next) return;
    const f = filterRef.current;
    page(f, next)
      .then((b) => {
        if (filterRef.current !== f) return;
        setItems((prev) => [...prev, ...b.items.filter((i) => !prev.some((p) => p.key === i.key))]);
        setNext(b.next);
      })
      .catch((err) => setError(`The history could not be read: ${(err as Error).message}`));
  }, [next]);

  const add = useCallback(
    (item: GalleryItem) => {
      setRecent((prev) => (prev.some((p) => p.key === item.key) ? prev : [item, ...prev]));
      if (matches(item, filterRef.current)) setItems((prev) => (prev.some((p) => p.key === item.key) ? prev : [item, ...prev]));
      setSaving((n) => n + 1);
      saveResult(item)
        .then(refreshModels)
        .catch((err) => setError(`This result could not be saved to the history: ${(err as Error).message}`))
        .finally(() => setSaving((n) => n - 1));
    },
    [refreshModels],
  );

  /** Remove from the history and delete the file; why not, or null. */
  const remove = useCallback(
    async (item: GalleryItem): Promise<string | null> => {
      const problem = await deleteResult(item);
      if (problem !== null) return problem;
      setItems((prev) => prev.filter((p) => p.key !== item.key));
      setRecent((prev) => prev.filter((p) => p.key !== item.key));
      refreshModels();
      return null;
    },
    [refreshModels],
  );

  const search: GallerySearch = { filter, setFilter, models, sources, loading, hasMore: next !== null, loadMore, error: error ?? moveNote, saving };
  return { items, recent, add, remove, search };
}
