'use client';
// The engine's answer to the form as it stands (POST /resolve, resolveRequest.ts), asked a moment
// after the last change, a newer question cancelling the older one: the task the request runs and
// its default strength (the last named one stays until the next answer, so neither a wrong width nor
// an answer on its way hides it), and the field the engine would refuse now. `settle()` gives the answer to the form as it is
// now, asking at once if the last one is stale (Generate uses it).
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { INPUT_KEYS, dryRun, formAnswer, problemPlace, type ResolveAnswer } from './resolveRequest';
import { SAMPLE_INPUTS, type ArchInfo, type ModelForm, type SampleForm } from './types';

const DEBOUNCE_MS = 250;

type Tagged = ResolveAnswer & { key: string; inputsKey: string; modelKey: string };

export function useResolve(jobId: string | null, enabled: boolean, arch: ArchInfo | null, model: ModelForm | null, sample: SampleForm | null, maskPainted: boolean) {
  const ask = useMemo(() => (arch && model && sample ? dryRun(arch, model, sample, maskPainted) : null), [arch, model, sample, maskPainted]);
  const key = ask ? JSON.stringify(ask) : '';
  // what decides the task: the model, the input images, the chosen task
  const modelKey = ask ? JSON.stringify(ask.body.model) : '';
  const inputsKey = ask ? JSON.stringify([modelKey, ...[...SAMPLE_INPUTS, 'task'].map((k) => ask.body.sample[k] ?? null)]) : '';
  const [answer, setAnswer] = useState<Tagged | null>(null);
  /** the last answer that named a task */
  const [known, setKnown] = useState<Tagged | null>(null);
  const latest = useRef({ jobId, enabled, ask, key, inputsKey, modelKey, answer });
  latest.current = { jobId, enabled, ask, key, inputsKey, modelKey, answer };

  const take = useCallback((a: ResolveAnswer, k: string, ik: string, mk: string): Tagged => {
    const tagged = { ...a, key: k, inputsKey: ik, modelKey: mk };
    setAnswer(tagged);
    if (a.task !== null) setKnown(tagged);
    return tagged;
  }, []);

  useEffect(() => {
    if (!enabled || !jobId || !ask) return;
    const ctl = new AbortController();
    const timer = setTimeout(() => {
      formAnswer(jobId, ask, ctl.signal)
        .then((a) => a && !ctl.signal.aborted && take(a, key, inputsKey, modelKey))
        .catch(() => undefined); // no answer: the form shows no task, and Generate still asks the engine
    }, DEBOUNCE_MS);
    return () => {
      clearTimeout(timer);
      ctl.abort();
    };
  }, [key, jobId, enabled]); // eslint-disable-line react-hooks/exhaustive-deps

  const settle = useCallback(async (): Promise<ResolveAnswer | null> => {
    const now = latest.current;
    if (now.answer?.key === now.key) return now.answer;
    if (!now.enabled || !now.jobId || !now.ask) return null;
    const a = await formAnswer(now.jobId, now.ask).catch(() => null);
    return a && take(a, now.key, now.inputsKey, now.modelKey);
  }, [take]);

  const now = answer?.key === key ? answer : null;
  const problem = now?.problem ?? null;
  // the last task named for this model stays shown while a newer answer is on its way (no flicker,
  // no layout jump); not once the engine, naming no task for the form as it is, refuses its inputs or
  // refuses another field of inputs it has named no task for
  const place = problem ? problemPlace(problem) : null;
  const stale = known?.inputsKey !== inputsKey;
  const untasked = !!now && now.task === null && ((!!place && 'sample' in place && INPUT_KEYS.has(place.sample)) || stale);
  const shown = known?.modelKey !== modelKey || untasked ? null : known;
  return {
    /** the task the request runs (null: not known yet, or the inputs fit none) */
    task: shown?.task ?? null,
    /** that task's default strength (null: it takes none) */
    defaultStrength: shown?.strength ?? null,
    /** the task shown is the engine's answer for the inputs as they are now */
    current: !!shown && !stale,
    /** the field the engine refuses in the form as it is */
    problem,
    settle,
  };
}

export type Resolved = ReturnType<typeof useResolve>;

/** A task the engine resolves that takes no strength: the form's strength goes (the request would be
 * refused with it, and a grid from these settings sends it). */
export function useDropUnusedStrength(resolved: Pick<Resolved, 'task' | 'defaultStrength' | 'current'>, strength: number | null | undefined, setSample: (fn: (prev: SampleForm | null) => SampleForm | null) => void) {
  const drop = resolved.current && resolved.task !== null && resolved.defaultStrength === null && strength !== null && strength !== undefined;
  useEffect(() => {
    if (drop) setSample((prev) => (prev ? { ...prev, strength: null } : prev));
  }, [drop, setSample]);
}
