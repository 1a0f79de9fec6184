// POST /resolve through the proxy (docs/engine_api.md): what POST /generate would run for the form,
// resolved by the engine's own resolver and not run: the task, its strength, or the first field it
// refuses. Image inputs are only present there (asset ids, or "present" for a mask not uploaded yet).
import { apiFetch } from '@/utils/api';
import type { FieldNote } from './formChecks';
import { presentInputs, requestModel, requestSample } from './requestBody';
import { SAMPLE_INPUTS, type ArchInfo, type ModelForm, type SampleForm } from './types';

/** A refusal (the 422 /generate would give): the field it names ("sample.strength", "model.loras[0].path") and why. */
export interface ResolveProblem {
  field: string;
  detail: string;
}

/** What the engine resolved: the task, and its strength (null: the task takes none); or the refusal. */
export interface ResolveAnswer {
  task: string | null;
  strength: number | null;
  problem: ResolveProblem | null;
}

export interface ResolveBody {
  model: Record<string, unknown>;
  sample: Record<string, unknown>;
}

/** One POST /resolve; null when the engine gave no answer to read (not running, no /resolve). */
export async function resolveRequest(jobId: string, body: ResolveBody, signal?: AbortSignal): Promise<ResolveAnswer | null> {
  const res = await apiFetch(`/api/inference/resolve?job=${encodeURIComponent(jobId)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  });
  const b = (await res.json().catch(() => null)) as { task?: unknown; sample?: { strength?: unknown }; field?: unknown; detail?: unknown } | null;
  if (res.status === 422 && typeof b?.field === 'string' && typeof b.detail === 'string') return { task: null, strength: null, problem: { field: b.field, detail: b.detail } };
  if (!res.ok || !b) return null;
  return { task: typeof b.task === 'string' ? b.task : null, strength: typeof b.sample?.strength === 'number' ? b.sample.strength : null, problem: null };
}

/** The form as a dry run asks it: its request's model and sample, the strength apart (formAnswer). */
export function dryRun(arch: ArchInfo, model: ModelForm, sample: SampleForm, maskPainted = false): { body: ResolveBody; strength: number | null } {
  const s = requestSample(arch, { ...sample, images: presentInputs(sample, maskPainted), strength: null });
  return { body: { model: requestModel(arch, model), sample: s }, strength: sample.strength };
}

/**
 * The form's answer: asked without its strength first (which task runs, and that task's default
 * strength), then, where that task takes one and the person moved it, with it (the engine checks
 * the value: a strength under one step is refused).
 */
export async function formAnswer(jobId: string, ask: ReturnType<typeof dryRun>, signal?: AbortSignal): Promise<ResolveAnswer | null> {
  const first = await resolveRequest(jobId, ask.body, signal);
  if (!first || first.problem || first.strength === null || ask.strength === null) return first;
  const second = await resolveRequest(jobId, { ...ask.body, sample: { ...ask.body.sample, strength: ask.strength } }, signal);
  return { ...first, problem: second?.problem ?? null };
}

/** A restored form's task left automatic ('') where the engine infers the same one from its inputs. */
export async function withAutomaticTask(jobId: string, arch: ArchInfo, model: ModelForm, form: SampleForm): Promise<SampleForm> {
  if (!form.task) return form;
  const answer = await resolveRequest(jobId, dryRun(arch, model, { ...form, task: '' }).body).catch(() => null);
  return answer?.task === form.task ? { ...form, task: '' } : form;
}

/** Where a refusal shows: under a sample field, on one LoRA of the model, or on the model. */
export function problemPlace(problem: ResolveProblem): { sample: string } | { lora: number } | { model: true } {
  const lora = /^model\.loras\[(\d+)\]/.exec(problem.field);
  if (lora) return { lora: Number(lora[1]) };
  if (problem.field.startsWith('sample.')) return { sample: problem.field.slice('sample.'.length).split(/[.[]/)[0] };
  return { model: true };
}

/** The refusal as a sentence next to its field: the engine's words without the field's name in front. */
export function problemText(problem: ResolveProblem): string {
  const text = problem.detail.startsWith(`${problem.field}: `) ? problem.detail.slice(problem.field.length + 2) : problem.detail;
  const sentence = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?)]$/.test(sentence) ? sentence : `${sentence}.`;
}

/** The sample keys the inputs panel holds: a refusal naming one shows there (InputsPanel.tsx). */
export const INPUT_KEYS = new Set<string>([...SAMPLE_INPUTS, 'task', 'strength', 'resize_mode']);

/** The form's notes with the engine's refusal of one of its sample fields among them, unless a note of
 * the form's own already speaks of that field. */
export function notesWithProblem(notes: FieldNote[], problem: ResolveProblem | null): FieldNote[] {
  const place = problem ? problemPlace(problem) : null;
  if (!problem || !place || !('sample' in place) || INPUT_KEYS.has(place.sample)) return notes;
  if (notes.some((n) => n.field === place.sample && n.blocking)) return notes;
  return [...notes, { field: place.sample, message: problemText(problem), blocking: false, engine: true }];
}
