// Tasks, input images, samplers and batches: which task runs is the engine's answer (POST /resolve:
// the dry run the form asks, and where its refusal shows), and the request carries the inputs the form
// holds. The arch rows are GET /models' (tasks, samplers, batch, fields).
import { describe, expect, it } from 'vitest';
import {
  buildGenerateBody,
  formsFromFile,
  modelDefaults,
  normalizeSample,
  presentInputs,
  resolvedDefaults,
  sampleDefaults,
  sampleFormFromSettings,
  samplerFromSettings,
  type SettingsAnswer,
} from '@/components/generate/requestBody';
import { archTakesInputs } from '@/components/generate/InputsPanel';
import { dryRun, notesWithProblem, problemPlace, problemText } from '@/components/generate/resolveRequest';
import { assetDisplayName, assetUploadName, referenceSlots, withoutReference } from '@/components/generate/tasks';
import type { ArchInfo, SampleForm, SamplerInfo, TaskInfo } from '@/components/generate/types';
import { archRow } from './archRow';

const t = (name: string, needs: string[] = [], takes: string[] = [], strength: number | null = null): TaskInfo => ({ name, needs, takes, strength });
const EPS_SAMPLERS: SamplerInfo[] = [
  { name: 'euler', label: 'Euler', schedule: 'automatic', scheduler: 'EulerDiscreteScheduler' },
  { name: 'euler_a', label: 'Euler a', schedule: 'automatic', scheduler: 'EulerAncestralDiscreteScheduler' },
  { name: 'dpm++_2m', label: 'DPM++ 2M', schedule: 'automatic', scheduler: 'DPMSolverMultistepScheduler' },
  { name: 'dpm++_2m_karras', label: 'DPM++ 2M', schedule: 'karras', scheduler: 'DPMSolverMultistepScheduler' },
];
const FLOW_SAMPLERS: SamplerInfo[] = [{ name: 'euler', label: 'Euler', schedule: 'automatic', scheduler: 'FlowMatchEulerDiscreteScheduler' }];

function arch(name: string, over: Partial<ArchInfo>): ArchInfo {
  const a = archRow(name, { samplers: FLOW_SAMPLERS, batch: true, ...over });
  if (over.sample) return a;
  return { ...a, sample: { ...a.sample, task: over.tasks?.[0]?.name ?? null, strength: null, resize_mode: 'crop', sampler: null, batch_size: 1 } };
}

// the rows GET /models serves for these archs (their tasks, samplers, batch)
const sd1 = arch('sd1', { tasks: [t('txt2img'), t('img2img', ['init_img'], [], 0.8), t('inpaint', ['init_img', 'mask_img'], [], 1.0)], samplers: EPS_SAMPLERS });
const sdxl = arch('sdxl', { tasks: [t('txt2img'), t('img2img', ['init_img'], [], 0.3), t('inpaint', ['init_img', 'mask_img'], [], 0.9999)], samplers: EPS_SAMPLERS });
const chroma = arch('chroma', { tasks: [t('txt2img'), t('img2img', ['init_img'], [], 0.9)] });
const cogview4 = arch('cogview4', { tasks: [t('txt2img')] });
const wan21 = arch('wan21', { modality: 'video', tasks: [t('txt2img')] });
const wan22 = arch('wan22_5b', { modality: 'video', tasks: [t('txt2img'), t('i2v', ['init_img'])] });
const qwenEdit = arch('qwen_image_edit', { needs_ctrl_img: true, tasks: [t('edit', ['ctrl_img'], ['ctrl_img_1', 'ctrl_img_2'])] });
const kontext = arch('flux_kontext', { needs_ctrl_img: true, tasks: [t('edit', ['ctrl_img'])] });
const klein = arch('flux2_klein', { tasks: [t('txt2img'), t('edit', ['ctrl_img'], ['ctrl_img_1', 'ctrl_img_2', 'ctrl_img_3'])] });
const aceStep = arch('ace_step', { modality: 'audio', tasks: [t('txt2img')], batch: false, samplers: FLOW_SAMPLERS });

