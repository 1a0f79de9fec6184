// The engine settings form, built from the engine's own description of its `engine:` block
// (EngineSettings via `engine_settings --describe`: each field's type, bounds, choices, default, doc),
// never from a copy of its keys. Every field may be left empty: the key is then left out and the
// engine's default applies. The checks here only spare a round trip; the engine's Python decides.

export interface SettingField {
  type: string; // bool | int | float | str | list | object | any
  min?: number;
  max?: number;
  exclusive_min?: boolean;
  choices?: (string | number)[];
  nullable?: boolean;
  default?: unknown;
  doc?: string;
  /** a nested settings class (engine.limits) */
  fields?: SettingsDescription;
}
export type SettingsDescription = Record<string, SettingField>;

/** How a field is edited: a tri-state select for booleans (default / on / off), a number, a choice,
 * one line of text, one folder per line, JSON (or a plain name) for anything else, a nested group. */
export type Control = 'toggle' | 'number' | 'select' | 'text' | 'lines' | 'json' | 'group';

export interface FormField {
  /** dotted under engine: `limits.max_steps` */
  key: string;
  label: string;
  control: Control;
  field: SettingField;
  children: FormField[];
}

export type Block = Record<string, unknown>;
/** What each input holds, by field key; '' is "left to the engine's default". */
export type Drafts = Record<string, string>;
export type FieldErrors = Record<string, string>;

const WORDS: Record<string, string> = { lora: 'LoRA', gb: 'GB', mb: 'MB', comfyui: 'ComfyUI', dtype: 'dtype', id: 'ID' };

export function labelOf(name: string): string {
  return name
    .split('_')
    .map((w, i) => WORDS[w] ?? (i === 0 ? w[0].toUpperCase() + w.slice(1) : w))
    .join(' ');
}

export function controlOf(f: SettingField): Control {
  if (f.fields) return 'group';
  if (f.type === 'bool') return 'toggle';
  if (f.type === 'int' || f.type === 'float') return f.choices ? 'select' : 'number';
  if (f.choices) return 'select';
  if (f.type === 'str') return 'text';
  if (f.type === 'list') return 'lines';
  return 'json';
}

export function formFields(desc: SettingsDescription, prefix = ''): FormField[] {
  return Object.entries(desc).map(([name, field]) => {
    const key = prefix ? `${prefix}.${name}` : name;
    const control = controlOf(field);
    return { key, label: labelOf(name), control, field, children: field.fields ? formFields(field.fields, key) : [] };
  });
}

/** Every field that holds a value (groups opened). */
export function leaves(fields: FormField[]): FormField[] {
  return fields.flatMap((f) => (f.control === 'group' ? leaves(f.children) : [f]));
}

/** What the person sees when a field is left empty. */
export function defaultText(f: SettingField): string {
  if (f.default !== undefined) return f.type === 'bool' ? (f.default ? 'on' : 'off') : String(f.default);
  if (f.type === 'list') return 'none';
  return 'unset';
}

const isObj = (v: unknown): v is Block => !!v && typeof v === 'object' && !Array.isArray(v);

function valueAt(block: Block, key: string): unknown {
  return key.split('.').reduce<unknown>((v, k) => (isObj(v) ? v[k] : undefined), block);
}

