// The NVIDIA GPUs on this machine, from nvidia-smi (none when it is missing).
import { execFile } from 'node:child_process';

export interface GpuInfo {
  id: string;
  name: string;
  memory_total_mb?: number;
}

export function parseNvidiaSmi(csv: string): GpuInfo[] {
  return csv
    .split('\n')
    .map((line) => line.split(',').map((x) => x.trim()))
    .filter((cols) => cols.length >= 2 && /^\d+$/.test(cols[0]))
    .map(([index, name, mem]) => ({ id: index, name, memory_total_mb: Number(mem) || undefined }));
}

export function listGpus(): Promise<GpuInfo[]> {
  return new Promise((resolve) => {
    execFile(
      'nvidia-smi',
      ['--query-gpu=index,name,memory.total', '--format=csv,noheader,nounits'],
      { timeout: 5000 },
      (err, stdout) => resolve(err ? [] : parseNvidiaSmi(stdout)),
    );
  });
}
