'use client';
// The settings page's state: the engine's description and the job's engine block, the drafts, and
// saving: check here (bounds the description gives), then PUT (the engine's Python checks it, a 422
// names the key), then restart a running engine, asking first when it holds requests.
import { useCallback, useEffect, useMemo, useState } from 'react';
import { apiFetch, apiJson, describeError } from '@/utils/api';
import { usePoll } from '@/utils/usePoll';
import {
  blockFromDrafts,
  draftsFromBlock,
  fieldOfKey,
  formFields,
  type Block,
  type Drafts,
  type FieldErrors,
  type SettingsDescription,
} from './engineSettingsForm';
import { engineSummary, requestsHeld, restartEngine } from './restartEngine';
import { isActive, type Job } from './types';

/** idle → saving → (confirm →) restarting → restarted | saved (not running, or restart declined) */
export type SavePhase = 'idle' | 'saving' | 'confirm' | 'stopping' | 'starting' | 'restarted' | 'saved';

async function putSettings(jobId: string, engine: Block): Promise<{ job: Job; engine: Block } | { key: string; message: string }> {
  const res = await apiFetch(`/api/jobs/${jobId}/settings`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ engine }),
  });
  if (res.status === 422) return (await res.json()) as { key: string; message: string };
  if (!res.ok) throw new Error((await describeError(res)).message);
  return res.json();
}

export function useEngineSettings(jobId: string) {
  const [desc, setDesc] = useState<SettingsDescription | null>(null);
  const [job, setJob] = useState<Job | null>(null);
  const [block, setBlock] = useState<Block>({});
  const [drafts, setDrafts] = useState<Drafts>({});
  const [errors, setErrors] = useState<FieldErrors>({});
  const [error, setError] = useState<string | null>(null);
  const [phase, setPhase] = useState<SavePhase>('idle');
  const [held, setHeld] = useState(0);
  const fields = useMemo(() => (desc ? formFields(desc) : []), [desc]);

  useEffect(() => {
    Promise.all([apiJson<{ fields: SettingsDescription }>('/api/engine-settings'), apiJson<{ job: Job; engine: Block }>(`/api/jobs/${jobId}/settings`)])
      .then(([d, s]) => {
        setDesc(d.fields);
        setJob(s.job);
        setBlock(s.engine);
        setDrafts(draftsFromBlock(formFields(d.fields), s.engine));
      })
      .catch((err) => setError((err as Error).message));
  }, [jobId]);

  // the status (what Save does: restart or not) stays current while the page is open
  usePoll(async () => setJob((await apiJson<{ job: Job }>(`/api/jobs/${jobId}`)).job), 2000);

  const setDraft = useCallback((key: string, value: string) => {
    setDrafts((d) => ({ ...d, [key]: value }));
    setErrors((e) => (key in e ? Object.fromEntries(Object.entries(e).filter(([k]) => k !== key)) : e));
    setPhase((p) => (p === 'saved' || p === 'restarted' ? 'idle' : p));
  }, []);

  const restart = useCallback(async () => {
    try {
      await restartEngine(jobId, (p) => setPhase(p === 'ready' ? 'restarted' : p));
    } catch (err) {
      setError((err as Error).message);
      setPhase('idle');
    }
  }, [jobId]);

  const save = useCallback(async () => {
    const out = blockFromDrafts(fields, drafts, block);
    setErrors(out.errors);
    setError(null);
    if (Object.keys(out.errors).length) return;
    setPhase('saving');
    try {
      const answer = await putSettings(jobId, out.block);
      if ('key' in answer) {
        const field = fieldOfKey(fields, answer.key);
        if (field) setErrors({ [field]: answer.message.replace(/^[^:]*:\s*/, '') });
        else setError(answer.message);
        setPhase('idle');
        return;
      }
      setJob(answer.job);
      setBlock(answer.engine);
      if (!isActive(answer.job)) return setPhase('saved');
      const n = requestsHeld(await engineSummary(jobId));
      setHeld(n);
      if (n > 0) return setPhase('confirm');
      await restart();
    } catch (err) {
      setError((err as Error).message);
      setPhase('idle');
    }
  }, [fields, drafts, block, jobId, restart]);

  return { desc, fields, job, block, drafts, setDraft, errors, error, phase, held, save, restart, skipRestart: () => setPhase('saved') };
}

export type EngineSettingsHandle = ReturnType<typeof useEngineSettings>;
