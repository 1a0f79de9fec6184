'use client';
// Generate: whether a request can go (the engine ready, the forms complete, no blocking note, the mask
// not going up) and why not, and sending one: the painted mask first, then the request to the engine
// target with the person's "keep generating when this page closes" (and without a strength the task
// the engine resolves does not take).
import type { EngineSummary } from '@/server/engines';
import { useStoredState } from '@/utils/useStoredState';
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
  forms: Pick<GenerateForms, 'arch' | 'model' | 'sample'>;
  inputs: Pick<ReturnType<typeof useInputImages>, 'preparing' | 'commitMask'>;
  notes: FieldNote[];
  resolved: Pick<Resolved, 'settle'>;
}

export function useSubmit({ engine, engines, gen, forms, inputs, notes, resolved }: Deps) {
  const [detach, setDetach] = useStoredState<boolean>('aitk.generate.detach', true);
  const { arch, model, sample } = forms;
  const job = engine.job;
  const running = engine.state === 'ready';
  const blocked = blockingSummary(notes);
  const canGenerate = !!(arch && model && sample && job) && running && !inputs.preparing && !blocked;
  const whyNot = !engine.models
    ? 'Start the engine above: the model list comes from it.'
    : !running
      ? 'The engine is not running: start the engine above to generate.'
      : blocked;

  const generate = async () => {
    if (!arch || !model || !sample || !job || inputs.preparing) return;
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
    if (to) gen.generate(to, body);
  };

  return { canGenerate, whyNot, generate, detach, setDetach };
}
