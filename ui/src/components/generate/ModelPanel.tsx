'use client';
// The model: one of the engine's library (a checkpoint, a model file with its companions, a diffusers
// folder: GET /library), or a profile or an arch (GET /models) with its variant and name_or_path; a VAE
// override from the model folders; quantization, low_vram (QuantizeFields.tsx). (LoRAs: LoraPanel.)
import Link from 'next/link';
import { vaeChoices, type LibraryEntry } from '@/components/library/library';
import LibraryPicker from './LibraryPicker';
import QuantizeFields from './QuantizeFields';
import { problemPlace, problemText, type ResolveProblem } from './resolveRequest';
import type { ArchInfo, ModelForm, ProfileInfo } from './types';

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
  /** what the engine refuses in the request (POST /resolve): shown here when it names the model */
  problem?: ResolveProblem | null;
}

export default function ModelPanel({ archs, profiles, arch, model, onArch, onProfile, onVariant, onChange, download, libraryHref = '/library', library = null, onPick, problem = null }: Props) {
  const refused = problem && 'model' in problemPlace(problem) ? problemText(problem) : null;
  const variants = Object.keys(arch?.variants ?? {});
  const byProfile = !!model.profile;
  return (
    <section className="card" aria-label="Model">
      <h3>Model</h3>
      {library && <LibraryPicker library={library} archs={archs} model={model} onPick={onPick} />}
      {profiles.length > 0 && <ProfileSelect profiles={profiles} value={model.profile} onProfile={onProfile} />}
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
      {!byProfile && library && <VaeSelect library={library} model={model} onChange={onChange} />}
      <QuantizeFields model={model} onChange={onChange} attention={arch?.attention} />
      {refused && (
        <div className="alert error small" data-testid="model-problem">
          The engine refuses this model: {refused}
        </div>
      )}
    </section>
  );
}

/** A profile (or none), and why the engine could not resolve the chosen one's defaults. */
function ProfileSelect({ profiles, value, onProfile }: { profiles: ProfileInfo[]; value: string; onProfile: (name: string) => void }) {
  // e.g. a [generation] size its arch refuses
  const profileError = value ? profiles.find((p) => p.name === value)?.sample_error : null;
  return (
    <>
      <label className="field">
        Profile
        <select value={value} onChange={(e) => onProfile(e.target.value)} aria-label="Profile" data-testid="profile-select">
          <option value="">none: pick an arch and weights below</option>
          {profiles.map((p) => (
            <option key={p.name} value={p.name}>
              {p.name} ({p.architecture}
              {p.variant ? `, ${p.variant}` : ''})
            </option>
          ))}
        </select>
      </label>
      {profileError && (
        <div className="alert error" data-testid="profile-error">
          This profile&apos;s defaults do not resolve: {profileError}
        </div>
      )}
    </>
  );
}

/** A VAE file of the model folders over the model's own (`model.components.vae`). */
function VaeSelect({ library, model, onChange }: { library: LibraryEntry[]; model: ModelForm; onChange: (patch: Partial<ModelForm>) => void }) {
  const vaes = vaeChoices(library, model.arch);
  const vae = model.components?.vae ?? '';
  const setVae = (path: string) => {
    const { vae: _old, ...rest } = model.components ?? {};
    onChange({ components: path ? { ...rest, vae: path } : rest });
  };
  if (!vaes.length) return null;
  return (
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
  );
}
