'use client';
// Pick a device, start/stop its engine job, and show the engine's health (EngineHealth.tsx).
import Link from 'next/link';
import FirstRunEngine from '@/components/jobs/FirstRunEngine';
import EngineHealth from './EngineHealth';
import type { EngineHandle } from './useEngine';

// one word per state, in a badge coloured by the job's status (the job status alone would say
// "running" for both starting and ready; both together said "stopped stopped", "running ready")
const STATE_TEXT: Record<string, string> = {
  loading: 'checking…',
  none: 'not started',
  stopped: 'stopped',
  queued: 'queued',
  starting: 'starting…',
  warming: 'loading model…',
  ready: 'ready',
  stopping: 'stopping…',
  error: 'error',
};
const STATE_BADGE: Record<string, string> = { ready: 'running', starting: 'queued', warming: 'queued', stopping: 'stopping', queued: 'queued', error: 'error' };

export default function EngineStrip({ engine }: { engine: EngineHandle }) {
  const { devices, deviceId, setDeviceId, job, state, health, healthError, actionError, acting } = engine;
  const canStart = state === 'none' || state === 'stopped' || state === 'error';
  const canStop = state === 'ready' || state === 'warming' || state === 'starting' || state === 'queued';
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
          <span className={`badge badge-${STATE_BADGE[state] ?? 'stopped'}`} title={job ? `job status: ${job.status}` : undefined}>
            {STATE_TEXT[state]}
          </span>
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
        {job && <Link className="small" href={`/jobs/${job.id}/settings`} data-testid="engine-settings-link">settings</Link>}
      </div>
      <FirstRunEngine engine={engine} />
      {job?.info && state !== 'ready' && state !== 'warming' && (
        <div className={state === 'error' ? 'alert error engine-info' : 'muted small'} data-testid="engine-info">
          {job.info}
        </div>
      )}
      {state === 'starting' && healthError && <div className="muted small">{healthError}</div>}
      {state === 'warming' && health?.starting && (
        <div className="muted small" data-testid="engine-warming">
          {health.starting[0].toUpperCase() + health.starting.slice(1)}: requests sent now wait for it.
        </div>
      )}
      {actionError && (
        <div className="alert error" role="alert">
          {actionError}
        </div>
      )}
      {health && state === 'ready' && <EngineHealth health={health} />}
    </section>
  );
}
