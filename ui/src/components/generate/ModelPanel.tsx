'use client';
// The model: one of the engine's library (a checkpoint, a model file with its companions, a diffusers
// folder: GET /library), or a profile or an arch (GET /models) with its variant and name_or_path; a VAE
// override from the model folders; quantization, low_vram. (LoRAs: LoraPanel.)
import Link from 'next/link';
import { entryKey, pickedEntry, pickerGroups, vaeChoices, type LibraryEntry } from '@/components/library/library';
import type { ArchInfo, ModelForm, ProfileInfo } from './types';

const QTYPE_SUGGESTIONS = ['qfloat8', 'qint8', 'qint4'];

interface Props {
  archs: ArchInfo[];
  profiles: ProfileInfo[];
  arch: ArchInfo | null;
  model: ModelForm;
  onArch: (name: string) => void;
  onProfile: (name: string) => void;
  onVariant: (name: string) => void;
  onChange: (patch: Partial<ModelForm>) => void;
  /** `hf download REPO` when the form names a default repo that is not on this machine */
  download?: string | null;
  /** the Library page, with this engine */
  libraryHref?: string;
  /** the engine's library entries (null: not read) */
  library?: LibraryEntry[] | null;
  onPick?: (entry: LibraryEntry) => void;
}

export default function ModelPanel({ archs, profiles, arch, model, onArch, onProfile, onVariant, onChange, download, libraryHref = '/library', library = null, onPick }: Props) {
  const variants = Object.keys(arch?.variants ?? {});
  const byProfile = !!model.profile;
  const groups = library ? pickerGroups(library, archs.map((a) => a.name)) : [];
  const picked = library ? pickedEntry(library, model) : null;
  const vaes = library && !byProfile ? vaeChoices(library, model.arch) : [];
  const vae = model.components?.vae ?? '';
  const setVae = (path: string) => {
    const { vae: _old, ...rest } = model.components ?? {};
    onChange({ components: path ? { ...rest, vae: path } : rest });
  };
  // the engine could not resolve this profile's defaults (e.g. a [generation] size its arch refuses)
  const profileError = byProfile ? profiles.find((p) => p.name === model.profile)?.sample_error : null;
  return (
    <section className="card" aria-label="Model">
      <h3>Model</h3>
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
      {profiles.length > 0 && (
        <label className="field">
          Profile
          <select value={model.profile} onChange={(e) => onProfile(e.target.value)} aria-label="Profile" data-testid="profile-select">
            <option value="">none: pick an arch and weights below</option>
            {profiles.map((p) => (
              <option key={p.name} value={p.name}>
                {p.name} ({p.architecture}
                {p.variant ? `, ${p.variant}` : ''})
              </option>
            ))}
          </select>
        </label>
      )}
      {profileError && (
        <div className="alert error" data-testid="profile-error">
          This profile&apos;s defaults do not resolve: {profileError}
        </div>
      )}
      <label className="field">
        Arch
        <select value={model.arch} onChange={(e) => onArch(e.target.value)} disabled={byProfile} aria-label="Arch" data-testid="arch-select">
          {archs.map((a) => (
            <option key={a.name} value={a.name}>
              {a.name} ({a.modality})
            </option>
          ))}
        </select>
      </label>
      {arch?.description && <div className="muted small">{arch.description}</div>}
      {variants.length > 0 && (
        <label className="field">
          Variant
          <select
            value={model.variant || arch?.default_variant || variants[0]}
            onChange={(e) => onVariant(e.target.value)}
            disabled={byProfile}
            aria-label="Variant"
          >
            {variants.map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
        </label>
      )}
      <label className="field">
        name_or_path
        <input
          disabled={byProfile}
          list="name-or-path-options"
          value={model.name_or_path}
          onChange={(e) => onChange({ name_or_path: e.target.value })}
          placeholder={byProfile ? 'from the profile' : arch?.default_name_or_path || 'a hub repo id or a local path'}
          aria-label="name_or_path"
          aria-describedby={download ? 'model-missing' : undefined}
          data-testid="name-or-path"
        />
        <datalist id="name-or-path-options">
          {arch?.default_name_or_path && <option value={arch.default_name_or_path}>the arch&apos;s weights</option>}
          {arch && <option value={`tiny:${arch.name}`}>tiny random-weight test model</option>}
        </datalist>
      </label>
      {download && (
        <div className="alert warn" id="model-missing" data-testid="model-missing">
          This model is not downloaded: run <code>{download}</code>, or pick one from the <Link href={libraryHref}>library</Link> (a tiny test
          model is <code>tiny:{model.arch}</code>).
        </div>
      )}
      {vaes.length > 0 && (
        <label className="field">
          VAE
          <select value={vae} onChange={(e) => setVae(e.target.value)} aria-label="VAE" data-testid="vae-select">
            <option value="">the model&apos;s own</option>
            {vaes.map((v) => (
              <option key={v.path} value={v.path}>
                {v.name}
              </option>
            ))}
            {vae && !vaes.some((v) => v.path === vae) && <option value={vae}>{vae}</option>}
          </select>
        </label>
      )}
      <datalist id="qtype-options">
        {QTYPE_SUGGESTIONS.map((q) => (
          <option key={q} value={q} />
        ))}
      </datalist>
      <div className="row">
        <label>
          <input type="checkbox" checked={model.quantize} onChange={(e) => onChange({ quantize: e.target.checked })} /> quantize
        </label>
        <input
          className="narrow"
          list="qtype-options"
          value={model.qtype}
          disabled={!model.quantize}
          onChange={(e) => onChange({ qtype: e.target.value })}
          aria-label="qtype"
        />
      </div>
      <div className="row">
        <label>
          <input type="checkbox" checked={model.quantize_te} onChange={(e) => onChange({ quantize_te: e.target.checked })} /> quantize_te
        </label>
        <input
          className="narrow"
          list="qtype-options"
          value={model.qtype_te}
          disabled={!model.quantize_te}
          onChange={(e) => onChange({ qtype_te: e.target.value })}
          aria-label="qtype_te"
        />
      </div>
      <label>
        <input type="checkbox" checked={model.low_vram} onChange={(e) => onChange({ low_vram: e.target.checked })} /> low_vram
      </label>
    </section>
  );
}
