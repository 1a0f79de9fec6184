// The job worker: starts queued jobs, escalates stops (stop flag -> SIGTERM -> SIGKILL), and
// settles rows whose process is gone. It adopts running jobs by pid, so a UI restart loses nothing.
import type { ChildProcess } from 'node:child_process';
import { findJob, jobsWithProcesses, jobsWithStatus, nowIso, updateJob } from '../server/jobs';
import { jobLogPath, tailFile } from '../server/logTail';
import { isPidAlive, signalJobProcess } from '../server/processes';
import type { JobRow } from '../server/schema';
import { getDb } from '../server/db';
import { gpuSetsOverlap } from './gpuSets';
import { spawnJob } from './launchJob';

export interface WorkerOptions {
  /** After stop=1, how long the job may take to exit by itself before SIGTERM. */
  graceMs: number;
  /** After SIGTERM, how long before SIGKILL. */
  killMs: number;
  tickMs: number;
  log: (msg: string) => void;
}

interface OwnChild {
  child: ChildProcess;
  gpuIds: string;
  exited: boolean;
  exitNote: string;
}

interface StopState {
  since: number;
  termAt?: number;
  killAt?: number;
}

const INFO_LIMIT = 2000;

/** The last lines of a log, from this run only (launchJob starts each run with a "=== … start:" line). */
export function currentRunTail(log: string, maxLines: number): string {
  const lines = log.split('\n');
  let from = 0;
  lines.forEach((line, i) => {
    if (line.startsWith('=== ') && line.includes(' start: ')) from = i + 1;
  });
  return lines.slice(from).slice(-maxLines).join('\n');
}

export class JobWorker {
  private children = new Map<string, OwnChild>(); // by job id
  private stops = new Map<string, StopState>(); // by job id
  private timer: NodeJS.Timeout | null = null;
  private ticking = false;
  private closed = false;

  constructor(private opts: WorkerOptions) {}

