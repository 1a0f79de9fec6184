// LoRAs: the folder's files (GET /loras) for an arch, several picks into `model.loras`, trigger
// words into the prompt, and picks back from a request (Reuse, a dropped file, an older saved form).
import { describe, expect, it } from 'vitest';
import { addPick, appendTrigger, fileOfPick, hasTrigger, lorasForArch, loraLabel, lorasRequest, normalizeModel, picksFromSettings, resolvePicks } from '@/components/generate/loras';
import { buildGenerateBody, formsFromFile, formsFromSettings, modelDefaults, resolvedDefaults, sampleDefaults } from '@/components/generate/requestBody';
import type { LoraFile, ModelForm } from '@/components/generate/types';
import { archRow } from './archRow';

const sd1 = archRow('sd1', {}, { width: 512, height: 512, num_inference_steps: 20, guidance_scale: 7 });
const stream = { detach: true, maxFrames: 8 };

const file = (name: string, arch: string | null, over: Partial<LoraFile> = {}): LoraFile => ({
  name,
  path: `${name}.safetensors`,
  bytes: 1000,
  mtime: 0,
  format: 'kohya',
  arch,
  rank: 4,
  alpha: 4,
  trigger_words: [],
  output_name: null,
  base_model: null,
  ...over,
});

describe('the folder listing for an arch', () => {
  const files = [file('zeta', 'sd1'), file('sub/alpha', 'SD1'), file('flux-style', 'flux'), file('mystery', null), file('broken', null, { error: 'not a safetensors file' })];

  it("offers the arch's own files, then those that name no arch; counts the others", () => {
    const g = lorasForArch(files, 'sd1');
    expect(g.matching.map((f) => f.name)).toEqual(['sub/alpha', 'zeta']);
    expect(g.unknown.map((f) => f.name)).toEqual(['broken', 'mystery']);
    expect(g.other).toBe(1);
    const flux = lorasForArch(files, 'flux');
    expect(flux.matching.map((f) => f.name)).toEqual(['flux-style']);
    expect(flux.other).toBe(2);
    expect(lorasForArch([], 'sd1')).toEqual({ matching: [], unknown: [], other: 0 });
  });

  it('a pick names a listed file by its relative path, or its absolute path under the folder', () => {
    expect(fileOfPick(files, '/loras', 'sub/alpha.safetensors')?.name).toBe('sub/alpha');
    expect(fileOfPick(files, '/loras/', '/loras/sub/alpha.safetensors')?.name).toBe('sub/alpha');
    expect(fileOfPick(files, '/loras', '/elsewhere/sub/alpha.safetensors')).toBeNull();
    expect(fileOfPick(files, null, 'zeta.safetensors')?.name).toBe('zeta');
  });
});

describe('several LoRAs into the request', () => {
  it('model.loras in the order picked, paths trimmed, each once; none: no key', () => {
    let picks = addPick([], 'sub/alpha.safetensors');
    picks = addPick(picks, ' /abs/other.safetensors ', 0.5);
    picks = addPick(picks, 'sub/alpha.safetensors', 2); // already picked
    picks = addPick(picks, '   ');
    expect(picks).toEqual([
      { path: 'sub/alpha.safetensors', scale: 1 },
      { path: '/abs/other.safetensors', scale: 0.5 },
    ]);
    const model: ModelForm = { ...modelDefaults(sd1), loras: [...picks, { path: 'neg.safetensors', scale: -1.25 }] };
    const body = buildGenerateBody(sd1, model, sampleDefaults(resolvedDefaults(sd1, ''), sd1), 'r', stream);
    expect(body.model).toEqual({
      arch: 'sd1',
      name_or_path: 'org/sd1',
      loras: [
        { path: 'sub/alpha.safetensors', scale: 1 },
        { path: '/abs/other.safetensors', scale: 0.5 },
        { path: 'neg.safetensors', scale: -1.25 },
      ],
    });
    expect(body.model).not.toHaveProperty('lora_path');
    const none = buildGenerateBody(sd1, modelDefaults(sd1), sampleDefaults(resolvedDefaults(sd1, ''), sd1), 'r', stream);
    expect(none.model).not.toHaveProperty('loras');
    expect(lorasRequest([{ path: 'x', scale: NaN }, { path: ' ', scale: 1 }])).toEqual([{ path: 'x', scale: 1 }]);
  });

  it('a profile keeps its LoRAs too', () => {
    const profile = { name: 'p', architecture: 'sd1', variant: null, defaults: {}, sample: sd1.sample };
    const model = { ...modelDefaults(sd1, profile), loras: [{ path: 'a.safetensors', scale: 0.8 }] };
    expect(buildGenerateBody(sd1, model, sampleDefaults(sd1.sample, sd1), 'r', stream).model).toEqual({
      profile: 'p',
      loras: [{ path: 'a.safetensors', scale: 0.8 }],
    });
  });
});

