// The sample form's notes: each value the request would carry, checked against its field as the engine
// serves it (tests/fixtures/models.json, a real GET /models answer), said next to the field with a fix;
// the request carries the shown value, so nothing is coerced behind the person's back. No bound is the
// form's own: an engine serving other limits gets other notes.
import { describe, expect, it } from 'vitest';
import { blockingSummary, inputBounds, notesFor, sampleNotes } from '@/components/generate/formChecks';
import { buildGenerateBody, modelDefaults, resolvedDefaults, sampleDefaults } from '@/components/generate/requestBody';
import type { ArchInfo, SampleForm } from '@/components/generate/types';
import { MODELS, servedArch } from './archRow';

const form = (a: ArchInfo, over: Partial<SampleForm> = {}): SampleForm => ({ ...sampleDefaults(resolvedDefaults(a, ''), a, { prompt: 'a fox' }), ...over });
const zimage = servedArch('zimage');

describe('sampleNotes', () => {
  it("every arch's own defaults pass its served fields", () => {
    for (const a of MODELS.archs) expect(sampleNotes(a, form(a)), a.name).toEqual([]);
  });

  it('what a new user hit: width 1000, height 0, steps 0, an empty prompt', () => {
    const notes = sampleNotes(zimage, form(zimage, { width: 1000, height: 0, num_inference_steps: 0, prompt: ' ' }));
    const [w] = notesFor(notes, 'width');
    expect(w.blocking).toBe(true);
    expect(w.message).toBe('Width 1000 is not a multiple of 16, which zimage needs (992 or 1008).');
    expect(w.fix).toEqual({ label: 'Use 1008', patch: { width: 1008 } });
    expect(notesFor(notes, 'height')[0]).toMatchObject({ blocking: true, message: 'Height must be at least 1, not 0.', fix: { patch: { height: 16 } } });
    expect(notesFor(notes, 'num_inference_steps')[0]).toMatchObject({ blocking: true, message: 'Steps must be at least 1, not 0.', fix: { patch: { num_inference_steps: 1 } } });
    // an empty prompt is allowed (unconditional sampling) but said
    expect(notesFor(notes, 'prompt')[0]).toMatchObject({ blocking: false });
    expect(blockingSummary(notes)).toMatch(/^Fix these fields first: Width 1000 is not a multiple of 16/);
  });

  it('the nearest multiple is the fix; below one multiple there is only the one above', () => {
    expect(notesFor(sampleNotes(zimage, form(zimage, { width: 70 })), 'width')[0].fix?.patch).toEqual({ width: 64 });
    expect(notesFor(sampleNotes(zimage, form(zimage, { width: 72 })), 'width')[0].fix?.patch).toEqual({ width: 80 });
    expect(notesFor(sampleNotes(zimage, form(zimage, { width: 3 })), 'width')[0].message).toBe('Width 3 is not a multiple of 16, which zimage needs (16).');
    const sd1 = servedArch('sd1');
    expect(notesFor(sampleNotes(sd1, form(sd1, { width: 1000 })), 'width')).toEqual([]); // its multiple is 8
  });

  it('a field the engine rounds (krea2) gets a note that does not block', () => {
    const krea2 = servedArch('krea2');
    const notes = sampleNotes(krea2, form(krea2, { width: 1000 }));
    expect(notes).toEqual([{ field: 'width', message: 'Width 1000 is not a multiple of 16: the engine rounds it up to 1008.', blocking: false }]);
    expect(blockingSummary(notes)).toBeNull();
  });

  it('empty fields, fractions, negative guidance, bad seeds and batch sizes block, in the fields\' order', () => {
    const notes = sampleNotes(zimage, form(zimage, { width: NaN, num_inference_steps: 2.5, guidance_scale: -1, seed: -2, batch_size: 17 }));
    expect(notes.map((n) => [n.field, n.blocking])).toEqual([
      ['width', true],
      ['num_inference_steps', true],
      ['guidance_scale', true],
      ['seed', true],
      ['batch_size', true],
    ]);
    // an empty number offers the default the request would get
    expect(notesFor(notes, 'width')[0]).toMatchObject({ message: 'Width is empty: enter a number.', fix: { patch: { width: zimage.sample.width } } });
    expect(notesFor(notes, 'num_inference_steps')[0].fix?.patch).toEqual({ num_inference_steps: 3 });
    expect(notesFor(notes, 'guidance_scale')[0]).toMatchObject({ message: 'Guidance must be at least 0, not -1.', fix: { patch: { guidance_scale: 0 } } });
    expect(notesFor(notes, 'seed')[0].fix?.patch).toEqual({ seed: -1 });
    expect(notesFor(notes, 'batch_size')[0]).toMatchObject({ message: 'Batch size must be at most 16, not 17.', fix: { patch: { batch_size: 16 } } });
  });

  it("a batch the engine accepts is accepted: the bound is the served one (engine.limits.max_batch)", () => {
    expect(MODELS.limits?.max_batch).toBe(16);
    expect(notesFor(sampleNotes(zimage, form(zimage, { batch_size: 16 })), 'batch_size')).toEqual([]);
    // an engine with engine.limits.max_batch: 4 serves that bound, and the form follows it
    const small = { ...zimage, fields: { ...zimage.fields, batch_size: { ...zimage.fields.batch_size, max: 4 } } };
    expect(notesFor(sampleNotes(small, form(small, { batch_size: 5 })), 'batch_size')[0].fix?.patch).toEqual({ batch_size: 4 });
  });

  it('other served limits, other notes: steps over engine.limits.max_steps', () => {
    expect(notesFor(sampleNotes(zimage, form(zimage, { num_inference_steps: 1000 })), 'num_inference_steps')).toEqual([]);
    const strict = { ...zimage, fields: { ...zimage.fields, num_inference_steps: { ...zimage.fields.num_inference_steps, max: 50 } } };
    expect(notesFor(sampleNotes(strict, form(strict, { num_inference_steps: 51 })), 'num_inference_steps')[0].message).toBe('Steps must be at most 50, not 51.');
  });

  it('audio: no size checks, the duration bounded as served', () => {
    const audio = servedArch('stable_audio');
    expect(sampleNotes(audio, form(audio, { width: 0, height: 0, duration: 10 }))).toEqual([]);
    expect(notesFor(sampleNotes(audio, form(audio, { duration: 601 })), 'duration')[0]).toMatchObject({ blocking: true, message: 'Duration must be at most 600, not 601.', fix: { patch: { duration: 600 } } });
    expect(notesFor(sampleNotes(audio, form(audio, { duration: 0 })), 'duration')[0]).toMatchObject({ blocking: true, message: 'Duration must be more than 0, not 0.' });
  });

  it('video: frames up to engine.limits.max_frames, fps more than 0', () => {
    const ltx = servedArch('ltx');
    expect(notesFor(sampleNotes(ltx, form(ltx, { num_frames: 300 })), 'num_frames')[0].message).toBe(`Frames must be at most ${MODELS.limits?.max_frames}, not 300.`);
    expect(notesFor(sampleNotes(ltx, form(ltx, { fps: 0 })), 'fps')[0]).toMatchObject({ message: 'FPS must be more than 0, not 0.', fix: { patch: { fps: 1 } } });
  });

  it('a prompt over engine.limits.max_prompt_bytes (UTF-8) blocks', () => {
    const max = zimage.fields.prompt.max_bytes as number;
    expect(notesFor(sampleNotes(zimage, form(zimage, { prompt: 'é'.repeat(max / 2) })), 'prompt')).toEqual([]);
    expect(notesFor(sampleNotes(zimage, form(zimage, { prompt: 'é'.repeat(max / 2 + 1) })), 'prompt')[0]).toMatchObject({ blocking: true, message: `Prompt is ${max + 2} bytes: the engine takes at most ${max}.` });
  });

  it('an extra is checked by its served type, its fix going into the extras', () => {
    const krea2 = servedArch('krea2');
    expect(krea2.fields.mu).toEqual({ type: 'float' });
    expect(sampleNotes(krea2, form(krea2, { extras: { ...form(krea2).extras, mu: 0.5 } }))).toEqual([]);
    const withInt = { ...krea2, fields: { ...krea2.fields, mu: { type: 'int' } } };
    const [n] = notesFor(sampleNotes(withInt, form(withInt, { extras: { ...form(krea2).extras, mu: 2.5 } })), 'mu');
    expect(n.fix?.patch).toEqual({ extras: { ...form(krea2).extras, mu: 3 } });
  });

  it('the request carries exactly the values the form shows', () => {
    const body = buildGenerateBody(zimage, modelDefaults(zimage), form(zimage, { width: 1000, num_inference_steps: 0, batch_size: 9, seed: 5 }), 'r', { detach: true, maxFrames: 8 });
    expect(body.sample).toMatchObject({ width: 1000, num_inference_steps: 0, batch_size: 9, seed: 5 });
  });
});

describe('inputBounds', () => {
  it("a number input's min, max and step from the served field", () => {
    expect(inputBounds(zimage.fields.width)).toEqual({ min: 16, max: 8192, step: 16 });    // Z-Image's RoPE reach, served
    expect(inputBounds(zimage.fields.seed).min).toBe(-1);
    expect(inputBounds(zimage.fields.strength, 0.01)).toEqual({ min: 0.01, max: 1, step: 0.01 });
    expect(inputBounds(zimage.fields.batch_size)).toEqual({ min: 1, max: 16, step: 1 });
  });
});
