'use client';
// What a running engine says of itself: its /health (polled while its job runs; read again on demand,
// e.g. when a request ends) and its /models (once it answers). While it is busy with no model loaded,
// the running request's model (GET /queue) is the one it is loading.
import { useCallback, useEffect, useState } from 'react';
import { apiFetch, apiJson, describeError } from '@/utils/api';
import { usePoll } from '@/utils/usePoll';
import type { QueueSnapshot } from './queueView';
import type { Health, ModelsResponse } from './types';

/** /health as the strip shows it: `loading` is the model the running request loads, while none is loaded. */
export type ShownHealth = Health & { loading?: string | null };

/** The model the engine is loading: the running request's, when it is busy with none loaded. */
async function loadingModel(jobId: string, h: Health): Promise<string | null> {
  if (h.active || !h.busy) return null;
  const res = await apiFetch(`/api/inference/queue?job=${jobId}`);
  if (!res.ok) return null;
  const run = ((await res.json()) as QueueSnapshot).running;
  return run ? run.model || run.arch : null;
}

export function useEngineHealth(jobId: string | null, running: boolean) {
  const [health, setHealth] = useState<ShownHealth | null>(null);
  const [healthError, setHealthError] = useState<string | null>(null);
  const [models, setModels] = useState<ModelsResponse | null>(null);
  const [modelsError, setModelsError] = useState<string | null>(null);

  const refreshHealth = useCallback(async () => {
    if (!jobId) return;
    const res = await apiFetch(`/api/inference/health?job=${jobId}`);
    if (res.ok) {
      const h = (await res.json()) as Health;
      setHealth({ ...h, loading: await loadingModel(jobId, h).catch(() => null) });
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
