// The forms a choice starts (pure): an arch, a profile or a variant chosen (keeping what the person
// wrote), the engine's default model, a model from the Library page (?model=).
import { parseModelParam } from '@/components/library/library';
import { imagesFor, modelDefaults, normalizeSample, resolvedDefaults, sampleDefaults } from './requestBody';
import type { ArchInfo, ModelForm, ModelsResponse, ProfileInfo, SampleForm } from './types';

/** A new model form for an arch (or a profile), at `variant` ('' = its default). */
export const freshModel = (a: ArchInfo, profile: ProfileInfo | null, variant = ''): ModelForm => ({ ...modelDefaults(a, profile), ...(variant ? { variant } : {}) });

/** A new sample form for that model: the prompts and the seed stay, and the input images the arch takes
 * (an asset id is the engine's, whatever the model). */
export function freshSample(a: ArchInfo, m: ModelForm, profile: ProfileInfo | null, prev: SampleForm | null): SampleForm {
  return sampleDefaults(
    resolvedDefaults(a, m.variant, profile),
    a,
    prev ? { prompt: prev.prompt, negative_prompt: prev.negative_prompt, seed: prev.seed, images: imagesFor(a, normalizeSample(prev).images) } : {},
  );
}

/** Whether forms saved by an earlier visit fit this engine: their arch (and profile) exist. */
export function savedFormsFit(archs: ArchInfo[], profiles: ProfileInfo[], model: ModelForm | null, sample: SampleForm | null): boolean {
  const savedOk = model && archs.some((a) => a.name === model.arch) && (!model.profile || profiles.some((p) => p.name === model.profile));
  return !!(savedOk && sample);
}

/** The engine's default model (a profile name, or a model dict like {arch, name_or_path}), else its first arch. */
export function defaultChoice(models: Pick<ModelsResponse, 'archs' | 'profiles' | 'default_model'>): { arch: ArchInfo; profile: ProfileInfo | null; nameOrPath: string | null } {
  const archs = models.archs;
  const dm = models.default_model;
  const profile = typeof dm === 'string' ? ((models.profiles ?? []).find((p) => p.name === dm) ?? null) : null;
  const dmArch = dm && typeof dm === 'object' ? archs.find((a) => a.name === (dm as { arch?: string }).arch) : undefined;
  const arch = archs.find((x) => x.name === profile?.architecture) ?? dmArch ?? archs[0];
  const dmPath = dm && typeof dm === 'object' ? (dm as { name_or_path?: unknown }).name_or_path : undefined;
  return { arch, profile, nameOrPath: dmArch && typeof dmPath === 'string' ? dmPath : null };
}

/** A model from the Library page's link (?model=): its arch (or profile) and its model keys; null when it names none here. */
export function libraryChoice(archs: ArchInfo[], profiles: ProfileInfo[], param: string | null): { arch: ArchInfo; profile: ProfileInfo | null; model: Record<string, unknown> } | null {
  const picked = parseModelParam(param);
  const profile = typeof picked?.profile === 'string' ? (profiles.find((p) => p.name === picked.profile) ?? null) : null;
  const arch = archs.find((x) => x.name === (profile?.architecture ?? picked?.arch));
  return picked && arch ? { arch, profile, model: picked } : null;
}
