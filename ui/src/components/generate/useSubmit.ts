'use client';
// Generate: whether a request can go (the forms complete, no blocking note, the model here, the mask not
// going up) and why not, and sending: the painted mask first, then the batch count's requests to the
// engine target with the person's "keep generating when this page closes" (and without a strength the
// task the engine resolves does not take). With the engine down, Generate starts it and sends once it
// answers ("Start engine and generate").
import { useEffect, useRef, useState } from 'react';
import type { EngineSummary } from '@/server/engines';
import { useStoredState } from '@/utils/useStoredState';
import { countBodies, countProblem } from './batchCount';
import { blockingSummary, type FieldNote } from './formChecks';
import { buildGenerateBody } from './requestBody';
import type { useEngine } from './useEngine';
import { targetJob, type EngineTarget } from './useEngines';
import type { GenerateForms } from './useGenerateForms';
import type { useGeneration } from './useGeneration';
import type { useInputImages } from './useInputImages';
import type { Resolved } from './useResolve';

const newRequestId = () => `ui-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

interface Deps {
  engine: ReturnType<typeof useEngine>;
  engines: { target: EngineTarget; engines: EngineSummary[] | null };
  gen: ReturnType<typeof useGeneration>;
  forms: Pick<GenerateForms, 'arch' | 'model' | 'sample' | 'settle'>;
  inputs: Pick<ReturnType<typeof useInputImages>, 'preparing' | 'commitMask'>;
  notes: FieldNote[];
  resolved: Pick<Resolved, 'settle'>;
  /** the model's repo when it is not on this machine (ModelPanel says where to get it) */
  missingRepo: string | null;
}

/** The engine's state as Generate reads it: up, startable (Generate starts it), on its way, or going down. */
function engineStep(state: ReturnType<typeof useEngine>['state']): 'up' | 'start' | 'coming' | 'down' {
  if (state === 'ready' || state === 'warming') return 'up'; // a warming engine queues what it is sent
  if (state === 'none' || state === 'stopped' || state === 'error') return 'start';
  return state === 'queued' || state === 'starting' ? 'coming' : 'down';
}

export function useSubmit({ engine, engines, gen, forms, inputs, notes, resolved, missingRepo }: Deps) {
  const [detach, setDetach] = useStoredState<boolean>('aitk.generate.detach', true);
  const [count, setCount] = useStoredState<number>('aitk.generate.count', 1);
  // Generate pressed with the engine down: sent once it answers
  const [waiting, setWaiting] = useState(false);
  const onItsWay = useRef(false);
  const { arch, model, sample } = forms;
  const job = engine.job;
  const step = engineStep(engine.state);
  const blocked =
    blockingSummary(notes) ??
    (missingRepo ? `Not downloaded: ${missingRepo}. Download it (see the model above) or pick a model that is here.` : null) ??
    countProblem(count);
  const formsOk = !!(arch && model && sample) || step !== 'up'; // with the engine down the forms may wait for its /models
  const canGenerate = formsOk && !inputs.preparing && !blocked && !waiting && (step === 'up' ? !!job : step !== 'down');
  const label = step === 'up' ? 'Generate' : waiting ? 'Starting the engine…' : 'Start engine and generate';
  const whyNot = blocked ?? (step === 'down' ? 'The engine is stopping: start it again once it has stopped.' : null);

  const send = async () => {
    if (!arch || !model || !sample || !job || inputs.preparing) return;
    forms.settle();
    let s = sample;
    try {
      s = await inputs.commitMask(sample);
    } catch (err) {
      gen.fail(`The mask could not be uploaded: ${(err as Error).message}`);
      return;
    }
    // a strength the task the engine resolves does not take stays out (useResolve.ts drops it from the form too)
    if (s.strength !== null) {
      const answer = await resolved.settle().catch(() => null);
      if (answer?.task && answer.strength === null) s = { ...s, strength: null };
    }
    const body = buildGenerateBody(arch, model, s, newRequestId(), { detach, maxFrames: 8 });
    const to = targetJob(engines.target, engines.engines, { id: job.id, name: job.name });
    // the first as the shown request, the others queued behind it (sent detached, as Queue sends)
    if (to) for (const b of countBodies(body, count, newRequestId)) void gen.generate(to, b);
  };

  const generate = async () => {
    if (step === 'up') return send();
    if (step === 'down' || waiting) return;
    forms.settle();
    onItsWay.current = step === 'coming';
    setWaiting(true);
    if (step === 'start') await engine.start();
  };

  // the engine asked for is up (its /models read, the forms built from it): send; a start that failed (refused,
  // or the job back to stopped/error after it was on its way) ends the wait, the strip saying why
  const up = step === 'up' && !!engine.models && !!(arch && model && sample) && !!job;
  useEffect(() => {
    if (!waiting) return;
    if (step === 'coming') onItsWay.current = true;
    if (up) {
      setWaiting(false);
      void send();
    } else if (engine.actionError || (onItsWay.current && step === 'start')) setWaiting(false);
  }, [waiting, up, step, engine.actionError]); // eslint-disable-line react-hooks/exhaustive-deps

  return { canGenerate, whyNot, label, waiting, generate, detach, setDetach, count, setCount };
}
