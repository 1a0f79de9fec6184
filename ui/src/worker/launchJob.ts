// Start one job process: write <job folder>/config.yaml and spawn `python run.py <it>`
// detached (so it outlives a UI restart), its stdout+stderr appended to <job folder>/log.txt.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { completeJobConfig } from '../server/jobConfig';
import { jobLogPath } from '../server/logTail';
import { jobFolder, pythonPath, repoRoot } from '../server/paths';
import type { JobRow } from '../server/schema';

export function configPathFor(jobName: string): string {
  return path.join(jobFolder(jobName), 'config.yaml');
}

/** Write the completed config (JSON is valid YAML) and return its path. */
export function writeJobConfig(job: JobRow): string {
  const file = configPathFor(job.name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(completeJobConfig(job), null, 2) + '\n');
  fs.renameSync(tmp, file);
  return file;
}

export function jobEnv(job: JobRow): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.AI_TOOLKIT_AUTH; // the job has no use for the UI's secret
  env.AITK_JOB_ID = job.id;
  env.CUDA_VISIBLE_DEVICES = job.gpu_ids === 'cpu' ? '' : job.gpu_ids;
  env.PYTHONUNBUFFERED = '1';
  return env;
}

/** Spawn the job. Throws with a readable message when it cannot start at all. */
export function spawnJob(job: JobRow): ChildProcess {
  const python = pythonPath();
  if (path.isAbsolute(python) && !fs.existsSync(python)) {
    throw new Error(`Python interpreter not found: ${python} (set AITK_PYTHON, or run scripts/setup.sh to make .venv)`);
  }
  const configFile = writeJobConfig(job);
  const logFile = jobLogPath(job.name);
  const fd = fs.openSync(logFile, 'a');
  try {
    fs.writeSync(fd, `\n=== ${new Date().toISOString()} start: ${python} run.py ${configFile} (gpu ${job.gpu_ids}) ===\n`);
    const child = spawn(python, ['run.py', configFile], {
      cwd: repoRoot(),
      env: jobEnv(job),
      detached: true,
      stdio: ['ignore', fd, fd],
      windowsHide: true,
    });
    child.unref();
    return child;
  } finally {
    fs.closeSync(fd);
  }
}