  start(): void {
    this.opts.log('worker started');
    this.tick();
    this.timer = setInterval(() => this.tick(), this.opts.tickMs);
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One pass: settle dead processes, escalate stops, start what can start. Never throws. */
  tick(): void {
    if (this.ticking || this.closed) return;
    this.ticking = true;
    try {
      this.reconcileActive();
      this.startQueued();
    } catch (err) {
      this.opts.log(`tick failed: ${err instanceof Error ? err.stack || err.message : err}`);
    } finally {
      this.ticking = false;
    }
  }

  private isAlive(job: JobRow): boolean {
    const own = this.children.get(job.id);
    if (own && own.child.pid === job.pid) return !own.exited;
    return isPidAlive(job.pid);
  }

  private reconcileActive(): void {
    const rows = jobsWithProcesses();
    const seen = new Set(rows.map((j) => j.id));
    for (const job of rows) {
      const alive = this.isAlive(job);
      if (job.status === 'running' || job.status === 'stopping') {
        if (!alive) this.settle(job.id);
        else if (job.status === 'stopping' || job.stop === 1) this.escalateStop(job);
      } else if (!alive) {
        // it reported stopped/completed/error and has exited: forget the pid
        updateJob(job.id, { pid: null });
        this.children.delete(job.id);
        this.stops.delete(job.id);
      } else {
        // it reported a final status but lingers (and holds its GPU): same escalation as a stop
        this.escalateStop(job);
      }
    }
    for (const id of this.stops.keys()) if (!seen.has(id)) this.stops.delete(id);
    for (const [id, own] of this.children) if (own.exited && !seen.has(id)) this.children.delete(id);
  }

  /** The process is gone: the row ends as stopped (a stop was asked) or error (it died silently). */
  private settle(jobId: string): void {
    const job = findJob(jobId);
    const own = this.children.get(jobId);
    this.children.delete(jobId);
    const stop = this.stops.get(jobId);
    this.stops.delete(jobId);
    if (!job || (job.status !== 'running' && job.status !== 'stopping')) return;
    const exitNote = own?.exitNote || 'process is gone';
    if (job.status === 'stopping' || job.stop === 1) {
      const how = stop?.killAt ? ' (killed with SIGKILL)' : stop?.termAt ? ' (ended with SIGTERM)' : '';
      updateJob(job.id, { status: 'stopped', info: `Stopped${how}`, pid: null });
      this.opts.log(`job ${job.name}: stopped${how}, ${exitNote}`);
    } else {
      const tail = currentRunTail(tailFile(jobLogPath(job.name), 40), 12);
      const info = `Process ended without reporting a status (${exitNote}).${tail ? `\n${tail}` : ''}`;
      updateJob(job.id, { status: 'error', info: info.slice(-INFO_LIMIT), pid: null });
      this.opts.log(`job ${job.name}: error, ${exitNote}`);
    }
  }

  private escalateStop(job: JobRow): void {
    const now = Date.now();
    let st = this.stops.get(job.id);
    if (!st) {
      st = { since: now };
      this.stops.set(job.id, st);
    }
    if (!job.pid) return;
    if (!st.termAt && now - st.since >= this.opts.graceMs) {
      st.termAt = now;
      const after = job.status === 'stopping' || job.status === 'running' ? 'stop' : `reporting ${job.status}`;
      this.opts.log(`job ${job.name}: still alive ${Math.round((now - st.since) / 1000)} s after ${after}, SIGTERM`);
      signalJobProcess(job.pid, 'SIGTERM');
    } else if (st.termAt && !st.killAt && now - st.termAt >= this.opts.killMs) {
      st.killAt = now;
      this.opts.log(`job ${job.name}: still alive after SIGTERM, SIGKILL`);
      signalJobProcess(job.pid, 'SIGKILL');
    }
  }

  private busyGpuSets(): string[] {
    // a process whose row already says stopped may still be freeing its device
    const sets = jobsWithProcesses()
      .filter((j) => j.status === 'running' || j.status === 'stopping' || this.isAlive(j))
      .map((j) => j.gpu_ids);
    for (const own of this.children.values()) if (!own.exited) sets.push(own.gpuIds);
    return sets;
  }

  private startQueued(): void {
    const busy = this.busyGpuSets();
    for (const job of jobsWithStatus(['queued'])) {
      const blocker = busy.find((b) => gpuSetsOverlap(b, job.gpu_ids));
      if (blocker !== undefined) {
        const info = `Queued: waiting for GPU ${job.gpu_ids}`;
        if (job.info !== info) updateJob(job.id, { info });
        continue;
      }
      if (this.launch(job)) busy.push(job.gpu_ids);
    }
  }

  private launch(job: JobRow): boolean {
    // claim the row first so no other worker starts it too
    const claimed = getDb()
      .$client.prepare(
        `UPDATE "Job" SET status='running', stop=0, step=0, pid=NULL, info='Starting…', updated_at=? WHERE id=? AND status='queued'`,
      )
      .run(nowIso(), job.id);
    if (claimed.changes !== 1) return false;
    let child: ChildProcess;
    try {
      child = spawnJob(job);
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      updateJob(job.id, { status: 'error', info: `Could not start: ${msg}`.slice(0, INFO_LIMIT), pid: null });
      this.opts.log(`job ${job.name}: could not start: ${msg}`);
      return false;
    }
    const own: OwnChild = { child, gpuIds: job.gpu_ids, exited: false, exitNote: '' };
    this.children.set(job.id, own);
    child.on('error', (err) => {
      own.exited = true;
      own.exitNote = `could not run the interpreter: ${err.message}`;
      setImmediate(() => this.tick());
    });
    child.on('exit', (code, signal) => {
      own.exited = true;
      own.exitNote = signal ? `killed by ${signal}` : `exit code ${code}`;
      setImmediate(() => this.tick());
    });
    if (child.pid) updateJob(job.id, { pid: child.pid });
    this.opts.log(`job ${job.name}: started pid ${child.pid ?? '?'} on ${job.gpu_ids}`);
    return true;
  }
}