const form = (a: ArchInfo, over: Partial<SampleForm> = {}): SampleForm => ({ ...sampleDefaults(resolvedDefaults(a, ''), a, { prompt: 'p', seed: 1 }), ...over });
const body = (a: ArchInfo, over: Partial<SampleForm> = {}) => buildGenerateBody(a, modelDefaults(a), form(a, over), 'r', { detach: true, maxFrames: 8 }).sample;

describe('the dry run (POST /resolve): the task is the engine\'s answer', () => {
  it('the form as /resolve asks it: asset ids, a mask painted but not uploaded as "present", the strength apart', () => {
    expect(presentInputs(form(sd1, { images: { init_img: 'a' } }), true)).toEqual({ init_img: 'a', mask_img: 'present' });
    expect(presentInputs(form(sd1, { images: {} }), true)).toEqual({}); // no image, no mask
    const ask = dryRun(sd1, modelDefaults(sd1), form(sd1, { images: { init_img: 'a1_in.png' }, strength: 0.4 }), true);
    expect(ask.body.sample).toMatchObject({ init_img: 'a1_in.png', mask_img: 'present', resize_mode: 'crop' });
    expect(ask.body.sample).not.toHaveProperty('strength');
    expect(ask.strength).toBe(0.4);
    expect(ask.body.model).toEqual({ arch: 'sd1', name_or_path: 'org/sd1' });
  });

  // refusals as the engine words them (captured from POST /resolve on a tiny engine)
  const refusals = {
    needsRef: { detail: 'sample.ctrl_img: task edit of arch qwen_image_edit needs ctrl_img (the reference image to edit)', field: 'sample.ctrl_img' },
    lora: { detail: 'model.loras[0].path: no such file: /nonexistent/lora.safetensors', field: 'model.loras[0].path' },
    pixels: { detail: 'sample.width: 8192x8192 is 67108864 pixels, over engine.limits.max_pixels (16777216)', field: 'sample.width' },
    profile: { detail: "model.profile: unknown model profile 'nope' (known: none)", field: 'model.profile' },
    strength: { detail: 'sample.strength: strength 0.3 of 3 steps is less than one step: raise strength or num_inference_steps', field: 'sample.strength' },
  };

  it('a refusal shows where its field is: a sample field, one LoRA, the model', () => {
    expect(problemPlace(refusals.needsRef)).toEqual({ sample: 'ctrl_img' });
    expect(problemPlace(refusals.lora)).toEqual({ lora: 0 });
    expect(problemPlace(refusals.profile)).toEqual({ model: true });
    expect(problemText(refusals.needsRef)).toBe('Task edit of arch qwen_image_edit needs ctrl_img (the reference image to edit)');
    expect(problemText(refusals.pixels)).toBe('8192x8192 is 67108864 pixels, over engine.limits.max_pixels (16777216)');
    expect(problemText(refusals.strength)).toBe('Strength 0.3 of 3 steps is less than one step: raise strength or num_inference_steps.');
  });

  it("the engine's refusal of a field the form's checks pass joins its notes; the inputs' ones show in their panel", () => {
    const local = [{ field: 'prompt', message: 'The prompt is empty: the model samples with no text to follow.', blocking: false }];
    expect(notesWithProblem(local, refusals.pixels)).toEqual([...local, { field: 'width', message: problemText(refusals.pixels), blocking: false, engine: true }]);
    const refused = [{ field: 'width', message: 'Width 70 is not a multiple of 16, which zimage needs (64 or 80).', blocking: true }];
    expect(notesWithProblem(refused, { field: 'sample.width', detail: 'sample.width: 70 is not a multiple of 16, which arch zimage needs' })).toBe(refused);
    for (const p of [refusals.needsRef, refusals.strength, refusals.lora, refusals.profile, null]) expect(notesWithProblem(local, p)).toBe(local);
  });
});

