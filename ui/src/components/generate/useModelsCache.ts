'use client';
// The engine's GET /models, kept in localStorage: with the engine stopped (or not started yet) the
// Generate page's form is built from the last answer this browser saw, so a person can write a prompt
// and set it up before starting. A running engine's own answer replaces it.
import { useEffect } from 'react';
import { useStoredState } from '@/utils/useStoredState';
import type { ModelsResponse } from './types';

export function useModelsCache(live: ModelsResponse | null): { models: ModelsResponse | null; cached: boolean } {
  const [stored, setStored, loaded] = useStoredState<ModelsResponse | null>('aitk.generate.models', null);
  useEffect(() => {
    if (live) setStored(live);
  }, [live, setStored]);
  const models = live ?? (loaded && stored && Array.isArray(stored.archs) ? stored : null);
  return { models, cached: !live && !!models };
}
