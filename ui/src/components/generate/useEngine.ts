'use client';
// The engine job for the chosen device: its Job row (polled), its /health (polled while it
// runs), its /models (once it answers), and start / stop / unload.
import { useCallback, useEffect, useState } from 'react';
import { apiFetch, apiJson, describeError, postJson, type ApiRequestError } from '@/utils/api';
import { usePoll } from '@/utils/usePoll';
import { useStoredState } from '@/utils/useStoredState';
import type { Job } from '@/components/jobs/types';
import type { Health, ModelsResponse } from './types';

export interface Device {
  id: string;
  name: string;
}

export type EngineState = 'loading' | 'none' | 'stopped' | 'queued' | 'starting' | 'ready' | 'stopping' | 'error';

export function engineJobName(deviceId: string): string {
  return `inference_engine_${deviceId.replace(/,/g, '_')}`;
}

function engineJobConfig(name: string, deviceId: string) {
  // the worker fills in sqlite_db_path and engine.job_folder
  return {
    job: 'extension',
    config: { name, process: [{ type: 'InferenceEngine', device: deviceId === 'cpu' ? 'cpu' : 'cuda', engine: {} }] },
  };
}

export function useEngine(preferredJobId: string | null) {
  const [devices, setDevices] = useState<Device[]>([{ id: 'cpu', name: 'CPU' }]);
  const [deviceId, setDeviceId, deviceLoaded] = useStoredState<string>('aitk.generate.device', 'cpu');
  const [jobs, setJobs] = useState<Job[] | null>(null);
  const [health, setHealth] = useState<Health | null>(null);
  const [healthError, setHealthError] = useState<string | null>(null);
  const [models, setModels] = useState<ModelsResponse | null>(null);
  const [modelsError, setModelsError] = useState<string | null>(null);
  const [actionError, setActionError] = useState<string | null>(null);
  const [acting, setActing] = useState(false);

  useEffect(() => {
    apiJson<{ devices: Device[] }>('/api/gpus')
      .then((r) => setDevices(r.devices))
      .catch(() => undefined);
  }, []);

  const [jobsError, setJobsError] = useState<string | null>(null);
  usePoll(async () => {
    try {
      setJobs((await apiJson<{ jobs: Job[] }>('/api/jobs?job_type=inference')).jobs);
      setJobsError(null);
    } catch (err) {
      setJobsError((err as Error).message);
    }
  }, 1500);

  // a link from the jobs page (?job=) picks that engine's device
  useEffect(() => {
    if (!preferredJobId || !jobs || !deviceLoaded) return;
    const j = jobs.find((x) => x.id === preferredJobId);
    if (j && j.gpu_ids !== deviceId) setDeviceId(j.gpu_ids);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [preferredJobId, jobs === null, deviceLoaded]);

  const forDevice = (jobs ?? []).filter((j) => j.gpu_ids === deviceId);
  const job = forDevice.find((j) => j.status === 'running' || j.status === 'stopping' || j.status === 'queued') ?? forDevice[0] ?? null;
  const running = job?.status === 'running';

  const jobId = job?.id ?? null;
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
    if (!engineUp || !job) return;
    let cancelled = false;
    apiJson<ModelsResponse>(`/api/inference/models?job=${job.id}`)
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
  }, [engineUp, job?.id]); // eslint-disable-line react-hooks/exhaustive-deps

  let state: EngineState = jobs === null ? 'loading' : 'none';
  if (job) {
    if (job.status === 'running') state = engineUp ? 'ready' : 'starting';
    else if (job.status === 'queued') state = 'queued';
    else if (job.status === 'stopping') state = 'stopping';
    else if (job.status === 'error') state = 'error';
    else state = 'stopped';
  }

  const act = useCallback(async (fn: () => Promise<unknown>) => {
    setActing(true);
    setActionError(null);
    try {
      await fn();
      setJobs((await apiJson<{ jobs: Job[] }>('/api/jobs?job_type=inference')).jobs);
    } catch (err) {
      setActionError((err as Error).message);
    } finally {
      setActing(false);
    }
  }, []);

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
    state,
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
