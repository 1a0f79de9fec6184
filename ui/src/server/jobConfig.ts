// The config a job process receives. The UI owns a few keys so they are always right:
// config.name, every process's sqlite_db_path and, for inference engines, engine.job_folder
// and the device that matches the job's GPU set.
import { dbPath, jobFolder } from './paths';
import { ApiError } from './http';

type Obj = Record<string, unknown>;

export const INFERENCE_PROCESS_TYPE = 'InferenceEngine';
/** engine.* keys completeJobConfig sets: not the person's to edit on the settings page. */
export const UI_OWNED_ENGINE_KEYS = ['job_folder'];

function isObj(v: unknown): v is Obj {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

/** Parse and check the shape run.py needs: {job, config: {process: [...]}}. */
export function parseJobConfig(raw: unknown): Obj {
  let cfg = raw;
  if (typeof raw === 'string') {
    try {
      cfg = JSON.parse(raw);
    } catch {
      throw new ApiError(400, 'bad_config', 'job_config is not valid JSON.');
    }
  }
  if (!isObj(cfg) || !isObj(cfg.config) || !Array.isArray(cfg.config.process) || cfg.config.process.length === 0) {
    throw new ApiError(400, 'bad_config', 'job_config must look like {"job": ..., "config": {"process": [{...}]}}.');
  }
  if (!cfg.config.process.every(isObj)) {
    throw new ApiError(400, 'bad_config', 'job_config.config.process must be a list of objects.');
  }
  return cfg;
}

export function deviceForGpuIds(gpuIds: string): string {
  return gpuIds === 'cpu' || gpuIds === '' ? 'cpu' : 'cuda';
}

/** A deep copy of the config with the UI-owned keys filled in for this job. */
export function completeJobConfig(job: { name: string; job_type: string; gpu_ids: string; job_config: unknown }): Obj {
  const cfg = structuredClone(parseJobConfig(job.job_config)) as Obj & { config: Obj & { process: Obj[] } };
  cfg.config.name = job.name;
  for (const proc of cfg.config.process) {
    proc.sqlite_db_path = dbPath();
    if (job.job_type === 'inference' && proc.type === INFERENCE_PROCESS_TYPE) {
      proc.device = deviceForGpuIds(job.gpu_ids);
      proc.engine = { ...(isObj(proc.engine) ? proc.engine : {}), job_folder: jobFolder(job.name) };
    }
  }
  return cfg;
}

function engineProcess(cfg: Obj): Obj | null {
  const procs = (cfg.config as Obj).process as Obj[];
  return procs.find((p) => p.type === INFERENCE_PROCESS_TYPE) ?? null;
}

/** An inference job's `engine:` block as the person set it (the UI-owned keys left out); a 400 when
 * the job runs no InferenceEngine process. */
export function engineBlockOf(job: { name: string; job_type: string; job_config: unknown }): Obj {
  const proc = job.job_type === 'inference' ? engineProcess(parseJobConfig(job.job_config)) : null;
  if (!proc) throw new ApiError(400, 'not_an_engine', `Job '${job.name}' runs no ${INFERENCE_PROCESS_TYPE} process: it has no engine settings.`);
  const block = { ...(isObj(proc.engine) ? proc.engine : {}) };
  for (const k of UI_OWNED_ENGINE_KEYS) delete block[k];
  return block;
}

/** The job's config with its engine block replaced (then completed again, as at creation). */
export function withEngineBlock(job: { name: string; job_type: string; gpu_ids: string; job_config: unknown }, block: Obj): Obj {
  engineBlockOf(job); // the same 400 for a job that is not an engine
  const cfg = structuredClone(parseJobConfig(job.job_config)) as Obj;
  (engineProcess(cfg) as Obj).engine = structuredClone(block);
  return completeJobConfig({ ...job, job_config: cfg });
}
