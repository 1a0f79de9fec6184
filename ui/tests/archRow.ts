// Arch rows as GET /models serves them (ArchInfo), for the form tests. tests/fixtures/models.json is a
// real answer (an InProcessEngine with the default engine.limits, a few archs kept; capture it again
// with testing/engine_client.py's InProcessEngine and `client.get("/models")` when the shape changes).
// `servedArch` gives one of its rows as served; `archRow` a made-up arch whose `fields` are the served
// ones of a real arch of its modality, set to its divisor, rounding, batching, negative prompt, inputs
// and extras.
import fs from 'node:fs';
import path from 'node:path';
import type { ArchInfo, FieldSpec, ModelsResponse } from '@/components/generate/types';

export const MODELS = JSON.parse(fs.readFileSync(path.join(__dirname, 'fixtures', 'models.json'), 'utf8')) as ModelsResponse;

/** A row of the captured answer, as served. */
export function servedArch(name: string): ArchInfo {
  const row = MODELS.archs.find((a) => a.name === name);
  if (!row) throw new Error(`tests/fixtures/models.json has no arch ${name}`);
  return structuredClone(row);
}

const LIKE: Record<string, string> = { image: 'zimage', video: 'ltx', audio: 'stable_audio' };

/** The fields a made-up arch row gets: a real arch's of its modality, fitted to the row. */
function fieldsFor(a: ArchInfo): Record<string, FieldSpec> {
  const served = servedArch(LIKE[a.modality] ?? 'zimage').fields;
  const out: Record<string, FieldSpec> = {};
  const inputs = new Set((a.tasks ?? []).flatMap((t) => [...t.needs, ...t.takes]));
  if (!a.tasks && a.needs_ctrl_img) inputs.add('ctrl_img');
  for (const [key, spec] of Object.entries(served)) {
    if (/_img(_\d)?$/.test(key) || key === 'task' || key === 'sampler' || (key === 'negative_prompt' && !a.uses_negative_prompt)) continue;
    out[key] = spec;
  }
  if (a.uses_negative_prompt && !out.negative_prompt) out.negative_prompt = { type: 'str', nullable: true, max_bytes: MODELS.limits?.max_prompt_bytes };
  for (const key of ['width', 'height']) {
    if (!out[key]) continue;
    const { rounded: _r, ...rest } = out[key];
    out[key] = { ...rest, multiple_of: a.size_divisor, ...(a.round_size ? { rounded: true } : {}) };
  }
  for (const key of inputs) out[key] = { type: 'str', nullable: true };
  if (a.tasks) out.task = { type: 'str', choices: a.tasks.map((t) => t.name), nullable: true };
  if (a.samplers?.length) out.sampler = { type: 'str', nullable: true, choices: a.samplers.map((s) => s.name) };
  out.batch_size = { type: 'int', min: 1, max: a.batch ? (MODELS.limits?.max_batch ?? 16) : 1 };
  out.output_ext = { type: 'str', choices: a.output_exts };
  for (const [key, def] of Object.entries(a.sample_extras)) out[key] = { type: a.sample_extra_types?.[key] ?? (typeof def === 'number' ? 'float' : 'str') };
  return out;
}

export function archRow(name: string, over: Partial<ArchInfo> = {}, defaults: Partial<ArchInfo['defaults']> = {}): ArchInfo {
  const d = { width: 64, height: 64, num_inference_steps: 4, guidance_scale: 7.5, num_frames: 1, fps: 0, duration: 0, output_ext: 'png', ...defaults };
  const a: ArchInfo = {
    name,
    modality: 'image',
    default_name_or_path: `org/${name}`,
    defaults: d,
    size_divisor: 8,
    needs_ctrl_img: false,
    uses_negative_prompt: true,
    sample_extras: {},
    description: '',
    output_exts: ['png'],
    preview: { family: null, layout: 'BCHW', rgb_factors: null, rgb_bias: null },
    sample: { prompt: '', negative_prompt: '', seed: -1, ...d },
    variant_samples: {},
    fields: {},
    ...over,
  };
  return over.fields ? a : { ...a, fields: fieldsFor(a) };
}
