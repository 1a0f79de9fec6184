// The grid's axes: value lists (ranges, quotes, bad numbers), what each kind changes in the request
// body, Prompt S/R, the cell bound, the PNG layout, and a cell's state from its frames.
import { describe, expect, it } from 'vitest';
import { MAX_CELLS, planGrid, type AxisSpec, type GridBase, type GridPlan } from '@/components/grid/axes';
import { parseNumbers, splitValues } from '@/components/grid/axisValues';
import { fitText, gridLayout } from '@/components/grid/gridLayout';
import { cellAfterFrame, type CellState } from '@/components/grid/useGridRun';
import { modelDefaults, sampleDefaults } from '@/components/generate/requestBody';
import { archRow } from './archRow';

const zimage = archRow(
  'zimage',
  {
    size_divisor: 16,
    uses_negative_prompt: false,
    sample: { prompt: '', width: 64, height: 64, num_inference_steps: 8, guidance_scale: 0, seed: -1, output_ext: 'png' },
    samplers: [
      { name: 'euler', label: 'Euler', schedule: 'automatic', scheduler: 'FlowMatchEulerDiscreteScheduler' },
      { name: 'dpmpp_2m', label: 'DPM++ 2M', schedule: 'automatic', scheduler: 'DPMSolverMultistepScheduler' },
    ],
  },
  { width: 1024, height: 1024, num_inference_steps: 8, guidance_scale: 0 },
);

function base(over: Partial<GridBase> = {}): GridBase {
  const model = { ...modelDefaults(zimage), name_or_path: 'tiny:zimage' };
  const sample = sampleDefaults(zimage.sample, zimage, { prompt: 'a red fox in snow', seed: 7 });
  return { arch: zimage, profiles: [], model, sample: { ...sample, batch_size: 3 }, ...over };
}

const plan = (x: AxisSpec, y: AxisSpec = { kind: 'none', values: '' }, b = base()): GridPlan => {
  const p = planGrid(b, x, y, 'run');
  if ('error' in p) throw new Error(p.error);
  return p;
};
const planError = (x: AxisSpec, y: AxisSpec = { kind: 'none', values: '' }, b = base()) => {
  const p = planGrid(b, x, y, 'run');
  return 'error' in p ? p.error : null;
};

describe('value lists', () => {
  it('splits on commas outside quotes', () => {
    expect(splitValues(' a, b ,,c ')).toEqual(['a', 'b', 'c']);
    expect(splitValues('"fox, red", cat')).toEqual(['fox, red', 'cat']);
    expect(splitValues('')).toEqual([]);
  });

  it('expands ranges, with a step, counting down too, without float drift', () => {
    expect(parseNumbers('steps', '1-4', { integer: true, min: 1 })).toEqual({ values: [1, 2, 3, 4] });
    expect(parseNumbers('steps', '10-30 (+10), 50', { integer: true, min: 1 })).toEqual({ values: [10, 20, 30, 50] });
    expect(parseNumbers('steps', '4-1', { integer: true, min: 1 })).toEqual({ values: [4, 3, 2, 1] });
    expect(parseNumbers('guidance', '0.1-0.3 (+0.1)', { integer: false, min: 0 })).toEqual({ values: [0.1, 0.2, 0.3] });
    expect(parseNumbers('seed', '-1, 5', { integer: true, min: -1 })).toEqual({ values: [-1, 5] });
  });

  it('names the axis and the bad value', () => {
    expect(parseNumbers('steps', '1, x', { integer: true, min: 1 })).toEqual({ error: expect.stringMatching(/^steps: "x" is not a number/) });
    expect(parseNumbers('steps', '1.5', { integer: true, min: 1 })).toEqual({ error: 'steps: 1.5 is not a whole number.' });
    expect(parseNumbers('steps', '0', { integer: true, min: 1 })).toEqual({ error: 'steps: 0 is below 1.' });
    expect(parseNumbers('steps', '1-10 (-1)', { integer: true, min: 1 })).toEqual({ error: expect.stringContaining('never reaches 10') });
    expect(parseNumbers('steps', '1-1000', { integer: true, min: 1 })).toEqual({ error: expect.stringContaining('more than 64 values') });
    expect(parseNumbers('steps', ' ', { integer: true, min: 1 })).toEqual({ error: expect.stringContaining('at least one value') });
  });
});

