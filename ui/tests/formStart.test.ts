// How the Generate page's forms start (formStart.ts): the engine's default model (a profile name or a
// model dict), a Library link's model, saved forms that still fit, and a new arch keeping what the
// person wrote.
import { describe, expect, it } from 'vitest';
import { archSwitchModel, engineDefault, firstPresent, freshModel, freshSample, libraryChoice, openingChoice, savedFormsFit } from '@/components/generate/formStart';
import type { LibraryEntry, LibraryResponse } from '@/components/library/library';
import { modelDefaults, sampleDefaults } from '@/components/generate/requestBody';
import type { ProfileInfo } from '@/components/generate/types';
import { archRow as arch } from './archRow';

const sd1 = arch('sd1', { tasks: [{ name: 'txt2img', needs: [], takes: [], strength: null }, { name: 'img2img', needs: ['init_img'], takes: [], strength: 0.8 }] });
const flux = arch('flux', { tasks: [{ name: 'txt2img', needs: [], takes: [], strength: null }], sample: { prompt: '', negative_prompt: '', seed: -1, ...sd1.defaults, width: 1024 } });
const profile: ProfileInfo = { name: 'mine', architecture: 'flux', variant: null, defaults: {}, sample: { width: 512, height: 512, num_inference_steps: 2, guidance_scale: 1, output_ext: 'png' } };

describe('formStart', () => {
  it("the engine's default model: its job config's engine.default_model, else /models' (a profile name)", () => {
    const job = { job: 'extension', config: { process: [{ type: 'InferenceEngine', engine: { default_model: { arch: 'flux', name_or_path: '/models/flux' } } }] } };
    expect(engineDefault(job, 'mine')).toEqual({ arch: 'flux', name_or_path: '/models/flux' });
    expect(engineDefault({ config: { process: [{ engine: { default_model: 'mine' } }] } }, null)).toEqual({ profile: 'mine' });
    expect(engineDefault({ config: { process: [{ engine: {} }] } }, 'served')).toEqual({ profile: 'served' });
    expect(engineDefault(null, null)).toBeNull();
    expect(engineDefault(undefined, ['not', 'a', 'model'])).toBeNull();
  });

  it("a Library link's model: its arch or profile here, else none", () => {
    expect(libraryChoice([sd1, flux], [profile], JSON.stringify({ arch: 'sd1', name_or_path: '/m/a.safetensors' }))).toEqual({
      arch: sd1,
      profile: null,
      model: { arch: 'sd1', name_or_path: '/m/a.safetensors' },
    });
    expect(libraryChoice([sd1, flux], [profile], JSON.stringify({ profile: 'mine' }))?.arch).toBe(flux);
    expect(libraryChoice([sd1, flux], [profile], JSON.stringify({ arch: 'wan22' }))).toBeNull();
    expect(libraryChoice([sd1, flux], [profile], null)).toBeNull();
  });

  it('saved forms fit while their arch and profile exist', () => {
    const sample = sampleDefaults(sd1.sample, sd1);
    expect(savedFormsFit([sd1], [], modelDefaults(sd1), sample)).toBe(true);
    expect(savedFormsFit([flux], [], modelDefaults(sd1), sample)).toBe(false);
    expect(savedFormsFit([flux], [], { ...modelDefaults(flux), profile: 'gone' }, sample)).toBe(false);
    expect(savedFormsFit([sd1], [], modelDefaults(sd1), null)).toBe(false);
  });

  it("a new arch: its (or the profile's) defaults, the prompts and seed kept, and only the input images it takes", () => {
    const prev = { ...sampleDefaults(sd1.sample, sd1, { prompt: 'a fox', negative_prompt: 'blur', seed: 7 }), images: { init_img: 'abcd1234_in.png' }, width: 320 };
    const onFlux = freshSample(flux, freshModel(flux, null), null, prev);
    expect(onFlux).toMatchObject({ prompt: 'a fox', negative_prompt: 'blur', seed: 7, width: 1024, images: {} });
    expect(freshSample(sd1, freshModel(sd1, null), null, prev).images).toEqual({ init_img: 'abcd1234_in.png' });
    expect(freshSample(flux, freshModel(flux, profile), profile, null)).toMatchObject({ prompt: '', width: 512, num_inference_steps: 2 });
    expect(freshModel(sd1, null, 'v2').variant).toBe('v2');
  });

  it('switching arch keeps a tiny: choice (tiny:zimage -> tiny:sdxl); other weights become the new arch\'s', () => {
    const sdxl = arch('sdxl', { default_name_or_path: 'stabilityai/sdxl' });
    const tinyForm = { ...freshModel(flux, null), name_or_path: 'tiny:zimage' };
    expect(archSwitchModel(tinyForm, sdxl).name_or_path).toBe('tiny:sdxl');
    expect(archSwitchModel(tinyForm, sdxl).arch).toBe('sdxl');
    expect(archSwitchModel({ ...tinyForm, name_or_path: '/models/flux' }, sdxl).name_or_path).toBe(freshModel(sdxl, null).name_or_path);
    expect(archSwitchModel(null, sdxl)).toEqual(freshModel(sdxl, null));
  });
});

