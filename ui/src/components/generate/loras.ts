// LoRAs: the engine's lora_folder listing (GET /loras) grouped for the chosen arch, the picks a
// request applies (`model.loras`), trigger words into the prompt, and picks back from a request.
import type { LoraFile, LoraPick, ModelForm } from './types';

/** The strength slider's range; the number field next to it takes any value. */
export const SCALE_MIN = -2;
export const SCALE_MAX = 2;
export const SCALE_STEP = 0.05;

export interface LoraGroups {
  /** made for this arch */
  matching: LoraFile[];
  /** the file names no arch: offered too, the person knows best */
  unknown: LoraFile[];
  /** how many are for other archs (not offered) */
  other: number;
}

const byName = (a: LoraFile, b: LoraFile) => a.name.localeCompare(b.name);

/** The folder's files for an arch: its own, then those whose arch is unknown. */
export function lorasForArch(files: LoraFile[], arch: string): LoraGroups {
  const want = arch.toLowerCase();
  const matching = files.filter((f) => f.arch && f.arch.toLowerCase() === want).sort(byName);
  const unknown = files.filter((f) => !f.arch).sort(byName);
  return { matching, unknown, other: files.length - matching.length - unknown.length };
}

/** The listed file a pick names: by its relative path, or by the absolute path under `folder`. */
export function fileOfPick(files: LoraFile[], folder: string | null, path: string): LoraFile | null {
  const norm = (p: string) => p.replace(/\\/g, '/').replace(/\/+$/, '');
  const base = folder ? norm(folder) : null;
  const rel = base && norm(path).startsWith(`${base}/`) ? norm(path).slice(base.length + 1) : norm(path);
  return files.find((f) => norm(f.path) === rel) ?? null;
}

/** One more LoRA (a path already picked is not added twice). */
export function addPick(picks: LoraPick[], path: string, scale = 1): LoraPick[] {
  const p = path.trim();
  if (!p || picks.some((x) => x.path === p)) return picks;
  return [...picks, { path: p, scale }];
}

const baseName = (p: string) => p.replace(/\\/g, '/').split('/').pop() ?? p;

/** A short label for a pick: its file name without the extension, and its strength ("styleA ×0.8"). */
export function loraLabel(pick: LoraPick): string {
  return `${baseName(pick.path).replace(/\.safetensors$/i, '')} ×${Math.round(pick.scale * 100) / 100}`;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Whether the prompt already holds a trigger word (as a whole word or phrase, any case). */
export function hasTrigger(prompt: string, word: string): boolean {
  const w = word.trim();
  if (!w) return true;
  return new RegExp(`(^|[^\\p{L}\\p{N}_])${escapeRe(w)}($|[^\\p{L}\\p{N}_])`, 'iu').test(prompt);
}

/** The prompt with a trigger word appended after a comma, unless it already holds it. */
export function appendTrigger(prompt: string, word: string): string {
  const w = word.trim();
  if (!w || hasTrigger(prompt, w)) return prompt;
  const head = prompt.replace(/[\s,]+$/, '');
  return head ? `${head}, ${w}` : w;
}

/** The request's `model.loras`: the picks with a path, in order. */
export function lorasRequest(picks: LoraPick[]): { path: string; scale: number }[] {
  return picks
    .filter((p) => p.path.trim())
    .map((p) => ({ path: p.path.trim(), scale: Number.isFinite(Number(p.scale)) ? Number(p.scale) : 1 }));
}

/** A request's (or a start frame's, or a file's) LoRAs as picks: the one-LoRA shorthand
 * `lora_path`/`lora_scale` first (the engine applies it first), then `loras` (which repeats it first
 * in a config the engine resolved). */
export function picksFromSettings(model: Record<string, unknown>): LoraPick[] {
  let out: LoraPick[] = [];
  const scaleOf = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 1);
  const add = (path: unknown, scale: unknown) => {
    if (typeof path === 'string') out = addPick(out, path, scaleOf(scale));
  };
  add(model.lora_path, model.lora_scale);
  if (Array.isArray(model.loras)) {
    for (const entry of model.loras) {
      if (typeof entry === 'string') add(entry, 1);
      else if (entry && typeof entry === 'object') add((entry as { path?: unknown }).path, (entry as { scale?: unknown }).scale);
    }
  }
  return out;
}


/** Picks restored from a file name a LoRA by its file name only (files keep no paths): where the
 * folder holds exactly one file of that name, the pick becomes its path. Unchanged: the same array. */
export function resolvePicks(picks: LoraPick[], files: LoraFile[], folder: string | null): LoraPick[] {
  let changed = false;
  const out = picks.map((p) => {
    if (/[\\/]/.test(p.path) || fileOfPick(files, folder, p.path)) return p;
    const same = files.filter((f) => baseName(f.path) === p.path);
    if (same.length !== 1 || picks.some((q) => q.path === same[0].path)) return p;
    changed = true;
    return { ...p, path: same[0].path };
  });
  return changed ? out : picks;
}

/** A model form saved by an older page (localStorage): its one `lora_path` becomes a pick. */
export function normalizeModel(saved: ModelForm): ModelForm {
  if (Array.isArray(saved.loras)) return saved;
  const { lora_path, lora_scale, ...rest } = saved as ModelForm & { lora_path?: unknown; lora_scale?: unknown };
  return { ...rest, loras: picksFromSettings({ lora_path, lora_scale }) };
}

/** The engine setting a LoRA refusal says the person can change (the engine names it in its words:
 * "… (engine.model_roots)"), so the panel links to it; null when it names none. */
export function settingInRefusal(text: string): 'model_roots' | 'lora_folder' | null {
  const m = /\bengine\.(model_roots|lora_folder)\b/.exec(text);
  return m ? (m[1] as 'model_roots' | 'lora_folder') : null;
}
