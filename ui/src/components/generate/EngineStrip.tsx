'use client';
// Pick a device, start/stop its engine job, and show the engine's health.
import Link from 'next/link';
import StatusBadge from '@/components/jobs/StatusBadge';
import { formatBytes, formatSeconds } from '@/utils/format';
import type { EngineHandle } from './useEngine';

const STATE_TEXT: Record<string, string> = {
  loading: 'checking…',
  none: 'not started',
  stopped: 'stopped',
  queued: 'queued',
  starting: 'starting…',
  ready: 'ready',
  stopping: 'stopping…',
  error: 'error',
};

export default function EngineStrip({ engine }: { engine: EngineHandle }) {
  const { devices, deviceId, setDeviceId, job, state, health, healthError, actionError, acting } = engine;
  const canStart = state === 'none' || state === 'stopped' || state === 'error';
  const canStop = state === 'ready' || state === 'starting' || state === 'queued';
  return (
    <section className="card engine-strip" aria-label="Inference engine" data-testid="engine-strip" data-state={state}>
      <div className="row wrap">
        <strong>Engine</strong>
        <label>
          Device{' '}
          <select value={deviceId} onChange={(e) => setDeviceId(e.target.value)} aria-label="Device">
            {devices.map((d) => (
              <option key={d.id} value={d.id}>
                {d.id === 'cpu' ? 'cpu' : `GPU ${d.id}: ${d.name}`}
              </option>
            ))}
          </select>
        </label>
        <span data-testid="engine-status">
          {job ? <StatusBadge status={job.status} /> : null} {STATE_TEXT[state]}
        </span>
        {canStart && (
          <button className="primary" onClick={engine.start} disabled={acting} data-testid="engine-start">
            Start engine
          </button>
        )}
        {canStop && (
          <button onClick={engine.stop} disabled={acting} data-testid="engine-stop">
            Stop engine
          </button>
        )}
        {state === 'ready' && (
          <button onClick={engine.unload} disabled={acting || !health?.active} title="Free the loaded model">
            Unload model
          </button>
        )}
        {job && (
          <Link className="small" href={`/jobs/${job.id}`}>
            job log
          </Link>
        )}
      </div>
      {job?.info && state !== 'ready' && (
        <div className={state === 'error' ? 'alert error engine-info' : 'muted small'} data-testid="engine-info">
          {job.info}
        </div>
      )}
      {state === 'starting' && healthError && <div className="muted small">{healthError}</div>}
      {actionError && (
        <div className="alert error" role="alert">
          {actionError}
        </div>
      )}
      {health && state === 'ready' && (
        <div className="health small" data-testid="engine-health">
          <span>
            Model:{' '}
            <b>
              {health.active
                ? `${health.active.profile ? `${health.active.profile}: ` : ''}${health.active.arch}${health.active.variant ? ` ${health.active.variant}` : ''} (${health.active.name_or_path})`
                : 'none loaded'}
            </b>
          </span>
          <span>
            {health.busy ? <b>busy</b> : 'idle'}
            {health.queue ? `, ${health.queue} queued` : ''}
          </span>
          <span>
            Memory ({health.memory.device}): {formatBytes(health.memory.used)} / {formatBytes(health.memory.total)}
          </span>
          <span title={health.pool.entries.map((e) => `${e.role}: ${e.class} ${formatBytes(e.bytes)} on ${e.device}`).join('\n')}>
            Pool: {health.pool.entries.length} resident ({formatBytes(health.pool.resident_bytes)}), hits {health.pool.hits} / misses{' '}
            {health.pool.misses}
            {health.pool.evictions ? `, evictions ${health.pool.evictions}` : ''}
          </span>
          <span>up {formatSeconds(health.uptime)}</span>
        </div>
      )}
      {health && state === 'ready' && health.pool.entries.length > 0 && (
        <details className="small">
          <summary>Resident components</summary>
          <ul className="pool">
            {health.pool.entries.map((e) => (
              <li key={e.key}>
                {e.role}: {e.class} · {formatBytes(e.bytes)} · {e.device}
              </li>
            ))}
          </ul>
        </details>
      )}
    </section>
  );
}
