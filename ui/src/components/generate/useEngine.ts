'use client';
// The engine job for the chosen device (useEngineJob.ts), its /health and /models while it runs
// (useEngineHealth.ts), its state in one word, and start / stop / unload.
import { useCallback, useState } from 'react';
import type { Job } from '@/components/jobs/types';
import { apiJson, postJson, type ApiRequestError } from '@/utils/api';
import { useEngineHealth } from './useEngineHealth';
import { useEngineJob } from './useEngineJob';

export type EngineState = 'loading' | 'none' | 'stopped' | 'queued' | 'starting' | 'warming' | 'ready' | 'stopping' | 'error';

export function engineJobName(deviceId: string): string {
  return `inference_engine_${deviceId.replace(/,/g, '_')}`;
}

export function engineJobConfig(name: string, deviceId: string, engine: Record<string, unknown> = {}) {
  // the worker fills in sqlite_db_path and engine.job_folder
  return {
    job: 'extension',
    config: { name, process: [{ type: 'InferenceEngine', device: deviceId === 'cpu' ? 'cpu' : 'cuda', engine }] },
  };
}

/** The engine in one word, from its job row, whether it answers /health, and whether it says it is ready:
 * `warming` answers but still starts its worker or loads its default model (requests sent now wait for it). */
export function engineState(jobs: Job[] | null, job: Job | null, engineUp: boolean, ready = true): EngineState {
  if (!job) return jobs === null ? 'loading' : 'none';
  if (job.status === 'running') return engineUp ? (ready ? 'ready' : 'warming') : 'starting';
  if (job.status === 'queued') return 'queued';
  if (job.status === 'stopping') return 'stopping';
  if (job.status === 'error') return 'error';
  return 'stopped';
}

export function useEngine(preferredJobId: string | null) {
  const { devices, deviceId, setDeviceId, jobs, jobsError, job, reloadJobs } = useEngineJob(preferredJobId);
  const { health, healthError, models, modelsError, engineUp, refreshHealth } = useEngineHealth(job?.id ?? null, job?.status === 'running');
  const [actionError, setActionError] = useState<string | null>(null);
  const [acting, setActing] = useState(false);

  const act = useCallback(
    async (fn: () => Promise<unknown>) => {
      setActing(true);
      setActionError(null);
      try {
        await fn();
        await reloadJobs();
      } catch (err) {
        setActionError((err as Error).message);
      } finally {
        setActing(false);
      }
    },
    [reloadJobs],
  );

  const start = () =>
    act(async () => {
      const name = engineJobName(deviceId);
      let target = job;
      if (!target) {
        try {
          target = (
            await postJson<{ job: Job }>('/api/jobs', { name, gpu_ids: deviceId, job_type: 'inference', job_config: engineJobConfig(name, deviceId) })
          ).job;
        } catch (err) {
          // made meanwhile (another tab): start that one
          if ((err as ApiRequestError).code !== 'name_taken') throw err;
          target = (await apiJson<{ job: Job }>(`/api/jobs/${name}`)).job;
        }
      }
      await postJson(`/api/jobs/${target.id}/start`);
    });

  const stop = () => act(async () => job && postJson(`/api/jobs/${job.id}/stop`));

  const unload = () =>
    act(async () => {
      if (job) await postJson(`/api/inference/unload?job=${job.id}`);
      await refreshHealth();
    });

  return {
    devices,
    deviceId,
    setDeviceId,
    job,
    state: engineState(jobs, job, engineUp, health?.ready !== false),
    health,
    healthError,
    models,
    modelsError,
    actionError: actionError ?? jobsError,
    acting,
    start,
    stop,
    unload,
    refreshHealth,
  };
}

export type EngineHandle = ReturnType<typeof useEngine>;
