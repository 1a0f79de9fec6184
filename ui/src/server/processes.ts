// Process liveness and signalling for job processes (spawned detached: each leads its group).
import fs from 'node:fs';

/** True when `pid` names a live, non-zombie process. */
export function isPidAlive(pid: number | null | undefined): boolean {
  if (!pid || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // A zombie answers kill(0) but is dead: Linux shows it as state Z in /proc/<pid>/stat.
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z' || state === 'X') return false;
  } catch {
    // no /proc (macOS, Windows): kill(0) is the best we have
  }
  return true;
}

/** Signal the job's process group (falls back to the pid alone). */
export function signalJobProcess(pid: number, signal: NodeJS.Signals): void {
  if (process.platform !== 'win32') {
    try {
      process.kill(-pid, signal);
      return;
    } catch {
      // not a group leader, or already gone
    }
  }
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}
