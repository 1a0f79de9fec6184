// The pure parts of the history: the model key the filter matches, and a result's timings from its frames.
import { describe, expect, it } from 'vitest';
import { noTimings, noteTiming, timingsAt } from '@/components/generate/resultTimings';
import { modelKey } from '@/utils/modelIdentity';

describe('modelKey', () => {
  it('names arch, weights (or profile), variant and quantization; not LoRAs', () => {
    expect(modelKey({ arch: 'zimage', name_or_path: 'tiny:zimage', loras: [{ path: 'a', scale: 1 }] })).toBe('zimage · tiny:zimage');
    expect(modelKey({ arch: 'krea2', name_or_path: '/m/k.safetensors', variant: 'turbo', quantize: true, qtype: 'qfloat8', quantize_te: true, qtype_te: 'qint8' })).toBe(
      'krea2 · /m/k.safetensors · turbo · qfloat8, te qint8',
    );
    expect(modelKey({ arch: 'zimage', name_or_path: '/x', profile: 'tiny-z', quantize: false, qtype: 'qfloat8' })).toBe('zimage · profile tiny-z');
  });
});

describe('result timings', () => {
  it('takes the last progress elapsed and the load seconds of the "loaded" status', () => {
    const t = noTimings();
    for (const h of [
      { type: 'status', stage: 'loading', message: 'loading zimage' },
      { type: 'status', stage: 'loaded', message: 'loaded zimage in 1.5s' },
      { type: 'progress', step: 1, total: 2, elapsed: 1.75 },
      { type: 'progress', step: 2, total: 2, elapsed: 2.25 },
      { type: 'status', stage: 'saving', message: 'saving x.png' },
    ]) noteTiming(t, { request_id: 'r', ...h });
    expect(timingsAt(t, 1000, 4500)).toEqual({ total_s: 3.5, run_s: 2.25, load_s: 1.5 });
    expect(timingsAt(noTimings(), 1000, 1000)).toEqual({ total_s: 0, run_s: null, load_s: null });
  });
});
