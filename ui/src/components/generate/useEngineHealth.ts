'use client';
// What a running engine says of itself: its /health (polled while its job runs; read again on demand,
// e.g. when a request ends) and its /models (once it answers).
import { useCallback, useEffect, useState } from 'react';
import { apiFetch, apiJson, describeError } from '@/utils/api';
import { usePoll } from '@/utils/usePoll';
import type { Health, ModelsResponse } from './types';

export function useEngineHealth(jobId: string | null, running: boolean) {
  const [health, setHealth] = useState<Health | null>(null);
  const [healthError, setHealthError] = useState<string | null>(null);
  const [models, setModels] = useState<ModelsResponse | null>(null);
  const [modelsError, setModelsError] = useState<string | null>(null);

  const refreshHealth = useCallback(async () => {
    if (!jobId) return;
    const res = await apiFetch(`/api/inference/health?job=${jobId}`);
    if (res.ok) {
      setHealth((await res.json()) as Health);
      setHealthError(null);
    } else {
      setHealth(null);
      setHealthError((await describeError(res)).message);
    }
  }, [jobId]);
  usePoll(refreshHealth, 2000, running, [jobId]);

  useEffect(() => {
    if (!running) {
      setHealth(null);
      setHealthError(null);
    }
  }, [running]);

  const engineUp = running && !!health?.ok;
  useEffect(() => {
    if (!engineUp || !jobId) return;
    let cancelled = false;
    apiJson<ModelsResponse>(`/api/inference/models?job=${jobId}`)
      .then((m) => {
        if (!cancelled) {
          setModels(m);
          setModelsError(null);
        }
      })
      .catch((err) => !cancelled && setModelsError((err as Error).message));
    return () => {
      cancelled = true;
    };
  }, [engineUp, jobId]);

  return { health, healthError, models, modelsError, engineUp, refreshHealth };
}
