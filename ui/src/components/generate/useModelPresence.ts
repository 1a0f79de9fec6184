'use client';
// Which archs' default repos are on this machine (the engine's GET /library, `archs`), so the model
// panel can say "not downloaded" before a request fails. Read once per running engine; an engine
// without /library (404) or a failed read leaves it unknown (no note rather than a wrong one).
import { useEffect, useState } from 'react';
import { apiFetch } from '@/utils/api';
import type { ArchPresence } from '@/components/library/library';

export function useModelPresence(jobId: string | null, enabled: boolean): ArchPresence[] | null {
  const [archs, setArchs] = useState<ArchPresence[] | null>(null);
  useEffect(() => {
    if (!enabled || !jobId) return;
    let cancelled = false;
    apiFetch(`/api/inference/library?job=${encodeURIComponent(jobId)}`)
      .then(async (res) => {
        if (!res.ok) return;
        const body = (await res.json()) as { archs?: ArchPresence[] };
        if (!cancelled && Array.isArray(body.archs)) setArchs(body.archs);
      })
      .catch(() => undefined);
    return () => {
      cancelled = true;
    };
  }, [jobId, enabled]);
  return archs;
}
