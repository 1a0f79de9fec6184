// How the Generate page's forms start (formStart.ts): the engine's default model (a profile name or a
// model dict), a Library link's model, saved forms that still fit, and a new arch keeping what the
// person wrote.
import { describe, expect, it } from 'vitest';
import { defaultChoice, freshModel, freshSample, libraryChoice, savedFormsFit } from '@/components/generate/formStart';
import { modelDefaults, sampleDefaults } from '@/components/generate/requestBody';
import type { ProfileInfo } from '@/components/generate/types';
import { archRow as arch } from './archRow';

const sd1 = arch('sd1', { tasks: [{ name: 'txt2img', needs: [], takes: [], strength: null }, { name: 'img2img', needs: ['init_img'], takes: [], strength: 0.8 }] });
const flux = arch('flux', { tasks: [{ name: 'txt2img', needs: [], takes: [], strength: null }], sample: { prompt: '', negative_prompt: '', seed: -1, ...sd1.defaults, width: 1024 } });
const profile: ProfileInfo = { name: 'mine', architecture: 'flux', variant: null, defaults: {}, sample: { width: 512, height: 512, num_inference_steps: 2, guidance_scale: 1, output_ext: 'png' } };

describe('formStart', () => {
  it("the engine's default model: a profile name, a model dict with its weights, else the first arch", () => {
    expect(defaultChoice({ archs: [sd1, flux], profiles: [profile], default_model: 'mine' })).toEqual({ arch: flux, profile, nameOrPath: null });
    expect(defaultChoice({ archs: [sd1, flux], default_model: { arch: 'flux', name_or_path: '/models/flux' } })).toEqual({ arch: flux, profile: null, nameOrPath: '/models/flux' });
    expect(defaultChoice({ archs: [sd1, flux], default_model: null })).toEqual({ arch: sd1, profile: null, nameOrPath: null });
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
});