const entry = (e: Partial<LibraryEntry>): LibraryEntry =>
  ({ name: 'x', source: 'folder', path: null, repo: null, kind: 'pipeline', arch: 'sd1', variant: null, role: null, dtype: null, format: null, bytes: 0, complete: true, missing: [], model: null, ...e }) as LibraryEntry;
const audio = arch('ace_step', { modality: 'audio' });
const missingAce = { arch: 'ace_step', variant: null, repo: 'ACE-Step/ACE-Step-v1-3.5B', default_present: false, download: 'hf download ACE-Step/ACE-Step-v1-3.5B' };

describe('the model the page opens on', () => {
  it("the first model here: real weights from the library, else a default repo that is here, else an image arch's tiny model; a repo not downloaded never", () => {
    const lib = (entries: LibraryEntry[], archs: LibraryResponse['archs'] = [missingAce]): LibraryResponse => ({ entries, archs });
    const folder = entry({ arch: 'flux', model: { arch: 'flux', name_or_path: '/m/flux' } });
    const tiny = entry({ arch: 'ace_step', source: 'hub', model: { arch: 'ace_step', name_or_path: 'tiny:ace_step' } });
    expect(firstPresent([audio, sd1, flux], lib([tiny, folder]))).toEqual({ arch: flux, profile: null, model: { arch: 'flux', name_or_path: '/m/flux' } });
    // incomplete, or an arch this engine lacks: not a choice
    expect(firstPresent([audio, sd1, flux], lib([entry({ ...folder, complete: false }), entry({ arch: 'wan', model: { arch: 'wan' } })]))?.model.name_or_path).toBe('tiny:sd1');
    const present = { arch: 'flux', variant: null, repo: 'black-forest-labs/FLUX.1-dev', default_present: true };
    expect(firstPresent([audio, sd1, flux], lib([], [missingAce, present]))?.model).toEqual({ arch: 'flux', name_or_path: 'black-forest-labs/FLUX.1-dev' });
    // the case: ace_step first, its repo not here; the library unknown yet too
    expect(firstPresent([audio, sd1], lib([]))?.model).toEqual({ arch: 'sd1', name_or_path: 'tiny:sd1' });
    expect(firstPresent([audio, sd1], null)?.model).toEqual({ arch: 'sd1', name_or_path: 'tiny:sd1' });
    expect(firstPresent([audio], null)?.model).toEqual({ arch: 'ace_step', name_or_path: 'tiny:ace_step' });
  });

  it('a Library link, else the engine default (once: then the saved choice), else the saved forms, else the first model here', () => {
    const base = { archs: [audio, sd1, flux], profiles: [profile], libraryLink: null, engineDefault: null, openedDefault: null, savedFit: false, library: null };
    const dflt = { arch: 'flux', name_or_path: '/models/flux' };
    const link = JSON.stringify({ arch: 'sd1', name_or_path: '/m/a.safetensors' });
    expect(openingChoice({ ...base, libraryLink: link, engineDefault: dflt, savedFit: true })).toMatchObject({ source: 'library-link', choice: { arch: sd1 } });
    expect(openingChoice({ ...base, engineDefault: dflt, savedFit: true })).toMatchObject({ source: 'engine-default', choice: { arch: flux, model: dflt } });
    // opened on that default before: the saved forms (the person's later choice) win; a new default wins again
    expect(openingChoice({ ...base, engineDefault: dflt, openedDefault: JSON.stringify(dflt), savedFit: true })).toEqual({ source: 'saved', choice: null });
    expect(openingChoice({ ...base, engineDefault: { profile: 'mine' }, openedDefault: JSON.stringify(dflt), savedFit: true })).toMatchObject({ source: 'engine-default', choice: { arch: flux, profile } });
    // a default naming an arch this engine lacks is skipped
    expect(openingChoice({ ...base, engineDefault: { arch: 'wan' }, savedFit: true })).toEqual({ source: 'saved', choice: null });
    expect(openingChoice(base)).toMatchObject({ source: 'present', choice: { arch: sd1, model: { name_or_path: 'tiny:sd1' } } });
  });
});
