'use client';
// The engines on this machine (one per GPU set), each with its state, active model and queue, and the
// choice of where Generate sends: the engine above, "auto" (the one holding the model, else the least
// busy), or a named one. Shown once there is more than one engine job.
import type { EngineSummary } from '@/server/engines';
import { engineRowNote } from './engineWords';
import type { EngineTarget } from './useEngines';

const STATE_BADGE: Record<string, string> = { ready: 'running', starting: 'queued', queued: 'queued', unreachable: 'error' };

function modelText(e: EngineSummary): string {
  if (!e.active) return e.busy ? 'loading a model…' : 'no model loaded';
  const a = e.active;
  return a.profile ? `${a.profile} (${a.arch})` : `${a.arch} · ${a.name_or_path}${a.variant ? ` · ${a.variant}` : ''}`;
}

export default function EnginesList({ engines, target, onTarget }: { engines: EngineSummary[]; target: EngineTarget; onTarget: (t: EngineTarget) => void }) {
  const ready = engines.filter((e) => e.state === 'ready');
  return (
    <section className="card" aria-label="Engines" data-testid="engines-list">
      <div className="row wrap">
        <h3>Engines</h3>
        <label>
          Send requests to{' '}
          <select value={target} onChange={(e) => onTarget(e.target.value)} aria-label="Send requests to" data-testid="engine-target">
            <option value="here">the engine above</option>
            <option value="auto">auto (the one holding the model)</option>
            {ready.map((e) => (
              <option key={e.job.id} value={e.job.id}>
                {e.job.name}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ul className="engines">
        {engines.map((e) => (
          <li key={e.job.id} data-testid="engine-row" data-job={e.job.name} data-state={e.state}>
            <span className={`badge badge-${STATE_BADGE[e.state] ?? 'stopped'}`}>{e.state}</span> <strong>{e.job.gpu_ids === 'cpu' ? 'cpu' : `GPU ${e.job.gpu_ids}`}</strong>{' '}
            <span className="muted small">{e.job.name}</span>
            {e.state === 'ready' ? (
              <span className="small">
                {' '}
                · {modelText(e)} · {e.busy ? 'busy' : 'idle'}, {e.queue} queued
              </span>
            ) : (
              engineRowNote(e) && <span className="muted small" data-testid="engine-row-note"> · {engineRowNote(e)}</span>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
