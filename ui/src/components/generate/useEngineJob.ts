'use client';
// Which engine job the page drives: the devices (GET /api/gpus), the chosen device (kept in
// localStorage; a link from the jobs page, ?job=, picks that engine's device), and the inference
// jobs (polled), of which the device's live one, else its newest.
import { useCallback, useEffect, useState } from 'react';
import type { Job } from '@/components/jobs/types';
import { apiJson } from '@/utils/api';
import { usePoll } from '@/utils/usePoll';
import { useStoredState } from '@/utils/useStoredState';

export interface Device {
  id: string;
  name: string;
}

const readJobs = async () => (await apiJson<{ jobs: Job[] }>('/api/jobs?job_type=inference')).jobs;

export function useEngineJob(preferredJobId: string | null) {
  const [devices, setDevices] = useState<Device[]>([{ id: 'cpu', name: 'CPU' }]);
  const [deviceId, setDeviceId, deviceLoaded] = useStoredState<string>('aitk.generate.device', 'cpu');
  const [jobs, setJobs] = useState<Job[] | null>(null);
  const [jobsError, setJobsError] = useState<string | null>(null);

  useEffect(() => {
    apiJson<{ devices: Device[] }>('/api/gpus')
      .then((r) => setDevices(r.devices))
      .catch(() => undefined);
  }, []);

  usePoll(async () => {
    try {
      setJobs(await readJobs());
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

  /** Read the jobs now (after an action), not at the next poll; throws when they cannot be read. */
  const reloadJobs = useCallback(async () => setJobs(await readJobs()), []);

  const forDevice = (jobs ?? []).filter((j) => j.gpu_ids === deviceId);
  const job = forDevice.find((j) => j.status === 'running' || j.status === 'stopping' || j.status === 'queued') ?? forDevice[0] ?? null;
  return { devices, deviceId, setDeviceId, jobs, jobsError, job, reloadJobs };
}
