// Where things live on disk. Every path is resolved at call time from the environment,
// so the worker, the Next server and the tests all agree and tests can point them elsewhere.
import path from 'node:path';

/** The repository root (the folder holding run.py). The launcher sets AITK_REPO_ROOT; else ui/.. */
export function repoRoot(): string {
  return path.resolve(/*turbopackIgnore: true*/ process.env.AITK_REPO_ROOT || path.join(process.cwd(), '..'));
}

/** The SQLite file shared with the Python jobs. */
export function dbPath(): string {
  return path.resolve(/*turbopackIgnore: true*/ process.env.AITK_DB_PATH || path.join(repoRoot(), 'aitk_db.db'));
}

/** Where job folders go: <training folder>/<job name>/. */
export function trainingFolder(): string {
  return path.resolve(/*turbopackIgnore: true*/ process.env.AITK_TRAINING_FOLDER || path.join(repoRoot(), 'output'));
}

export function jobFolder(jobName: string): string {
  return path.join(trainingFolder(), jobName);
}

/** The interpreter that runs run.py: AITK_PYTHON, else the project's venv. */
export function pythonPath(): string {
  if (process.env.AITK_PYTHON) return process.env.AITK_PYTHON;
  const venv = process.platform === 'win32' ? ['.venv', 'Scripts', 'python.exe'] : ['.venv', 'bin', 'python'];
  return path.join(/*turbopackIgnore: true*/ repoRoot(), ...venv);
}

/** Job names become folder names: keep them to one safe path segment. */
export function isSafeJobName(name: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(name) && !name.includes('..');
}

/** Resolve `rel` inside `base`, or null when it would escape it. */
export function resolveInside(base: string, rel: string): string | null {
  const full = path.resolve(/*turbopackIgnore: true*/ base, rel);
  const relative = path.relative(base, full);
  if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) return null;
  return full;
}