describe('reference slots: as many as the edit task takes', () => {
  it('from the tasks; one for an older engine that says only needs_ctrl_img', () => {
    expect(referenceSlots(qwenEdit)).toEqual(['ctrl_img', 'ctrl_img_1', 'ctrl_img_2']);
    expect(referenceSlots(klein)).toEqual(['ctrl_img', 'ctrl_img_1', 'ctrl_img_2', 'ctrl_img_3']);
    expect(referenceSlots(kontext)).toEqual(['ctrl_img']);
    expect(referenceSlots(sd1)).toEqual([]);
    expect(referenceSlots({ ...kontext, tasks: undefined })).toEqual(['ctrl_img']);
    expect(referenceSlots({ ...sd1, tasks: undefined })).toEqual([]);
  });

  it('clearing a slot moves the later references up (the engine fills ctrl_img first)', () => {
    const slots = referenceSlots(klein);
    const images = { ctrl_img: 'a', ctrl_img_1: 'b', ctrl_img_2: 'c', init_img: 'x' };
    expect(withoutReference(images, slots, 'ctrl_img')).toEqual({ ctrl_img: 'b', ctrl_img_1: 'c', ctrl_img_2: null, ctrl_img_3: null, init_img: 'x' });
    expect(withoutReference(images, slots, 'ctrl_img_2')).toEqual({ ctrl_img: 'a', ctrl_img_1: 'b', ctrl_img_2: null, ctrl_img_3: null, init_img: 'x' });
  });
});

describe('the request: inputs, task, strength, resize mode, sampler, batch', () => {
  it('img2img by inference: the init image and resize mode; no task key; strength only once moved', () => {
    expect(body(sd1, { images: { init_img: 'a1_in.png' } })).toMatchObject({ init_img: 'a1_in.png', resize_mode: 'crop' });
    const b = body(sd1, { images: { init_img: 'a1_in.png' } });
    for (const k of ['task', 'strength', 'mask_img', 'sampler', 'batch_size']) expect(b).not.toHaveProperty(k);
    expect(body(sd1, { images: { init_img: 'a1_in.png' }, strength: 0.4, resize_mode: 'fill' })).toMatchObject({ strength: 0.4, resize_mode: 'fill' });
  });

  it("inpaint by inference: image and mask; a chosen task goes with every input the form holds (the engine names one it does not take)", () => {
    const images = { init_img: 'a1_in.png', mask_img: 'b2_mask.png' };
    expect(body(sd1, { images })).toMatchObject(images);
    expect(body(sd1, { images, task: 'img2img' })).toMatchObject({ task: 'img2img', ...images });
    expect(body(sd1, { images, task: 'edit' })).not.toHaveProperty('task'); // not one of sd1's (restored from another arch)
  });

  it("edit: the references the arch takes; i2v: the first frame (a strength the resolved task does not take is dropped from the form: useResolve.ts)", () => {
    const refs = { ctrl_img: 'r0.png', ctrl_img_1: 'r1.png', ctrl_img_2: 'r2.png' };
    expect(body(qwenEdit, { images: refs })).toMatchObject(refs);
    expect(referenceSlots(kontext)).toEqual(['ctrl_img']); // its form holds one reference
    expect(body(kontext, { images: { ctrl_img: 'r0.png' } })).toMatchObject({ ctrl_img: 'r0.png' });
    const v = body(wan22, { images: { init_img: 'f.png' } });
    expect(v).toMatchObject({ init_img: 'f.png', resize_mode: 'crop' });
    expect(v).not.toHaveProperty('strength');
  });

  it('v2v, a2a and audio_inpaint: the input video with its mask, the input audio, the region only with the audio', () => {
    const vace = arch('wan_vace', { modality: 'video', tasks: [t('txt2img'), t('v2v', ['init_video'], ['mask_video', 'ctrl_img']), t('edit', ['ctrl_img'])] });
    expect(archTakesInputs(vace)).toBe(true);
    expect(body(vace, { images: { init_video: 'v.mp4', mask_video: 'm.mp4', ctrl_img: 'r.png' } })).toMatchObject({ init_video: 'v.mp4', mask_video: 'm.mp4', ctrl_img: 'r.png', resize_mode: 'crop' });
    const base = arch('stable_audio3', { modality: 'audio', tasks: [t('txt2img'), t('a2a', ['init_audio'], [], 1.0), t('audio_inpaint', ['init_audio'])] });
    const sa3 = { ...base, fields: { ...base.fields, mask_start: { type: 'float', min: 0, nullable: true }, mask_end: { type: 'float', min: 0, nullable: true } } };
    expect(body(sa3, { images: { init_audio: 'a.wav' }, mask_start: 1, mask_end: 2.5 })).toMatchObject({ init_audio: 'a.wav', mask_start: 1, mask_end: 2.5 });
    const plain = body(sa3, { mask_start: 1, mask_end: 2 }); // no audio: no region (it would name a task that takes none)
    for (const k of ['mask_start', 'mask_end', 'init_audio', 'resize_mode']) expect(plain).not.toHaveProperty(k);
    expect(body(sa3, { images: { init_audio: 'a.wav' }, strength: 0.5 })).toMatchObject({ init_audio: 'a.wav', strength: 0.5 });
  });

  it("inputs no task of the arch takes are sent as they are: the engine's 422 names the field", () => {
    expect(body(chroma, { images: { init_img: 'a.png', mask_img: 'm.png' } })).toMatchObject({ init_img: 'a.png', mask_img: 'm.png' });
  });

  it("sampler: one of the arch's, else none (the model's own); batch where the arch batches, as the form shows it", () => {
    expect(body(sd1, { sampler: 'euler_a' }).sampler).toBe('euler_a');
    expect(body(sd1, { sampler: '' })).not.toHaveProperty('sampler');
    expect(body(aceStep, { sampler: 'euler_a' })).not.toHaveProperty('sampler'); // not one of ace_step's
    expect(body(sd1, { batch_size: 3 }).batch_size).toBe(3);
    expect(body(sd1, { batch_size: 500 }).batch_size).toBe(500); // formChecks keeps Generate off; the engine's 422 names it
    expect(body(sd1, { batch_size: 1 })).not.toHaveProperty('batch_size');
    expect(body(sd1, { batch_size: NaN })).not.toHaveProperty('batch_size');
    expect(body(aceStep, { batch_size: 4 })).not.toHaveProperty('batch_size');
  });
});

