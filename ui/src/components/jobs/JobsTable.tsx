'use client';
// The job list: status, info and step, polled; start, stop, delete; inference engines link to /generate.
import Link from 'next/link';
import { useState } from 'react';
import { apiJson, postJson } from '@/utils/api';
import { formatTime } from '@/utils/format';
import { usePoll } from '@/utils/usePoll';
import StatusBadge from './StatusBadge';
import { isActive, type Job } from './types';

export default function JobsTable() {
  const [jobs, setJobs] = useState<Job[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);

  const refresh = async () => {
    try {
      setJobs((await apiJson<{ jobs: Job[] }>('/api/jobs')).jobs);
      setError(null);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  usePoll(refresh, 1500);

  const act = async (job: Job, action: Action) => {
    if (action === 'delete' && !window.confirm(`Delete job '${job.name}'? Its folder and files stay on disk.`)) return;
    setBusy(job.id);
    try {
      if (action === 'delete') await apiJson(`/api/jobs/${job.id}`, { method: 'DELETE' });
      else await postJson(`/api/jobs/${job.id}/${action}`);
      await refresh();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(null);
    }
  };

  return (
    <section>
      {error && (
        <div className="alert error" role="alert">
          {error}
        </div>
      )}
      {jobs === null ? (
        <p className="muted">Loading jobs…</p>
      ) : jobs.length === 0 ? (
        <p className="muted">
          No jobs yet. Start an inference engine on the <Link href="/generate">Generate</Link> page.
        </p>
      ) : (
        <table className="jobs" data-testid="jobs-table">
          <thead>
            <tr>
              <th>Job</th>
              <th>GPU</th>
              <th>Status</th>
              <th>Step</th>
              <th>Info</th>
              <th>Created</th>
              <th aria-label="Actions" />
            </tr>
          </thead>
          <tbody>
            {jobs.map((job) => (
              <JobRow key={job.id} job={job} busy={busy === job.id} onAct={(action) => act(job, action)} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

type Action = 'start' | 'stop' | 'delete';

/** One job: what it is (an engine links to /generate), GPU, status, step, its info's first line, when made, and its actions. */
function JobRow({ job, busy, onAct }: { job: Job; busy: boolean; onAct: (action: Action) => void }) {
  return (
    <tr data-testid={`job-row-${job.name}`} data-status={job.status}>
      <td>
        {job.job_type === 'inference' ? (
          <>
            <Link href={`/generate?job=${job.id}`}>Inference engine</Link>
            <div className="muted small">{job.name}</div>
          </>
        ) : (
          <>
            {job.name}
            <div className="muted small">{job.job_type}</div>
          </>
        )}
      </td>
      <td data-label="GPU">{job.gpu_ids}</td>
      <td data-label="Status">
        <StatusBadge status={job.status} />
      </td>
      <td data-label="Step">{job.step || ''}</td>
      <td data-label="Info" className="info" title={job.info}>
        {job.info.split('\n')[0]}
      </td>
      <td data-label="Created" className="small">{formatTime(job.created_at)}</td>
      <td className="actions">
        {!isActive(job) && (
          <button disabled={busy} onClick={() => onAct('start')}>
            Start
          </button>
        )}
        {(job.status === 'running' || job.status === 'queued') && (
          <button disabled={busy} onClick={() => onAct('stop')}>
            Stop
          </button>
        )}
        {!isActive(job) && (
          <button className="danger" disabled={busy} onClick={() => onAct('delete')}>
            Delete
          </button>
        )}
        {job.job_type === 'inference' && (
          <Link className="button" href={`/jobs/${job.id}/settings`} data-testid="job-settings">
            Settings
          </Link>
        )}
        <Link className="button" href={`/jobs/${job.id}`}>
          Log
        </Link>
      </td>
    </tr>
  );
}
