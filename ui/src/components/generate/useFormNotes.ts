'use client';
// The notes next to the form's fields: each value checked against the arch's served fields
// (formChecks.ts) and the engine's own answer to the form (POST /resolve, useResolve.ts) where it
// refuses a field the form's checks do not see; and a strength the resolved task does not take
// dropped from the form.
import { useMemo } from 'react';
import { sampleNotes } from './formChecks';
import { resolvedDefaults } from './requestBody';
import { notesWithProblem } from './resolveRequest';
import type { GenerateForms } from './useGenerateForms';
import { useDropUnusedStrength, useResolve } from './useResolve';

export function useFormNotes(jobId: string | null, running: boolean, forms: Pick<GenerateForms, 'arch' | 'model' | 'sample' | 'profiles' | 'maskPainted' | 'setSample'>) {
  const { arch, model, sample, profiles } = forms;
  const resolved = useResolve(jobId, running, arch, model, sample, forms.maskPainted);
  useDropUnusedStrength(resolved, sample?.strength, forms.setSample);
  // an empty number's fix: the default the request would get
  const defaults = arch && model ? resolvedDefaults(arch, model.variant, profiles.find((p) => p.name === model.profile) ?? null) : undefined;
  const local = useMemo(() => (arch && sample ? sampleNotes(arch, sample, defaults) : []), [arch, sample, defaults]);
  const notes = useMemo(() => notesWithProblem(local, resolved.problem), [local, resolved.problem]);
  return { resolved, notes };
}
