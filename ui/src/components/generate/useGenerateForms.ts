'use client';
// The Generate page's model and sample forms (kept in localStorage, normalized when an older page
// saved them) over the engine's /models (live, or the last one seen): which model they open on and how
// they start (formStart.ts), and what replaces them as a whole (an arch, a profile, a variant, a library
// entry, a gallery item's or a file's settings).
import { useEffect, useMemo, useRef, useState } from 'react';
import type { LibraryEntry, LibraryResponse } from '@/components/library/library';
import { useStoredState } from '@/utils/useStoredState';
import { archSwitchModel, choiceForm, freshModel, freshSample, openingChoice, savedFormsFit } from './formStart';
import { normalizeModel } from './loras';
import { modelFormFromSettings, normalizeSample, resolvedDefaults, sampleDefaults, withVariant } from './requestBody';
import type { ArchInfo, ModelForm, ModelsResponse, ProfileInfo, SampleForm } from './types';

/** What the opening model depends on besides /models: the engine's default (its job row read: `engineKnown`) and /library. */
export interface Opening {
  engineKnown: boolean;
  engineDefault: Record<string, unknown> | null;
  library: LibraryResponse | null;
}

export function useGenerateForms(models: ModelsResponse | null, preferredModel: string | null, opening: Opening) {
  const [storedModel, setModel, modelLoaded] = useStoredState<ModelForm | null>('aitk.generate.model', null);
  const [openedDefault, setOpenedDefault, openedLoaded] = useStoredState<string | null>('aitk.generate.openedDefault', null);
  const [storedSample, setSample, sampleLoaded] = useStoredState<SampleForm | null>('aitk.generate.sample', null);
  // a form saved by an older page gets the keys added since
  const model = useMemo(() => (storedModel ? normalizeModel(storedModel) : null), [storedModel]);
  const sample = useMemo(() => (storedSample ? normalizeSample(storedSample) : null), [storedSample]);
  /** a mask is painted over the input image (uploaded only on Generate) */
  const [maskPainted, setMaskPainted] = useState(false);
  const archs = useMemo(() => models?.archs ?? [], [models]);
  const profiles = useMemo(() => models?.profiles ?? [], [models]);
  const arch = archs.find((a) => a.name === model?.arch) ?? null;
  const profileNamed = (name: string) => profiles.find((p) => p.name === name) ?? null;

  /** New forms for an arch (or a profile) and its model form, keeping what the person wrote. */
  const resetForms = (a: ArchInfo, profile: ProfileInfo | null, m: ModelForm = freshModel(a, profile)) => {
    setModel(m);
    setSample((prev) => freshSample(a, m, profile, prev));
    setMaskPainted(false);
  };

    // the opening model (formStart.ts openingChoice), once the saved forms, the engine's job row and /models
  // (live or cached) are read; an automatic pick made before /library answered is made again once it does,
  // unless the person changed the model meanwhile; forms that no longer fit the archs are chosen again
  const opened = useRef<{ done: boolean; libraryLink: boolean; auto: string | null }>({ done: false, libraryLink: false, auto: null });
  const fits = savedFormsFit(archs, profiles, model, sample);
  useEffect(() => {
    if (!archs.length || !modelLoaded || !sampleLoaded || !openedLoaded || !opening.engineKnown) return;
    const o = opened.current;
    if (o.done && fits) return;
    const touched = o.auto !== null && o.auto !== JSON.stringify(storedModel);
    if (o.auto !== null && touched && fits) return void (o.done = true);
    const dflt = opening.engineDefault;
    const pick = openingChoice({ archs, profiles, libraryLink: o.libraryLink ? null : preferredModel, engineDefault: dflt, openedDefault, savedFit: fits && o.auto === null, library: opening.library });
    o.libraryLink = true;
    if (pick.choice) {
      const form = choiceForm(pick.choice, profiles);
      resetForms(pick.choice.arch, pick.choice.profile, form);
      o.auto = JSON.stringify(form);
    }
    if (pick.source === 'engine-default') setOpenedDefault(JSON.stringify(dflt));
    o.done = !(pick.source === 'present' && !opening.library);
  }, [archs, modelLoaded, sampleLoaded, openedLoaded, opening.engineKnown, opening.library, fits]); // eslint-disable-line react-hooks/exhaustive-deps

  /** A model from the picker (the engine's library): the forms for its arch, then its model keys. */
  const onPick = (entry: LibraryEntry) => {
    const a = archs.find((x) => x.name === entry.arch);
    if (!a || !entry.model) return;
    resetForms(a, null, modelFormFromSettings(a, profiles, entry.model));
  };
  const onArch = (name: string) => {
    const next = archs.find((a) => a.name === name);
    if (next) resetForms(next, null, archSwitchModel(model, next));
  };
  const onProfile = (name: string) => {
    const p = profileNamed(name);
    resetForms(archs.find((x) => x.name === (p?.architecture ?? model?.arch)) ?? archs[0], p);
  };
  const onVariant = (variant: string) => {
    if (!arch || !model) return;
    setModel(withVariant(arch, model, variant));
    setSample((prev) => sampleDefaults(resolvedDefaults(arch, variant, null), arch, prev ? normalizeSample(prev) : {}));
  };
  /** A change to the sample form; before any /models answer (the first visit, the engine not started) only the
   * prompt, kept for the forms to come. */
  const patchSample = (p: Partial<SampleForm>) =>
    setSample((prev) => (prev ? { ...prev, ...p } : p.prompt !== undefined ? ({ prompt: p.prompt } as SampleForm) : prev));
  /** The person pressed Generate: the opening choice is theirs now (a late /library answer changes nothing). */
  const settle = () => void (opened.current.done = true);
  /** Forms read back from settings (a gallery item, a file). */
  const setForms = (f: { model: ModelForm; sample: SampleForm }) => {
    setModel(f.model);
    setSample(f.sample);
    setMaskPainted(false);
  };

  return { archs, profiles, arch, model, sample, setModel, setSample, patchSample, settle, maskPainted, setMaskPainted, onPick, onArch, onProfile, onVariant, setForms };
}

export type GenerateForms = ReturnType<typeof useGenerateForms>;