function draftOf(control: Control, v: unknown): string {
  if (v === undefined || v === null) return '';
  if (control === 'lines' && Array.isArray(v)) return v.map(String).join('\n');
  if (control === 'json') return typeof v === 'string' ? v : JSON.stringify(v);
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

export function draftsFromBlock(fields: FormField[], block: Block): Drafts {
  return Object.fromEntries(leaves(fields).map((f) => [f.key, draftOf(f.control, valueAt(block, f.key))]));
}

const num = (v: number) => String(v);

/** A number within the field's bounds, or the engine's wording for why not. */
function parseNumber(f: SettingField, draft: string): number | string {
  const v = Number(draft);
  if (!Number.isFinite(v)) return `must be a number, got ${JSON.stringify(draft)}`;
  if (f.type === 'int' && !Number.isInteger(v)) return `must be an integer, got ${draft}`;
  if (f.min !== undefined && (f.exclusive_min ? v <= f.min : v < f.min)) return `must be ${f.exclusive_min ? '>' : '>='} ${num(f.min)}, got ${draft}`;
  if (f.max !== undefined && v > f.max) return `must be <= ${num(f.max)}, got ${draft}`;
  return v;
}

/** One draft as the value the block carries; {error} when it cannot be one. */
export function parseDraft(ff: FormField, raw: string): { value?: unknown; error?: string } {
  const draft = ff.control === 'lines' ? raw : raw.trim();
  if (draft.trim() === '') return {};
  const f = ff.field;
  switch (ff.control) {
    case 'toggle':
      return draft === 'true' || draft === 'false' ? { value: draft === 'true' } : { error: `must be true or false, got ${draft}` };
    case 'number': {
      const v = parseNumber(f, draft);
      return typeof v === 'number' ? { value: v } : { error: v };
    }
    case 'select': {
      const choice = (f.choices ?? []).find((c) => String(c) === draft);
      return choice !== undefined ? { value: choice } : { error: `must be one of ${(f.choices ?? []).join(', ')}, got ${draft}` };
    }
    case 'lines': {
      const items = draft.split('\n').map((s) => s.trim()).filter(Boolean);
      return items.length ? { value: items } : {};
    }
    case 'json':
      try {
        return { value: JSON.parse(draft) };
      } catch {
        return /^[{["]/.test(draft) ? { error: 'is not valid JSON' } : { value: draft }; // a plain name (a profile)
      }
    default:
      return { value: draft };
  }
}

function setAt(block: Block, key: string, value: unknown): void {
  const parts = key.split('.');
  let obj = block;
  for (const p of parts.slice(0, -1)) {
    if (!isObj(obj[p])) obj[p] = {};
    obj = obj[p] as Block;
  }
  obj[parts[parts.length - 1]] = value;
}

/** The engine block the drafts say: keys the description does not list are kept from `base` as they
 * were; an empty draft leaves its key out; a group left empty is left out too. */
export function blockFromDrafts(fields: FormField[], drafts: Drafts, base: Block = {}): { block: Block; errors: FieldErrors } {
  const block: Block = {};
  for (const [k, v] of Object.entries(base)) if (!fields.some((f) => f.key === k)) block[k] = v;
  const errors: FieldErrors = {};
  for (const ff of leaves(fields)) {
    const { value, error } = parseDraft(ff, drafts[ff.key] ?? '');
    if (error) errors[ff.key] = error;
    else if (value !== undefined) setAt(block, ff.key, value);
  }
  return { block, errors };
}

/** The form field an engine error's key names (`engine.limits.max_steps`, or deeper inside a field:
 * `engine.default_model.arch`); null when it names the block itself. */
export function fieldOfKey(fields: FormField[], key: string): string | null {
  const rel = key.replace(/^engine\.?/, '');
  const hit = leaves(fields)
    .filter((f) => rel === f.key || rel.startsWith(`${f.key}.`) || rel.startsWith(`${f.key}[`))
    .sort((a, b) => b.key.length - a.key.length)[0];
  return hit?.key ?? null;
}

/** The keys that point the engine at model files: a new engine has none (the first-run offer). */
export const FOLDER_KEYS = { comfyui: 'comfyui_path', folders: 'model_folders' } as const;

export function hasModelFolders(block: Block): boolean {
  const folders = block[FOLDER_KEYS.folders];
  return (Array.isArray(folders) && folders.length > 0) || (typeof block[FOLDER_KEYS.comfyui] === 'string' && !!block[FOLDER_KEYS.comfyui]);
}

export type FolderKind = 'comfyui' | 'folders';

/** The keys a models folder fills: a ComfyUI install's `comfyui_path` (its models/ and tokenizer
 * folders), else one more of `model_folders` (an A1111/Forge install, its models/, or any folder). */
export function folderPatch(kind: FolderKind, folder: string, block: Block = {}): Block {
  const p = folder.trim();
  if (kind === 'comfyui') return { [FOLDER_KEYS.comfyui]: p };
  const had = Array.isArray(block[FOLDER_KEYS.folders]) ? (block[FOLDER_KEYS.folders] as unknown[]).map(String) : [];
  return { [FOLDER_KEYS.folders]: had.includes(p) ? had : [...had, p] };
}

/** The drafts with a folder patch applied (the settings page fills its fields; Save applies them). */
export function draftsWithPatch(fields: FormField[], drafts: Drafts, patch: Block): Drafts {
  return { ...drafts, ...draftsFromBlock(fields.filter((f) => f.key in patch), patch) };
}

/** The settings page of an engine job, at one field (`#setting-<key>` focuses it). */
export function settingsHref(jobId: string, key?: string): string {
  return `/jobs/${encodeURIComponent(jobId)}/settings${key ? `#setting-${key}` : ''}`;
}
