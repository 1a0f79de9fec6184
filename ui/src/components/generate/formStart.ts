// The forms a choice starts (pure): an arch, a profile or a variant chosen (keeping what the person
// wrote), the engine's default model, a model from the Library page (?model=), and which of these the
// page opens on (openingChoice).
import { parseModelParam, type LibraryResponse } from '@/components/library/library';
import { imagesFor, modelDefaults, modelFormFromSettings, normalizeSample, resolvedDefaults, sampleDefaults } from './requestBody';
import type { ArchInfo, ModelForm, ProfileInfo, SampleForm } from './types';

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

export interface ModelChoice {
  arch: ArchInfo;
  profile: ProfileInfo | null;
  model: Record<string, unknown>;
}

/** A model dict ({profile} or {arch, name_or_path, ...}) as a choice here; null when its arch (or profile) is not. */
export function modelChoice(archs: ArchInfo[], profiles: ProfileInfo[], picked: Record<string, unknown> | null): ModelChoice | null {
  const profile = typeof picked?.profile === 'string' ? (profiles.find((p) => p.name === picked.profile) ?? null) : null;
  const arch = archs.find((x) => x.name === (profile?.architecture ?? picked?.arch));
  return picked && arch ? { arch, profile, model: picked } : null;
}

/** A model from the Library page's link (?model=): its arch (or profile) and its model keys; null when it names none here. */
export function libraryChoice(archs: ArchInfo[], profiles: ProfileInfo[], param: string | null): ModelChoice | null {
  return modelChoice(archs, profiles, parseModelParam(param));
}

/** The model form a choice fills. */
export const choiceForm = (c: ModelChoice, profiles: ProfileInfo[]): ModelForm => modelFormFromSettings(c.arch, profiles, c.model);

const TINY = 'tiny:';

/** A new arch's model form: a `tiny:` choice stays one (tiny:zimage -> tiny:sdxl), other weights become the arch's. */
export function archSwitchModel(prev: ModelForm | null, next: ArchInfo): ModelForm {
  const m = freshModel(next, null);
  return prev && prev.name_or_path.startsWith(TINY) ? { ...m, name_or_path: `${TINY}${next.name}` } : m;
}

/** The engine's default model as a model dict: its job config's `engine.default_model` (what it warm-loads),
 * else /models' (the profiles' default); a profile name becomes {profile}. */
export function engineDefault(jobConfig: unknown, served: unknown): Record<string, unknown> | null {
  const proc = (jobConfig as { config?: { process?: { engine?: { default_model?: unknown } }[] } } | null)?.config?.process?.[0];
  const dm = proc?.engine?.default_model ?? served;
  if (typeof dm === 'string' && dm) return { profile: dm };
  return dm && typeof dm === 'object' && !Array.isArray(dm) ? (dm as Record<string, unknown>) : null;
}

/** The first model here: a complete library entry with real weights (hub cache, model folders), else an
 * arch whose default repo is here, else the first image arch's tiny model (built offline, so always here). A repo not downloaded never counts. With the library unknown (the engine
 * not up yet) only the tiny model is sure. */
export function firstPresent(archs: ArchInfo[], library: LibraryResponse | null): ModelChoice | null {
  const known = (name: string | null | undefined) => archs.find((a) => a.name === name);
  const usable = (library?.entries ?? []).filter((e) => known(e.arch) && e.model && e.complete && e.source !== 'profile');
  const isTiny = (m: Record<string, unknown> | null) => String(m?.name_or_path ?? '').startsWith(TINY);
  const real = usable.find((e) => !isTiny(e.model));
  if (real) return { arch: known(real.arch)!, profile: null, model: real.model! };
  const row = library?.archs.find((r) => r.default_present && known(r.arch));
  if (row) return { arch: known(row.arch)!, profile: null, model: { arch: row.arch, name_or_path: row.repo, ...(row.variant ? { variant: row.variant } : {}) } };
  const arch = archs.find((a) => a.modality === 'image') ?? archs[0];
  return arch ? { arch, profile: null, model: { arch: arch.name, name_or_path: `${TINY}${arch.name}` } } : null;
}

export type OpeningSource = 'library-link' | 'engine-default' | 'saved' | 'present';

/**
 * What the page opens on: a Library link's model (?model=), else the engine's default model (once per
 * default: after the page opened on it, the person's later choice, saved, wins), else the saved forms
 * (the last used), else the first model here. `choice` null: keep the saved forms.
 */
export function openingChoice(o: {
  archs: ArchInfo[];
  profiles: ProfileInfo[];
  libraryLink: string | null;
  engineDefault: Record<string, unknown> | null;
  /** the engine default the page last opened on (JSON), if any */
  openedDefault: string | null;
  savedFit: boolean;
  library: LibraryResponse | null;
}): { source: OpeningSource; choice: ModelChoice | null } {
  const link = libraryChoice(o.archs, o.profiles, o.libraryLink);
  if (link) return { source: 'library-link', choice: link };
  const dflt = modelChoice(o.archs, o.profiles, o.engineDefault);
  if (dflt && !(o.savedFit && o.openedDefault === JSON.stringify(o.engineDefault))) return { source: 'engine-default', choice: dflt };
  if (o.savedFit) return { source: 'saved', choice: null };
  return { source: 'present', choice: firstPresent(o.archs, o.library) };
}
