// The engine settings form built from the engine's description (fixtures/engine_settings.json is
// what `engine_settings --describe` prints; testing/tests/test_engine_settings_cli.py keeps it so):
// each field type gets its control, bounds and choices are checked as the engine words them,
// empty means "the engine's default", nested settings (limits) nest, unknown keys survive.
import { describe, expect, it } from 'vitest';
import {
  blockFromDrafts,
  controlOf,
  defaultText,
  draftsFromBlock,
  draftsWithPatch,
  fieldOfKey,
  folderPatch,
  formFields,
  hasModelFolders,
  labelOf,
  leaves,
  settingsHref,
  type SettingsDescription,
} from '@/components/jobs/engineSettingsForm';
import { settingInRefusal } from '@/components/generate/loras';
import served from './fixtures/engine_settings.json';

const desc = served as SettingsDescription;
const fields = formFields(desc);
const byKey = Object.fromEntries(leaves(fields).map((f) => [f.key, f]));

describe('the form the engine describes', () => {
  it('has a field for every key, in the engine order, limits as a nested group', () => {
    expect(fields.map((f) => f.key)).toEqual(Object.keys(desc));
    for (const key of ['model_folders', 'comfyui_path', 'model_roots', 'lora_folder', 'keep_resident_gb', 'prefetch', 'max_batch']) {
      expect(byKey[key], key).toBeDefined();
      expect(byKey[key].field.doc, key).toBeTruthy();
    }
    const limits = fields.find((f) => f.key === 'limits')!;
    expect(limits.control).toBe('group');
    expect(limits.children.map((c) => c.key)).toEqual(Object.keys(desc.limits.fields!).map((k) => `limits.${k}`));
    expect(byKey['limits.max_steps'].control).toBe('number');
  });

  it('picks each control from the field type', () => {
    expect(byKey.prefetch.control).toBe('toggle');
    expect(byKey.max_batch.control).toBe('number');
    expect(byKey.keep_resident_gb.control).toBe('number');
    expect(byKey.queue_policy.control).toBe('select');
    expect(byKey.lora_folder.control).toBe('text');
    expect(byKey.model_folders.control).toBe('lines');
    expect(byKey.default_model.control).toBe('json');
    expect(controlOf({ type: 'int', choices: [1, 2] })).toBe('select');
    expect(controlOf({ type: 'object' })).toBe('json');
  });

  it('labels and defaults read as a person reads them', () => {
    expect(byKey.lora_folder.label).toBe('LoRA folder');
    expect(byKey.keep_resident_gb.label).toBe('Keep resident GB');
    expect(byKey.comfyui_path.label).toBe('ComfyUI path');
    expect(defaultText(byKey.prefetch.field)).toBe('on');
    expect(defaultText(byKey.max_batch.field)).toBe('4');
    expect(defaultText(byKey.model_folders.field)).toBe('none');
    expect(defaultText(byKey.lora_folder.field)).toBe('unset');
  });
});

describe('drafts and the block they make', () => {
  const block = {
    lora_folder: '/models/loras',
    model_folders: ['/a', '/b'],
    prefetch: false,
    max_batch: 2,
    queue_policy: 'affinity',
    default_model: { arch: 'sd1', name_or_path: 'tiny:sd1' },
    limits: { max_steps: 50 },
    some_future_key: 7,
  };

  it('round-trips a block, keeping keys the form does not show', () => {
    const drafts = draftsFromBlock(fields, block);
    expect(drafts.lora_folder).toBe('/models/loras');
    expect(drafts.model_folders).toBe('/a\n/b');
    expect(drafts.prefetch).toBe('false');
    expect(drafts['limits.max_steps']).toBe('50');
    expect(drafts['limits.max_pixels']).toBe('');
    expect(drafts.comfyui_path).toBe('');
    const out = blockFromDrafts(fields, drafts, block);
    expect(out.errors).toEqual({});
    expect(out.block).toEqual(block);
  });

  it('leaves an empty field out (the engine default), and an emptied group too', () => {
    const drafts = { ...draftsFromBlock(fields, block), lora_folder: '  ', model_folders: '\n \n', prefetch: '', 'limits.max_steps': '' };
    const out = blockFromDrafts(fields, drafts, block);
    expect(out.errors).toEqual({});
    expect(out.block).not.toHaveProperty('lora_folder');
    expect(out.block).not.toHaveProperty('model_folders');
    expect(out.block).not.toHaveProperty('prefetch');
    expect(out.block).not.toHaveProperty('limits');
    expect(out.block.max_batch).toBe(2);
  });

  it('parses each type: numbers, lists (trimmed lines), a plain profile name, JSON', () => {
    const out = blockFromDrafts(fields, {
      keep_resident_gb: '1.5',
      model_roots: ' /x \n\n/y',
      default_model: 'my-profile',
      prefetch: 'true',
      'limits.max_batch': '8',
    });
    expect(out.errors).toEqual({});
    expect(out.block).toEqual({ keep_resident_gb: 1.5, model_roots: ['/x', '/y'], default_model: 'my-profile', prefetch: true, limits: { max_batch: 8 } });
  });

  it('refuses what the description bounds, in the engine words, by field', () => {
    const out = blockFromDrafts(fields, {
      max_batch: '0',
      port: '70000',
      grace_seconds: '0',
      max_overtake: '1.5',
      keep_resident_gb: 'lots',
      queue_policy: 'lifo',
      'limits.max_prompt_bytes': '70000',
      default_model: '{"arch": ',
    });
    expect(out.errors).toEqual({
      max_batch: 'must be >= 1, got 0',
      port: 'must be <= 65535, got 70000',
      grace_seconds: 'must be > 0, got 0',
      max_overtake: 'must be an integer, got 1.5',
      keep_resident_gb: 'must be a number, got "lots"',
      queue_policy: 'must be one of fifo, affinity, got lifo',
      'limits.max_prompt_bytes': 'must be <= 65536, got 70000',
      default_model: 'is not valid JSON',
    });
  });

  it('a nullable number field with a synthetic description: empty is unset, a number is checked', () => {
    const f = formFields({ compat: { type: 'int', min: 0, max: 10, nullable: true }, ratio: { type: 'float', min: 0, exclusive_min: true } });
    expect(blockFromDrafts(f, { compat: '' }).block).toEqual({});
    expect(blockFromDrafts(f, { compat: '3', ratio: '0.5' }).block).toEqual({ compat: 3, ratio: 0.5 });
    expect(blockFromDrafts(f, { ratio: '0' }).errors).toEqual({ ratio: 'must be > 0, got 0' });
  });
});

