'use client';
// One job: its row and the tail of its log.txt, polled.
import Link from 'next/link';
import { useEffect, useRef, useState } from 'react';
import { apiJson } from '@/utils/api';
import { usePoll } from '@/utils/usePoll';
import StatusBadge from './StatusBadge';
import type { Job } from './types';

export default function JobLog({ id }: { id: string }) {
  const [job, setJob] = useState<Job | null>(null);
  const [log, setLog] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [follow, setFollow] = useState(true);
  const pre = useRef<HTMLPreElement>(null);

  usePoll(async () => {
    try {
      const [j, l] = await Promise.all([
        apiJson<{ job: Job }>(`/api/jobs/${id}`),
        apiJson<{ log: string }>(`/api/jobs/${id}/log?lines=1000`),
      ]);
      setJob(j.job);
      setLog(l.log);
      setError(null);
    } catch (err) {
      setError((err as Error).message);
    }
  }, 2000);

  useEffect(() => {
    if (follow && pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [log, follow]);

  return (
    <section>
      <p>
        <Link href="/jobs">← Jobs</Link>
      </p>
      {error && <div className="alert error">{error}</div>}
      {job && (
        <div className="card">
          <h2>
            {job.job_type === 'inference' ? 'Inference engine' : job.name} <StatusBadge status={job.status} />
          </h2>
          <p className="muted">
            {job.name} · GPU {job.gpu_ids} · step {job.step} {job.pid ? `· pid ${job.pid}` : ''}
            {job.job_type === 'inference' && (
              <>
                {' '}
                · <Link href={`/generate?job=${job.id}`}>open Generate</Link>
              </>
            )}
          </p>
          {job.info && <pre className="info-block">{job.info}</pre>}
        </div>
      )}
      <div className="row">
        <h3>log.txt</h3>
        <label className="small">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} /> follow
        </label>
      </div>
      <pre className="log" ref={pre} data-testid="job-log">
        {log || '(empty)'}
      </pre>
    </section>
  );
}
