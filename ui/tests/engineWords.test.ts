// Defect 9's wording: the engine strip's model while its first request loads it, memory only as the
// engine reported it, the engines card's note for this page, and run time apart from the queue wait.
import { describe, expect, it } from 'vitest';
import { engineRowNote, healthModelText, memoryText } from '@/components/generate/engineWords';
import { runAndWaitText } from '@/utils/format';

describe('healthModelText', () => {
  const active = { arch: 'zimage', name_or_path: 'tiny:zimage', profile: null, variant: null };
  it('the loaded model; while none is, the one being loaded; else none loaded', () => {
    expect(healthModelText({ active }, null)).toBe('zimage (tiny:zimage)');
    expect(healthModelText({ active: { ...active, profile: 'fast', variant: 'turbo' } }, 'x')).toBe('fast: zimage turbo (tiny:zimage)');
    expect(healthModelText({ active: null }, 'tiny:zimage')).toBe('loading tiny:zimage…');
    expect(healthModelText({ active: null }, null)).toBe('none loaded');
  });
});

describe('memoryText', () => {
  it('no "0 B / 0 B" before the worker reports: a dash, or the CPU said to have no device memory', () => {
    expect(memoryText({ device: 'cuda:0', used: 0, total: 0 })).toBe('Memory (cuda:0): —');
    expect(memoryText({ device: 'cuda:0', used: 3 * 2 ** 30, total: 24 * 2 ** 30 })).toBe('Memory (cuda:0): 3.0 GB / 24.0 GB');
    expect(memoryText({ device: 'cpu', used: 0, total: 0 })).toBe('Memory: CPU, no device memory');
    expect(memoryText({ device: 'cpu', used: 512 * 2 ** 20, total: 16 * 2 ** 30 })).toBe('Memory: CPU, no device memory · RAM 512 MB of 16.0 GB');
    expect(memoryText({ device: 'cpu', used: 0, total: 0 })).not.toContain('0 B');
  });
});

describe('engineRowNote', () => {
  const job = { id: '1', name: 'inference_engine_cpu', gpu_ids: 'cpu', status: 'stopped' };
  it('a stopped engine: what to do on this page, not "Start it on the Generate page"', () => {
    const note = engineRowNote({ state: 'stopped', job, message: "The inference engine 'x' is not running (its job is stopped). Start it on the Generate page." });
    expect(note).toBe('stopped: choose cpu as the Device above and press Start engine');
    expect(engineRowNote({ state: 'stopped', job: { ...job, gpu_ids: '0,1' }, message: null })).toContain('choose GPU 0,1 as the Device above');
    const queued = engineRowNote({ state: 'queued', job, message: "The inference engine 'x' is queued, waiting for GPU 0." });
    expect(queued).toBe("The inference engine 'x' is queued, waiting for GPU 0.");
    const other = engineRowNote({ state: 'starting', job, message: 'It is starting. Start it on the Generate page.' });
    expect(other).toBe('It is starting.');
    expect(engineRowNote({ state: 'unreachable', job, message: null })).toBeNull();
  });
});

describe('runAndWaitText', () => {
  it('the run, and the queue wait apart from it', () => {
    expect(runAndWaitText(12.3, 88)).toBe('12.3 s (waited 1 min 16 s)');
    expect(runAndWaitText(12.3, 12.9)).toBe('12.3 s');
    expect(runAndWaitText(null, 88)).toBe('1 min 28 s');
    expect(runAndWaitText(undefined, null)).toBe('–');
  });
});
