'use client';
// A ready engine's health: the loaded model, busy/queue, memory, the pool's components and the LoRAs
// (adapters) it holds, with load and hit counts as data- attributes for tests.
import { formatBytes, formatSeconds } from '@/utils/format';
import { healthModelText, memoryText } from './engineWords';
import type { AdapterEntry } from './types';
import type { ShownHealth } from './useEngineHealth';

const formatScale = (scale: number | null) => (scale === null ? '?' : String(Math.round(scale * 100) / 100));
const adapterLine = (a: AdapterEntry) =>
  `${a.name} · ${formatBytes(a.bytes)} · ${a.hits} hit${a.hits === 1 ? '' : 's'}${a.active ? ` · active ×${formatScale(a.scale)}` : ''}`;

export default function EngineHealth({ health }: { health: ShownHealth }) {
  // LoRAs the pool holds (newer engines; an older one has no `adapters`)
  const adapters = health.pool.adapters;
  const active = (adapters ?? []).filter((a) => a.active);
  return (
    <>
      <div className="health small" data-testid="engine-health">
        <span data-testid="engine-model">
          Model: <b>{healthModelText(health, health.loading)}</b>
        </span>
        <span>
          {health.busy ? <b>busy</b> : 'idle'}
          {health.queue ? `, ${health.queue} queued` : ''}
        </span>
        <span data-testid="engine-memory">{memoryText(health.memory)}</span>
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
      <ResidentLists health={health} />
    </>
  );
}

/** The pool's components and LoRAs, one line each, folded away. */
function ResidentLists({ health }: { health: ShownHealth }) {
  const adapters = health.pool.adapters;
  return (
    <>
      {health.pool.entries.length > 0 && (
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
      {adapters && adapters.length > 0 && (
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
    </>
  );
}
