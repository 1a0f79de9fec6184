'use client';
// Every inference engine job (GET /api/engines), polled while the page shows more than one, and where
// Generate sends requests: 'here' (the engine of the strip above), 'auto' (the engine that holds the
// request's model, else the least busy: server/engines.ts) or one engine's job id.
import { useCallback, useState } from 'react';
import { apiJson } from '@/utils/api';
import { usePoll } from '@/utils/usePoll';
import { useStoredState } from '@/utils/useStoredState';
import type { EngineSummary } from '@/server/engines';

export type EngineTarget = 'here' | 'auto' | string;

export function useEngines(jobCountHint: number) {
  const [engines, setEngines] = useState<EngineSummary[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [target, setTarget] = useStoredState<EngineTarget>('aitk.generate.target', 'here');
  const refresh = useCallback(async () => {
    try {
      setEngines((await apiJson<{ engines: EngineSummary[] }>('/api/engines')).engines);
      setError(null);
    } catch (err) {
      setError((err as Error).message);
    }
  }, []);
  usePoll(refresh, 3000, true, [jobCountHint]);
  return { engines, error, target, setTarget, refresh };
}

/** The job a request goes to: 'auto' as the proxy's ?job=auto, an engine that is no longer ready falls
 * back to the strip's engine. */
export function targetJob(target: EngineTarget, engines: EngineSummary[] | null, here: { id: string; name: string } | null): { id: string; name: string } | null {
  if (target === 'auto') return { id: 'auto', name: '' };
  const picked = target !== 'here' ? engines?.find((e) => e.job.id === target && e.state === 'ready') : undefined;
  return picked ? { id: picked.job.id, name: picked.job.name } : here;
}