describe('settings from a file (POST /settings) and from older saved forms', () => {
  const fileSample = {
    prompt: 'a red fox',
    negative_prompt: '',
    width: 64,
    height: 48,
    num_inference_steps: 3,
    guidance_scale: 7.5,
    seed: 1234,
    init_img: '1a2b3c4d_in.png',
    mask_img: null,
    task: 'img2img',
    strength: 0.8,
    resize_mode: 'fill',
    sampler: 'euler_a',
    batch_size: 1,
    output_ext: 'png',
  };

  it("the sample: inputs by asset id, the file's task (the page leaves it automatic where the engine infers the same), a default strength stays the task's", () => {
    const { sample, warnings } = sampleFormFromSettings(sd1, sd1.sample, fileSample);
    expect(warnings).toEqual([]);
    expect(sample).toMatchObject({ prompt: 'a red fox', width: 64, height: 48, num_inference_steps: 3, seed: 1234, sampler: 'euler_a', resize_mode: 'fill', task: 'img2img', strength: null, batch_size: 1 });
    expect(sampleFormFromSettings(sd1, sd1.sample, { ...fileSample, task: 'edit' }).sample.task).toBe(''); // not one of sd1's
    expect(sample.images).toEqual({ init_img: '1a2b3c4d_in.png' });
    const moved = sampleFormFromSettings(sd1, sd1.sample, { ...fileSample, strength: 0.45, mask_img: 'm.png', task: 'img2img' }).sample;
    expect(moved).toMatchObject({ strength: 0.45, task: 'img2img' });
    // and it makes the same request again
    expect(buildGenerateBody(sd1, modelDefaults(sd1), moved, 'r', { detach: true, maxFrames: 8 }).sample).toMatchObject({
      task: 'img2img',
      init_img: '1a2b3c4d_in.png',
      strength: 0.45,
      sampler: 'euler_a',
      seed: 1234,
    });
  });

  it("samplers by our name or A1111's label and schedule; others left at Default with a warning", () => {
    expect(samplerFromSettings(sd1, 'euler_a').sampler).toBe('euler_a');
    expect(samplerFromSettings(sd1, 'Euler a').sampler).toBe('euler_a');
    expect(samplerFromSettings(sd1, 'DPM++ 2M Karras').sampler).toBe('dpm++_2m_karras');
    expect(samplerFromSettings(sd1, 'DPM++ 2M').sampler).toBe('dpm++_2m');
    expect(samplerFromSettings(sd1, null)).toEqual({ sampler: '', warning: null });
    const unknown = samplerFromSettings(sd1, 'Restart');
    expect(unknown.sampler).toBe('');
    expect(unknown.warning).toMatch(/"Restart" is not one of sd1's/);
  });

  it('the model: an arch here, a profile defined here, else the current model stays (warned); an arch not served is an error', () => {
    const archs = [sd1, klein];
    const profile = { name: 'my-sd1', architecture: 'sd1', variant: null, defaults: {}, sample: { ...sd1.sample, num_inference_steps: 9 } };
    const current = modelDefaults(klein);
    const answer = (model: Record<string, unknown> | null, warnings: string[] = []): SettingsAnswer => ({ source: 'aitk', model, sample: fileSample, warnings });

    const byArch = formsFromFile(archs, [profile], current, answer({ arch: 'sd1', name_or_path: 'tiny:sd1', quantize: false }));
    expect('error' in byArch).toBe(false);
    if ('error' in byArch) return;
    expect(byArch.model).toMatchObject({ arch: 'sd1', profile: '', name_or_path: 'tiny:sd1' });
    expect(byArch.sample).toMatchObject({ seed: 1234, sampler: 'euler_a' });

    const byProfile = formsFromFile(archs, [profile], current, answer({ profile: 'my-sd1' }));
    if ('error' in byProfile) throw new Error(byProfile.error);
    expect(byProfile.model).toMatchObject({ arch: 'sd1', profile: 'my-sd1', name_or_path: '' });

    const foreign = formsFromFile(archs, [], current, { source: 'a1111', model: null, sample: { prompt: 'x', sampler: 'Euler a', seed: 3 }, warnings: ['model: …'] });
    if ('error' in foreign) throw new Error(foreign.error);
    expect(foreign.model).toBe(current);
    expect(foreign.sample).toMatchObject({ prompt: 'x', seed: 3, sampler: '' }); // klein has no "Euler a"
    expect(foreign.warnings).toEqual([
      'model: …',
      'The file names no model this engine knows: the model was left as it is.',
      expect.stringMatching(/"Euler a" is not one of flux2_klein's/),
    ]);

    const otherProfile = formsFromFile(archs, [], current, answer({ profile: 'elsewhere' }));
    if ('error' in otherProfile) throw new Error(otherProfile.error);
    expect(otherProfile.model).toBe(current);
    expect(otherProfile.warnings[0]).toMatch(/profile "elsewhere", which this engine does not define/);

    expect(formsFromFile(archs, [], current, answer({ arch: 'nope' }))).toEqual({ error: 'The file was made with arch "nope", which this engine does not serve.' });
    expect(formsFromFile(archs, [], null, answer(null))).toHaveProperty('error');
  });

  it('a form saved by an older page: its control image moves into images, the new keys get defaults', () => {
    const old = { ...form(klein), ctrl_img: 'a_ref.png', ctrl_img_name: 'ref.png' } as unknown as SampleForm;
    delete (old as Partial<SampleForm>).images;
    delete (old as Partial<SampleForm>).sampler;
    delete (old as Partial<SampleForm>).batch_size;
    const n = normalizeSample(old);
    expect(n.images).toEqual({ ctrl_img: 'a_ref.png' });
    expect(n).toMatchObject({ sampler: '', batch_size: 1, task: '', strength: null, resize_mode: 'crop' });
    expect(n).not.toHaveProperty('ctrl_img');
    expect(n).not.toHaveProperty('ctrl_img_name');
  });
});

describe('asset names', () => {
  it('shown without the engine\'s prefix; uploaded under a name /assets accepts', () => {
    expect(assetDisplayName('1a2b3c4d_photo.png')).toBe('photo.png');
    expect(assetDisplayName('/x/assets/1a2b3c4d_photo.png')).toBe('photo.png');
    expect(assetDisplayName('plain.png')).toBe('plain.png');
    expect(assetUploadName('my photo (1).JPG')).toBe('my_photo__1_.JPG');
    expect(assetUploadName('../../etc/passwd')).toBe('passwd');
    expect(assetUploadName('')).toBe('image.png');
    expect(assetUploadName('ü.png')).toBe('image.png');
    expect(assetUploadName('.hidden')).toBe('image.hidden');
    for (const n of ['my photo (1).JPG', 'ü.png', 'a'.repeat(300) + '.webp', '-x.png']) expect(assetUploadName(n)).toMatch(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/);
  });
});
