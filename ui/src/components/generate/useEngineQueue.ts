'use client';
// The engine's queue (GET /queue, polled while the engine runs; its start estimates from a smoothed
// step time, queueView.ts) and what the queue panel does with it: cancel a request, move a queued
// one (POST /queue/{id}/move).
import { useCallback, useEffect, useRef, useState } from 'react';
import { apiFetch, describeError } from '@/utils/api';
import { usePoll } from '@/utils/usePoll';
import { impliedStepSeconds, smoothStepSeconds, withSteadyStarts, type QueueSnapshot } from './queueView';

const POLL_MS = 1000;

export function useEngineQueue(jobId: string | null, enabled: boolean) {
  /** the answer, and when it was asked for (requests the engine took before then are in it) */
  const [state, setState] = useState<{ snap: QueueSnapshot; at: number } | null>(null);
  const [error, setError] = useState<string | null>(null);
  // this engine's seconds per step, smoothed over the polls
  const stepSeconds = useRef<{ jobId: string | null; value: number | null }>({ jobId: null, value: null });

  const refresh = useCallback(async () => {
    if (!jobId) return;
    const at = Date.now();
    try {
      const res = await apiFetch(`/api/inference/queue?job=${jobId}`);
      if (!res.ok) {
        setError((await describeError(res)).message);
        return;
      }
      const snap = (await res.json()) as QueueSnapshot;
      const prev = stepSeconds.current.jobId === jobId ? stepSeconds.current.value : null;
      const value = smoothStepSeconds(prev, impliedStepSeconds(snap));
      stepSeconds.current = { jobId, value };
      setState({ snap: withSteadyStarts(snap, value), at });
      setError(null);
    } catch (err) {
      setError(`The UI server did not answer: ${(err as Error).message}`);
    }
  }, [jobId]);

  usePoll(refresh, POLL_MS, enabled && !!jobId, [jobId]);
  useEffect(() => {
    if (!enabled) {
      setState(null);
      setError(null);
    }
  }, [enabled]);

  /** POST to the engine, then a fresh snapshot; the engine's refusal as a sentence, or null. */
  const act = useCallback(
    async (path: string, body?: unknown): Promise<string | null> => {
      try {
        const res = await apiFetch(`/api/inference/${path}?job=${jobId}`, {
          method: 'POST',
          headers: body === undefined ? undefined : { 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        if (!res.ok) return (await describeError(res)).message;
        return null;
      } catch (err) {
        return `The UI server did not answer: ${(err as Error).message}`;
      } finally {
        await refresh();
      }
    },
    [jobId, refresh],
  );

  const cancel = useCallback((id: string) => act(`cancel/${encodeURIComponent(id)}`), [act]);
  /** `position`: 0-based among the queued, 0 = next to run */
  const move = useCallback((id: string, position: number) => act(`queue/${encodeURIComponent(id)}/move`, { position }), [act]);

  return { snapshot: state?.snap ?? null, at: state?.at ?? 0, error, cancel, move };
}
