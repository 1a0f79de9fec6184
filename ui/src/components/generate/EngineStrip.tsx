'use client';
// Pick a device, start/stop its engine job, and show the engine's health: the pool's components and
// the LoRAs (adapters) it holds, with load counts as data- attributes for tests.
import Link from 'next/link';
import { formatBytes, formatSeconds } from '@/utils/format';
import type { AdapterEntry } from './types';
import type { EngineHandle } from './useEngine';

const formatScale = (scale: number | null) => (scale === null ? '?' : String(Math.round(scale * 100) / 100));
const adapterLine = (a: AdapterEntry) =>
  `${a.name} · ${formatBytes(a.bytes)} · ${a.hits} hit${a.hits === 1 ? '' : 's'}${a.active ? ` · active ×${formatScale(a.scale)}` : ''}`;

// one word per state, in a badge coloured by the job's status (the job status alone would say
// "running" for both starting and ready; both together said "stopped stopped", "running ready")
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
const STATE_BADGE: Record<string, string> = { ready: 'running', starting: 'queued', stopping: 'stopping', queued: 'queued', error: 'error' };

export default function EngineStrip({ engine }: { engine: EngineHandle }) {
  const { devices, deviceId, setDeviceId, job, state, health, healthError, actionError, acting } = engine;
  // LoRAs the pool holds (newer engines; an older one has no `adapters`)
  const adapters = health?.pool.adapters;
  const active = (adapters ?? []).filter((a) => a.active);
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
          <span
            title={health.pool.entries.map((e) => `${e.role}: ${e.class} ${formatBytes(e.bytes)} on ${e.device}`).join('\n')}
            data-testid="engine-pool"
            data-loads={health.pool.loads ?? ''}
            data-hits={health.pool.hits}
            data-misses={health.pool.misses}
          >
            Pool: {health.pool.entries.length} resident ({formatBytes(health.pool.resident_bytes)}), hits {health.pool.hits} / misses{' '}
            {health.pool.misses}
            {health.pool.loads !== undefined ? `, loads ${health.pool.loads}` : ''}
            {health.pool.evictions ? `, evictions ${health.pool.evictions}` : ''}
          </span>
          {adapters && (
            <span
              title={adapters.map(adapterLine).join('\n')}
              data-testid="engine-adapters"
              data-adapters={adapters.length}
              data-active={active.map((a) => `${a.name}@${a.scale ?? ''}`).join(' ')}
              data-adapter-loads={health.pool.adapter_loads ?? ''}
              data-adapter-hits={health.pool.adapter_hits ?? ''}
            >
              LoRAs: {adapters.length} resident
              {active.length ? ` (active: ${active.map((a) => `${a.name} ×${formatScale(a.scale)}`).join(', ')})` : ''}
              {health.pool.adapter_loads !== undefined ? `, loads ${health.pool.adapter_loads}` : ''}
              {health.pool.adapter_hits !== undefined ? ` / hits ${health.pool.adapter_hits}` : ''}
            </span>
          )}
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
      {health && state === 'ready' && adapters && adapters.length > 0 && (
        <details className="small">
          <summary>Resident LoRAs</summary>
          <ul className="adapters" data-testid="engine-adapter-list">
            {adapters.map((a) => (
              <li key={a.key} data-testid="engine-adapter" data-name={a.name} data-active={a.active ? 'true' : 'false'} data-scale={a.scale ?? ''}>
                {adapterLine(a)}
              </li>
            ))}
          </ul>
        </details>
      )}
    </section>
  );
}