describe('engine errors on the field they name', () => {
  it('maps engine.<key> (and deeper paths) to the field; the block itself to none', () => {
    expect(fieldOfKey(fields, 'engine.lora_folder')).toBe('lora_folder');
    expect(fieldOfKey(fields, 'engine.limits.max_steps')).toBe('limits.max_steps');
    expect(fieldOfKey(fields, 'engine.default_model.arch')).toBe('default_model');
    expect(fieldOfKey(fields, 'engine.model_folders[0]')).toBe('model_folders');
    expect(fieldOfKey(fields, 'engine')).toBeNull();
    expect(fieldOfKey(fields, 'engine.bogus')).toBeNull();
  });

  it('a new engine has no model folders; one with a folder or a ComfyUI path has', () => {
    expect(hasModelFolders({})).toBe(false);
    expect(hasModelFolders({ model_folders: [] })).toBe(false);
    expect(hasModelFolders({ model_folders: ['/m'] })).toBe(true);
    expect(hasModelFolders({ comfyui_path: '/ComfyUI' })).toBe(true);
    expect(labelOf('max_overtake')).toBe('Max overtake');
  });
});

describe('the first-run folder offer and the LoRA panel links', () => {
  it('a ComfyUI install fills comfyui_path; any other folder is one more of model_folders', () => {
    expect(folderPatch('comfyui', ' /home/me/ComfyUI ')).toEqual({ comfyui_path: '/home/me/ComfyUI' });
    expect(folderPatch('folders', '/webui/models')).toEqual({ model_folders: ['/webui/models'] });
    expect(folderPatch('folders', '/b', { model_folders: ['/a'] })).toEqual({ model_folders: ['/a', '/b'] });
    expect(folderPatch('folders', '/a', { model_folders: ['/a'] })).toEqual({ model_folders: ['/a'] });
    // both keys are the engine's: the offer fills fields the description has
    expect(byKey.comfyui_path).toBeDefined();
    expect(byKey.model_folders.control).toBe('lines');
  });

  it('fills the settings form from a patch, the other drafts untouched', () => {
    const drafts = draftsFromBlock(fields, { max_batch: 2 });
    const out = draftsWithPatch(fields, drafts, { model_folders: ['/a', '/b'] });
    expect(out.model_folders).toBe('/a\n/b');
    expect(out.max_batch).toBe('2');
    expect(blockFromDrafts(fields, out).block).toEqual({ max_batch: 2, model_folders: ['/a', '/b'] });
  });

  it('a refusal naming a setting links there', () => {
    expect(settingInRefusal('Is not in a folder this engine loads models from (engine.model_roots).')).toBe('model_roots');
    expect(settingInRefusal('a relative path needs engine.lora_folder')).toBe('lora_folder');
    expect(settingInRefusal('No such file.')).toBeNull();
    expect(settingsHref('abc', 'lora_folder')).toBe('/jobs/abc/settings#setting-lora_folder');
    expect(settingsHref('a b')).toBe('/jobs/a%20b/settings');
  });
});
