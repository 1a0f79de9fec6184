'use client';
// The model picker over the engine's library (GET /library): its checkpoints, model files and
// diffusers folders by group, the ones that cannot load here disabled with why; and the companion
// files the picked one takes.
import { entryKey, pickedEntry, pickerGroups, type LibraryEntry } from '@/components/library/library';
import type { ArchInfo, ModelForm } from './types';

interface Props {
  library: LibraryEntry[];
  archs: ArchInfo[];
  model: ModelForm;
  onPick?: (entry: LibraryEntry) => void;
}

export default function LibraryPicker({ library, archs, model, onPick }: Props) {
  const groups = pickerGroups(library, archs.map((a) => a.name));
  const picked = pickedEntry(library, model);
  return (
    <>
      {groups.length > 0 && (
        <label className="field">
          From your models
          <select
            value={picked ? entryKey(picked) : ''}
            onChange={(e) => {
              const opt = groups.flatMap((g) => g.options).find((o) => o.key === e.target.value);
              if (opt && !opt.why) onPick?.(opt.entry);
            }}
            aria-label="From your models"
            data-testid="library-pick"
          >
            <option value="">{picked ? '' : 'pick a checkpoint or model file…'}</option>
            {groups.map((g) => (
              <optgroup key={g.label} label={g.label}>
                {g.options.map((o) => (
                  <option key={o.key} value={o.key} disabled={!!o.why} title={o.why ?? o.entry.path ?? ''}>
                    {o.label}
                  </option>
                ))}
              </optgroup>
            ))}
          </select>
        </label>
      )}
      {picked?.companions && Object.keys(picked.companions).length > 0 && (
        <div className="muted small" data-testid="library-companions">
          with{' '}
          {Object.entries(picked.companions)
            .map(([role, c]) => {
              const chosen = model.components?.[role];
              // a file chosen here (the VAE override) over the one the library found
              return chosen && chosen !== c.path ? `${role}: ${chosen.split(/[\\/]/).pop()} (chosen)` : `${role}: ${c.name}`;
            })
            .join(' · ')}
        </div>
      )}
    </>
  );
}
