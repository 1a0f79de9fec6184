// The sample form's notes: what the engine would refuse is said next to its field, with a fix; the
// request carries the shown value (requestBody.test.ts), so nothing is coerced behind the person's back.
import { describe, expect, it } from 'vitest';
import { blockingSummary, notesFor, sampleNotes } from '@/components/generate/formChecks';
import { buildGenerateBody, modelDefaults, resolvedDefaults, sampleDefaults } from '@/components/generate/requestBody';
import type { ArchInfo, SampleForm } from '@/components/generate/types';
import { archRow } from './archRow';

const arch = (over: Partial<ArchInfo> = {}) =>
  archRow('img', { size_divisor: 16, batch: true, max_batch: 16, ...over }, { width: 1024, height: 768, num_inference_steps: 8, guidance_scale: 3.5 });

const form = (a: ArchInfo, over: Partial<SampleForm> = {}): SampleForm => ({ ...sampleDefaults(resolvedDefaults(a, ''), a, { prompt: 'a fox' }), ...over });

describe('sampleNotes', () => {
  it('a valid form has no notes', () => {
    const a = arch();
    expect(sampleNotes(a, form(a))).toEqual([]);
  });

  it('what a new user hit: width 1000, width 0, steps 0, an empty prompt', () => {
    const a = arch();
    const notes = sampleNotes(a, form(a, { width: 1000, height: 0, num_inference_steps: 0, prompt: ' ' }));
    const [w] = notesFor(notes, 'width');
    expect(w.blocking).toBe(true);
    expect(w.message).toBe('Width 1000 is not a multiple of 16, which img needs (992 or 1008).');
    expect(w.fix).toEqual({ label: 'Use 1008', patch: { width: 1008 } });
    const [h] = notesFor(notes, 'height');
    expect(h).toMatchObject({ blocking: true, fix: { patch: { height: 16 } } });
    expect(notesFor(notes, 'num_inference_steps')[0]).toMatchObject({ blocking: true, message: 'Steps must be at least 1, not 0.', fix: { patch: { num_inference_steps: 1 } } });
    // an empty prompt is allowed (unconditional sampling) but said
    expect(notesFor(notes, 'prompt')[0]).toMatchObject({ blocking: false });
    expect(blockingSummary(notes)).toMatch(/^Fix these fields first: Width 1000 is not a multiple of 16/);
  });

  it('the nearest multiple is the fix; below one divisor there is only the one above', () => {
    const a = arch();
    expect(notesFor(sampleNotes(a, form(a, { width: 70 })), 'width')[0].fix?.patch).toEqual({ width: 64 });
    expect(notesFor(sampleNotes(a, form(a, { width: 72 })), 'width')[0].fix?.patch).toEqual({ width: 80 });
    expect(notesFor(sampleNotes(a, form(a, { width: 3 })), 'width')[0].message).toBe('Width 3 is not a multiple of 16, which img needs (16).');
  });

  it('an arch that rounds sizes itself gets a note that does not block', () => {
    const a = arch({ round_size: true });
    const notes = sampleNotes(a, form(a, { width: 1000 }));
    expect(notes).toEqual([{ field: 'width', message: 'Width 1000 is not a multiple of 16: the engine rounds it up to 1008.', blocking: false }]);
    expect(blockingSummary(notes)).toBeNull();
  });

  it('empty fields, fractions, negative guidance, bad seeds and batch sizes block', () => {
    const a = arch();
    const notes = sampleNotes(a, form(a, { width: NaN, num_inference_steps: 2.5, guidance_scale: -1, seed: -2, batch_size: 17 }));
    expect(notes.map((n) => [n.field, n.blocking])).toEqual([
      ['width', true],
      ['num_inference_steps', true],
      ['guidance_scale', true],
      ['seed', true],
      ['batch_size', true],
    ]);
    expect(notesFor(notes, 'width')[0].message).toBe('Width is empty: enter a number.');
    expect(notesFor(notes, 'num_inference_steps')[0].fix?.patch).toEqual({ num_inference_steps: 3 });
    expect(notesFor(notes, 'batch_size')[0].fix?.patch).toEqual({ batch_size: 16 });
  });

  it("a batch the engine accepts is accepted: the bound is the engine's (engine.limits.max_batch)", () => {
    expect(notesFor(sampleNotes(arch(), form(arch(), { batch_size: 16 })), 'batch_size')).toEqual([]);
    const small = arch({ max_batch: 4 });
    expect(notesFor(sampleNotes(small, form(small, { batch_size: 5 })), 'batch_size')[0].fix?.patch).toEqual({ batch_size: 4 });
    // an engine that serves no bound is asked for one image
    const old = arch({ max_batch: undefined });
    expect(notesFor(sampleNotes(old, form(old, { batch_size: 2 })), 'batch_size')[0].blocking).toBe(true);
  });

  it('audio: no size checks, duration bounded as the engine bounds it', () => {
    const a = arch({ modality: 'audio', size_divisor: 1, batch: false });
    expect(sampleNotes(a, form(a, { width: 0, height: 0, duration: 10 }))).toEqual([]);
    expect(notesFor(sampleNotes(a, form(a, { duration: 601 })), 'duration')[0].blocking).toBe(true);
  });

  it('the request carries exactly the values the form shows', () => {
    const a = arch();
    const body = buildGenerateBody(a, modelDefaults(a), form(a, { width: 1000, num_inference_steps: 0, batch_size: 9, seed: 5 }), 'r', { detach: true, maxFrames: 8 });
    expect(body.sample).toMatchObject({ width: 1000, num_inference_steps: 0, batch_size: 9, seed: 5 });
  });
});
