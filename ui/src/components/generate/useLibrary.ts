'use client';
// The engine's GET /library, for the Generate page: the model picker (checkpoints, model files and
// diffusers folders of the engine's model folders and hub cache), the VAE override's files, and which
// archs' default repos are here (the model panel's "not downloaded" note). Read once per running engine;
// an engine without /library (404) or a failed read leaves it unknown (no picker, no note).
import { useEffect, useState } from 'react';
import { apiFetch } from '@/utils/api';
import type { LibraryResponse } from '@/components/library/library';

export function useLibrary(jobId: string | null, enabled: boolean): LibraryResponse | null {
  const [lib, setLib] = useState<LibraryResponse | null>(null);
  useEffect(() => {
    if (!enabled || !jobId) return;
    let cancelled = false;
    apiFetch(`/api/inference/library?job=${encodeURIComponent(jobId)}`)
      .then(async (res) => {
        if (!res.ok) return;
        const body = (await res.json()) as Partial<LibraryResponse>;
        if (!cancelled && Array.isArray(body.archs)) setLib({ archs: body.archs, entries: Array.isArray(body.entries) ? body.entries : [] });
      })
      .catch(() => undefined);
    return () => {
      cancelled = true;
    };
  }, [jobId, enabled]);
  return lib;
}
