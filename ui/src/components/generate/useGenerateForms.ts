'use client';
// The Generate page's model and sample forms (kept in localStorage, normalized when an older page
// saved them) over the engine's /models: how they start (formStart.ts) and what replaces them as a
// whole (an arch, a profile, a variant, a library entry, a gallery item's or a file's settings).
import { useEffect, useMemo, useRef, useState } from 'react';
import type { LibraryEntry } from '@/components/library/library';
import { useStoredState } from '@/utils/useStoredState';
import { defaultChoice, freshModel, freshSample, libraryChoice, savedFormsFit } from './formStart';
import { normalizeModel } from './loras';
import { modelFormFromSettings, normalizeSample, resolvedDefaults, sampleDefaults, withVariant } from './requestBody';
import type { ArchInfo, ModelForm, ModelsResponse, ProfileInfo, SampleForm } from './types';

export function useGenerateForms(models: ModelsResponse | null, preferredModel: string | null) {
  const [storedModel, setModel, modelLoaded] = useStoredState<ModelForm | null>('aitk.generate.model', null);
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

  /** New forms for an arch (or a profile), keeping what the person wrote. */
  const resetForms = (a: ArchInfo, profile: ProfileInfo | null, variant = '') => {
    const m = freshModel(a, profile, variant);
    setModel(m);
    setSample((prev) => freshSample(a, m, profile, prev));
    setMaskPainted(false);
  };

  // first /models answer: a model from the Library page (?model=, once), else the saved forms if their
  // arch (and profile) exist, else the engine's default model
  const libraryModelUsed = useRef(false);
  useEffect(() => {
    if (!models || !archs.length || !modelLoaded || !sampleLoaded) return;
    const picked = libraryModelUsed.current ? null : libraryChoice(archs, profiles, preferredModel);
    libraryModelUsed.current = true;
    if (picked) {
      resetForms(picked.arch, picked.profile);
      setModel(modelFormFromSettings(picked.arch, profiles, picked.model));
      return;
    }
    if (savedFormsFit(archs, profiles, model, sample)) return;
    const d = defaultChoice(models);
    resetForms(d.arch, d.profile);
    const path = d.nameOrPath;
    if (path !== null) setModel((m) => (m ? { ...m, name_or_path: path } : m));
  }, [archs, modelLoaded, sampleLoaded]); // eslint-disable-line react-hooks/exhaustive-deps

  /** A model from the picker (the engine's library): the forms for its arch, then its model keys. */
  const onPick = (entry: LibraryEntry) => {
    const a = archs.find((x) => x.name === entry.arch);
    if (!a || !entry.model) return;
    resetForms(a, null, typeof entry.model.variant === 'string' ? entry.model.variant : '');
    setModel(modelFormFromSettings(a, profiles, entry.model));
  };
  const onArch = (name: string) => {
    const next = archs.find((a) => a.name === name);
    if (next) resetForms(next, null);
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
  /** Forms read back from settings (a gallery item, a file). */
  const setForms = (f: { model: ModelForm; sample: SampleForm }) => {
    setModel(f.model);
    setSample(f.sample);
    setMaskPainted(false);
  };

  return { archs, profiles, arch, model, sample, setModel, setSample, maskPainted, setMaskPainted, onPick, onArch, onProfile, onVariant, setForms };
}

export type GenerateForms = ReturnType<typeof useGenerateForms>;
