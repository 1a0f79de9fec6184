'use client';
// The engine's downloads (GET /downloads through the proxy), read again while one runs, with start,
// cancel, resume and dismiss; `onDone` is called when one finishes (the page lists the library again).
import { useCallback, useEffect, useRef, useState } from 'react';
import { apiFetch, describeError } from '@/utils/api';
import { newlyDone, type DownloadRow, type DownloadsResponse } from './downloads';

const POLL_MS = 500;

export function useDownloads(jobId: string | null, onDone: () => void) {
  const [state, setState] = useState<DownloadsResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const before = useRef<DownloadRow[] | null>(null);
  const done = useRef(onDone);
  done.current = onDone;
  const url = useCallback((path: string) => `/api/inference/${path}?job=${encodeURIComponent(jobId ?? '')}`, [jobId]);

  const refresh = useCallback(async () => {
    if (!jobId) return;
    try {
      const res = await apiFetch(url('downloads'));
      if (!res.ok) return setError((await describeError(res)).message);
      const doc = (await res.json()) as DownloadsResponse;
      if (before.current && newlyDone(before.current, doc.downloads).length) done.current();
      before.current = doc.downloads;
      setState(doc);
    } catch (err) {
      setError((err as Error).message);
    }
  }, [jobId, url]);

  useEffect(() => {
    refresh();
  }, [refresh]);
  const running = (state?.downloads ?? []).some((d) => d.status === 'running');
  useEffect(() => {
    if (!running) return;
    const t = setInterval(refresh, POLL_MS);
    return () => clearInterval(t);
  }, [running, refresh]);

  /** One request, then the list again; the engine's refusal (naming the field) as the error. */
  const act = useCallback(
    async (path: string, init: RequestInit): Promise<boolean> => {
      try {
        const res = await apiFetch(url(path), init);
        if (!res.ok) {
          setError((await describeError(res)).message);
          return false;
        }
        setError(null);
        await refresh();
        return true;
      } catch (err) {
        setError((err as Error).message);
        return false;
      }
    },
    [refresh, url],
  );

  const start = useCallback(
    (body: Record<string, string>) => act('downloads', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }),
    [act],
  );
  const cancel = useCallback((id: string) => act(`downloads/${encodeURIComponent(id)}`, { method: 'DELETE' }), [act]);
  const resume = useCallback((id: string) => act(`downloads/${encodeURIComponent(id)}/resume`, { method: 'POST' }), [act]);

  return { state, error, setError, start, cancel, resume };
}
