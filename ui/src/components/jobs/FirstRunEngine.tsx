'use client';
// The Generate page's first run: with no engine job for the device yet, offer to start one pointed
// at the person's models folder (checked by the engine's Python first); once it runs, where to see
// what it found there (/library).
import Link from 'next/link';
import { useState } from 'react';
import { engineJobConfig, engineJobName, type EngineHandle } from '@/components/generate/useEngine';
import { apiFetch, describeError, postJson } from '@/utils/api';
import type { Block } from './engineSettingsForm';
import ModelsFolderOffer from './ModelsFolderOffer';
import type { Job } from './types';

/** Start the device's first engine job with `engine`; a refusal (the engine's, naming the key) as text. */
async function startWithFolders(deviceId: string, engine: Block): Promise<{ job?: Job; problem?: string }> {
  const check = await apiFetch('/api/engine-settings/check', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ engine }),
  });
  if (!check.ok) return { problem: (await describeError(check)).message };
  const name = engineJobName(deviceId);
  const { job } = await postJson<{ job: Job }>('/api/jobs', { name, gpu_ids: deviceId, job_type: 'inference', job_config: engineJobConfig(name, deviceId, engine) });
  await postJson(`/api/jobs/${job.id}/start`);
  return { job };
}

export default function FirstRunEngine({ engine }: { engine: EngineHandle }) {
  const [started, setStarted] = useState<{ job: Job; folder: string } | null>(null);
  const [busy, setBusy] = useState(false);
  if (started) {
    return (
      <div className="muted small" data-testid="first-run-started">
        The engine {engine.state === 'ready' ? 'reads' : 'will read'} <code>{started.folder}</code>: see what it finds there on the{' '}
        <Link href={`/library?job=${started.job.id}`}>Library</Link> page, or change it in the{' '}
        <Link href={`/jobs/${started.job.id}/settings`}>engine settings</Link>.
      </div>
    );
  }
  if (engine.state !== 'none') return null;
  const onUse = async (patch: Block) => {
    setBusy(true);
    try {
      const out = await startWithFolders(engine.deviceId, patch);
      if (out.problem) return out.problem;
      const folder = Object.values(patch).flat().map(String).pop() ?? '';
      setStarted({ job: out.job!, folder });
      return null;
    } catch (err) {
      return (err as Error).message;
    } finally {
      setBusy(false);
    }
  };
  return <ModelsFolderOffer onUse={onUse} action="Use this folder and start" busy={busy} />;
}