describe('planGrid', () => {
  it('seed × steps: X across, Y down, one batch-1 detached request per cell, the rest from the base', () => {
    const p = plan({ kind: 'seed', values: '1,2' }, { kind: 'steps', values: '1-2' });
    expect(p.xLabels).toEqual(['Seed: 1', 'Seed: 2']);
    expect(p.yLabels).toEqual(['Steps: 1', 'Steps: 2']);
    expect(p.cells.map((c) => [c.x, c.y, c.body.sample.seed, c.body.sample.num_inference_steps])).toEqual([
      [0, 0, 1, 1],
      [1, 0, 2, 1],
      [0, 1, 1, 2],
      [1, 1, 2, 2],
    ]);
    expect(new Set(p.cells.map((c) => c.requestId)).size).toBe(4);
    for (const c of p.cells) {
      expect(c.body.request_id).toBe(c.requestId);
      expect(c.body.model).toEqual({ arch: 'zimage', name_or_path: 'tiny:zimage' });
      expect(c.body.sample).toMatchObject({ prompt: 'a red fox in snow', width: 64, height: 64 });
      expect(c.body.sample.batch_size).toBeUndefined();
      expect(c.body.stream).toEqual({ latents: 'none', detach: true });
    }
  });

  it('guidance and sampler (a name or A1111 label; Default is the model\'s own)', () => {
    const p = plan({ kind: 'guidance', values: '1.5, 3' }, { kind: 'sampler', values: 'euler, DPM++ 2M, Default' });
    expect(p.cells.map((c) => [c.body.sample.guidance_scale, c.body.sample.sampler ?? null])).toEqual([
      [1.5, 'euler'],
      [3, 'euler'],
      [1.5, 'dpmpp_2m'],
      [3, 'dpmpp_2m'],
      [1.5, null],
      [3, null],
    ]);
    expect(p.yLabels).toEqual(['euler', 'dpmpp_2m', 'Default']);
    expect(planError({ kind: 'sampler', values: 'euler, lms' })).toMatch(/X axis, sampler "lms" is not one of zimage's \(euler, dpmpp_2m\)\.$/);
    expect(planError({ kind: 'sampler', values: 'euler' }, undefined, base({ arch: { ...zimage, samplers: [] } }))).toMatch(/offers no sampler choice/);
  });

  it('Prompt S/R: the first value is searched for, each value replaces every occurrence', () => {
    const b = base();
    b.sample = { ...b.sample, prompt: 'a red fox, red sky' };
    const p = plan({ kind: 'prompt', values: 'red, blue, "green, bright"' }, undefined, b);
    expect(p.cells.map((c) => c.body.sample.prompt)).toEqual(['a red fox, red sky', 'a blue fox, blue sky', 'a green, bright fox, green, bright sky']);
    expect(p.xLabels).toEqual(['red', 'blue', 'green, bright']);
    expect(planError({ kind: 'prompt', values: 'purple, blue' }, undefined, b)).toMatch(/"purple" is not in the prompt/);
  });

  it('model: a profile name runs the profile, anything else is weights for the base arch', () => {
    const profiles = [{ name: 'myfox', architecture: 'zimage', variant: null, defaults: {}, sample: null }];
    const p = plan({ kind: 'model', values: 'myfox, /models/other-zimage/' }, undefined, base({ profiles }));
    expect(p.cells.map((c) => c.body.model)).toEqual([{ profile: 'myfox' }, { arch: 'zimage', name_or_path: '/models/other-zimage/' }]);
    expect(p.xLabels).toEqual(['myfox', 'other-zimage']);
  });

  it('LoRA strength: the first LoRA, or a named one; none in the base is said', () => {
    const b = base();
    b.model = { ...b.model, loras: [{ path: 'a.safetensors', scale: 1 }, { path: 'sub/b.safetensors', scale: 0.7 }] };
    const first = plan({ kind: 'lora_strength', values: '0-1 (+0.5)' }, undefined, b);
    expect(first.cells.map((c) => c.body.model.loras)).toEqual([0, 0.5, 1].map((s) => [{ path: 'a.safetensors', scale: s }, { path: 'sub/b.safetensors', scale: 0.7 }]));
    expect(first.xLabels).toEqual(['a ×0', 'a ×0.5', 'a ×1']);
    const named = plan({ kind: 'lora_strength', values: '0.2', lora: 'sub/b.safetensors' }, undefined, b);
    expect(named.cells[0].body.model.loras).toEqual([{ path: 'a.safetensors', scale: 1 }, { path: 'sub/b.safetensors', scale: 0.2 }]);
    expect(planError({ kind: 'lora_strength', values: '1', lora: 'c.safetensors' }, undefined, b)).toMatch(/not one of the base settings' LoRAs/);
    expect(planError({ kind: 'lora_strength', values: '1' })).toMatch(/apply no LoRA; add one on the Generate page/);
  });

  it('refuses more than MAX_CELLS, the same kind twice, a bad value (naming the axis) and non-image archs', () => {
    expect(planError({ kind: 'seed', values: '1-9' }, { kind: 'steps', values: '1-8' })).toBe(`9 × 8 = 72 images, over the ${MAX_CELLS} a grid may have: use fewer values.`);
    expect(plan({ kind: 'seed', values: '1-8' }, { kind: 'steps', values: '1-8' }).cells).toHaveLength(64);
    expect(planError({ kind: 'seed', values: '1' }, { kind: 'seed', values: '2' })).toMatch(/both vary seed/);
    expect(planError({ kind: 'seed', values: '1' }, { kind: 'steps', values: '0' })).toBe('Y axis, steps: 0 is below 1.');
    expect(planError({ kind: 'seed', values: '1' }, undefined, base({ arch: { ...zimage, modality: 'video' } }))).toMatch(/Grids are of images/);
    const single = plan({ kind: 'none', values: '' });
    expect(single.cells).toHaveLength(1);
    expect(single.xLabels).toEqual(['']);
  });
});

describe('gridLayout', () => {
  const measure = (t: string, px: number) => t.length * px * 0.5;

  it('puts X labels on top, Y labels on the left, cells in rows; the PNG holds them all', () => {
    const l = gridLayout({ cellW: 64, cellH: 64, xLabels: ['Seed: 1', 'Seed: 2'], yLabels: ['Steps: 1', 'Steps: 2'], measure });
    expect(l.cells).toHaveLength(4);
    const [a, b, c] = l.cells;
    expect(b.x).toBeGreaterThan(a.x + 63);
    expect(b.y).toBe(a.y);
    expect(c.y).toBeGreaterThan(a.y + 63);
    expect(a.x).toBeGreaterThan(0); // the Y label column
    expect(a.y).toBeGreaterThan(0); // the X label band
    expect(l.width).toBeGreaterThanOrEqual(2 * 64);
    expect(l.height).toBeGreaterThanOrEqual(2 * 64);
    const last = l.cells[3];
    expect(last.x + last.w).toBe(l.width);
    expect(last.y + last.h).toBe(l.height);
    expect(l.xLabels.map((x) => x.text)).toEqual(['Seed: 1', 'Seed: 2']);
    expect(l.yLabels[1].box.y).toBe(c.y);
  });

  it('no labels: no band, no column; long labels are cut to their box', () => {
    const l = gridLayout({ cellW: 100, cellH: 50, xLabels: [''], yLabels: [''], measure });
    expect(l.cells[0]).toEqual({ x: 0, y: 0, w: 100, h: 50 });
    expect([l.width, l.height]).toEqual([100, 50]);
    const cut = fitText('a very long label that does not fit', 60, 14, measure);
    expect(cut.endsWith('…')).toBe(true);
    expect(measure(cut, 14)).toBeLessThanOrEqual(60);
  });
});

describe('a cell from its frames', () => {
  const c0: CellState = { requestId: 'r', phase: 'queued', stage: '', step: 0, total: 0, result: null, message: '' };
  const h = (type: string, more: Record<string, unknown> = {}) => ({ type, request_id: 'r', ...more });

  it('queued, running with progress, done with its result', () => {
    let c = cellAfterFrame(c0, h('status', { stage: 'queued' }));
    expect(c.phase).toBe('queued');
    c = cellAfterFrame(c, h('status', { stage: 'loading' }));
    c = cellAfterFrame(c, h('progress', { step: 1, total: 2 }));
    expect(c).toMatchObject({ phase: 'running', step: 1, total: 2, stage: 'loading' });
    c = cellAfterFrame(c, h('result', { relpath: 'x.png', kind: 'image' }));
    c = cellAfterFrame(c, h('end', { status: 'ok' }));
    expect(c).toMatchObject({ phase: 'done', result: { relpath: 'x.png' } });
  });

  it('the engine\'s error message, and cancelled', () => {
    const err = cellAfterFrame(cellAfterFrame(c0, h('error', { message: 'out of memory' })), h('end', { status: 'error' }));
    expect(err).toMatchObject({ phase: 'error', message: 'out of memory' });
    const cancelled = cellAfterFrame(cellAfterFrame(c0, h('error', { message: 'cancelled', cancelled: true })), h('end', { status: 'cancelled' }));
    expect(cancelled.phase).toBe('cancelled');
    expect(cellAfterFrame(c0, h('end', { status: 'ok' }))).toMatchObject({ phase: 'error', message: 'The engine made no image.' });
  });
});