describe('trigger words into the prompt', () => {
  it('appended after a comma, once', () => {
    expect(appendTrigger('', 'sks style')).toBe('sks style');
    expect(appendTrigger('a red fox', 'sks style')).toBe('a red fox, sks style');
    expect(appendTrigger('a red fox, ', 'sks style')).toBe('a red fox, sks style');
    expect(appendTrigger('a red fox,\n', 'sks')).toBe('a red fox, sks');
    const twice = appendTrigger(appendTrigger('a red fox', 'sks style'), 'sks style');
    expect(twice).toBe('a red fox, sks style');
    expect(appendTrigger('a red fox in SKS Style', 'sks style')).toBe('a red fox in SKS Style');
    expect(appendTrigger('a fox', '  ')).toBe('a fox');
  });

  it('a word inside another word does not count as present; punctuation in the word is literal', () => {
    expect(hasTrigger('a redfox', 'fox')).toBe(false);
    expect(hasTrigger('a red fox.', 'fox')).toBe(true);
    expect(appendTrigger('a redfox', 'fox')).toBe('a redfox, fox');
    expect(hasTrigger('ohwx (man)', 'ohwx (man)')).toBe(true);
    expect(hasTrigger('ohwx man', 'ohwx (man)')).toBe(false);
    expect(hasTrigger('c++ style', 'c++')).toBe(true);
    expect(appendTrigger('a photo', 'ümlaut')).toBe('a photo, ümlaut');
    expect(hasTrigger('xümlaut', 'ümlaut')).toBe(false);
  });
});

describe('LoRAs back from a request', () => {
  it("Reuse: a start frame's `loras`, and the one-LoRA shorthand", () => {
    const several = formsFromSettings(
      sd1,
      [],
      { arch: 'sd1', name_or_path: 'tiny:sd1', loras: [{ path: '/loras/sub/a.safetensors', scale: 0.8 }, { path: 'b.safetensors', scale: -0.5 }] },
      { prompt: 'fox' },
      3,
    );
    expect(several.model.loras).toEqual([
      { path: '/loras/sub/a.safetensors', scale: 0.8 },
      { path: 'b.safetensors', scale: -0.5 },
    ]);
    const one = formsFromSettings(sd1, [], { arch: 'sd1', lora_path: '/x/l.safetensors', lora_scale: 0.3 }, {});
    expect(one.model.loras).toEqual([{ path: '/x/l.safetensors', scale: 0.3 }]);
    expect(formsFromSettings(sd1, [], { arch: 'sd1', lora_path: null }, {}).model.loras).toEqual([]);
  });

  it('both forms at once: the shorthand first, not added twice; odd entries are skipped, a missing scale is 1', () => {
    // as the engine resolves a config: the shorthand is also the first entry of `loras`
    expect(
      picksFromSettings({
        loras: [{ path: 'a.safetensors', scale: 0.5, name: null }, 'b.safetensors', { scale: 2 }, null, { path: 'c.safetensors', scale: 'x' }],
        lora_path: 'a.safetensors',
        lora_scale: 0.5,
      }),
    ).toEqual([
      { path: 'a.safetensors', scale: 0.5 },
      { path: 'b.safetensors', scale: 1 },
      { path: 'c.safetensors', scale: 1 },
    ]);
    // as a file records it: the shorthand as itself, `loras` only the entries after it
    expect(picksFromSettings({ lora_path: 'a.safetensors', lora_scale: 0.7, loras: [{ path: 'b.safetensors', scale: 0.5 }] })).toEqual([
      { path: 'a.safetensors', scale: 0.7 },
      { path: 'b.safetensors', scale: 0.5 },
    ]);
  });

  it('a short label per LoRA (the gallery line)', () => {
    expect(loraLabel({ path: '/loras/sub/styleA.safetensors', scale: 0.8 })).toBe('styleA ×0.8');
    expect(loraLabel({ path: 'C:\\loras\\b.SAFETENSORS', scale: -0.35000001 })).toBe('b ×-0.35');
  });

  it("a file's LoRA named by its file name only points at the folder's one file of that name", () => {
    const files = [file('sub/styleB', 'sd1'), file('styleA', 'sd1'), file('x/twin', null), file('y/twin', null)];
    const picks = [
      { path: 'styleB.safetensors', scale: 0.5 },
      { path: 'styleA.safetensors', scale: 1 },
      { path: 'twin.safetensors', scale: 1 },
      { path: 'gone.safetensors', scale: 1 },
    ];
    expect(resolvePicks(picks, files, '/loras')).toEqual([
      { path: 'sub/styleB.safetensors', scale: 0.5 },
      { path: 'styleA.safetensors', scale: 1 },
      { path: 'twin.safetensors', scale: 1 }, // two of that name: left for the person
      { path: 'gone.safetensors', scale: 1 },
    ]);
    const settled = [{ path: 'sub/styleB.safetensors', scale: 1 }, { path: '/abs/styleA.safetensors', scale: 1 }];
    expect(resolvePicks(settled, files, '/loras')).toBe(settled);
  });

  it("a dropped file's settings (POST /settings) fill the picker", () => {
    const forms = formsFromFile([sd1], [], null, {
      model: { arch: 'sd1', name_or_path: 'tiny:sd1', loras: [{ path: 'styleA.safetensors', scale: 1.5 }] },
      sample: { prompt: 'fox, sks' },
    });
    expect('error' in forms).toBe(false);
    if ('error' in forms) return;
    expect(forms.model.loras).toEqual([{ path: 'styleA.safetensors', scale: 1.5 }]);
    expect(forms.sample.prompt).toBe('fox, sks');
  });

  it('a model form saved by an older page: its LoRA path becomes a pick', () => {
    const { loras: _l, ...base } = modelDefaults(sd1);
    const old = { ...base, lora_path: '/l.safetensors', lora_scale: 0.7 } as unknown as ModelForm;
    const m = normalizeModel(old);
    expect(m.loras).toEqual([{ path: '/l.safetensors', scale: 0.7 }]);
    expect(m).not.toHaveProperty('lora_path');
    expect(normalizeModel({ ...base, lora_path: '', lora_scale: 1 } as unknown as ModelForm).loras).toEqual([]);
    const current = modelDefaults(sd1);
    expect(normalizeModel(current)).toBe(current);
  });
});
