'use client';
// The engine's LoRA folder for an arch (GET /loras, through the proxy): read when the engine is up or
// the arch changes, and on refresh. An older engine (404) counts as one without a folder.
import { useCallback, useEffect, useState } from 'react';
import { apiFetch, describeError } from '@/utils/api';
import type { LorasResponse } from './types';

const NO_FOLDER: LorasResponse = { folder: null, loras: [] };

export async function fetchLoras(jobId: string, arch: string): Promise<LorasResponse> {
  const res = await apiFetch(`/api/inference/loras?job=${encodeURIComponent(jobId)}&arch=${encodeURIComponent(arch)}`);
  if (res.status === 404) return NO_FOLDER;
  if (!res.ok) throw new Error((await describeError(res)).message);
  const body = (await res.json()) as Partial<LorasResponse>;
  return { folder: body.folder ?? null, loras: Array.isArray(body.loras) ? body.loras : [] };
}

export function useLoras(jobId: string | null, arch: string | null, enabled: boolean) {
  const [data, setData] = useState<LorasResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const [nonce, setNonce] = useState(0);

  useEffect(() => {
    if (!enabled || !jobId || !arch) return;
    let cancelled = false;
    setLoading(true);
    fetchLoras(jobId, arch)
      .then((d) => {
        if (cancelled) return;
        setData(d);
        setError(null);
      })
      .catch((err) => !cancelled && setError((err as Error).message))
      .finally(() => !cancelled && setLoading(false));
    return () => {
      cancelled = true;
      setLoading(false);
    };
  }, [enabled, jobId, arch, nonce]);

  const refresh = useCallback(() => setNonce((n) => n + 1), []);
  return { data, error, loading, refresh };
}
