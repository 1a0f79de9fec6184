// A Job row as the /api/jobs routes return it (job_config parsed).
export interface Job {
  id: string;
  name: string;
  gpu_ids: string;
  job_config: unknown;
  status: 'queued' | 'running' | 'stopping' | 'stopped' | 'completed' | 'error' | string;
  stop: number;
  step: number;
  info: string;
  job_type: string;
  pid: number | null;
  created_at: string;
  updated_at: string;
}

export const isActive = (j: Pick<Job, 'status'>) => j.status === 'queued' || j.status === 'running' || j.status === 'stopping';
