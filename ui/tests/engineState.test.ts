// The engine's state word from its job row and its /health: a running engine that answers but is still
// starting its worker or loading its default model is `warming`, not an idle `ready` one.
import { describe, expect, it } from 'vitest';
import { engineState } from '../src/components/generate/useEngine';
import type { Job } from '../src/components/jobs/types';

const job = (status: string) => ({ id: 'j1', name: 'inference_engine_cpu', status }) as unknown as Job;

describe('engineState', () => {
  it('is warming while a running engine answers but says it is not ready', () => {
    expect(engineState([job('running')], job('running'), true, false)).toBe('warming');
  });
  it('is ready once the engine says so, and when an older engine says nothing (ready defaults to true)', () => {
    expect(engineState([job('running')], job('running'), true, true)).toBe('ready');
    expect(engineState([job('running')], job('running'), true)).toBe('ready');
  });
  it('is starting while the running job does not answer yet, whatever readiness was last seen', () => {
    expect(engineState([job('running')], job('running'), false, false)).toBe('starting');
  });
  it('keeps the job states', () => {
    expect(engineState(null, null, false)).toBe('loading');
    expect(engineState([], null, false)).toBe('none');
    expect(engineState([job('queued')], job('queued'), false)).toBe('queued');
    expect(engineState([job('stopped')], job('stopped'), false)).toBe('stopped');
  });
});
