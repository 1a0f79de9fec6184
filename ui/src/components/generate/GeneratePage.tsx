'use client';
// /generate: the engine strip, the model and prompt panels (fed by the engine's /models),
// the live preview and the results gallery.
import { useEffect, useMemo } from 'react';
import { useStoredState } from '@/utils/useStoredState';
import EngineStrip from './EngineStrip';
import Gallery from './Gallery';
import ModelPanel from './ModelPanel';
import PreviewPanel from './PreviewPanel';
import PromptPanel from './PromptPanel';
import { ACTIVE_PHASES } from './generationView';
import { buildGenerateBody, formsFromSettings, modelDefaults, resolvedDefaults, sampleDefaults, withVariant } from './requestBody';
import type { ArchInfo, GalleryItem, ModelForm, ProfileInfo, SampleForm } from './types';
import { useEngine } from './useEngine';
import { useGallery } from './useGallery';
import { useGeneration } from './useGeneration';

const newRequestId = () => `ui-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

export default function GeneratePage({ preferredJobId }: { preferredJobId: string | null }) {
  const engine = useEngine(preferredJobId);
  const gallery = useGallery();
  const gen = useGeneration(gallery.add);
  const [model, setModel, modelLoaded] = useStoredState<ModelForm | null>('aitk.generate.model', null);
  const [sample, setSample, sampleLoaded] = useStoredState<SampleForm | null>('aitk.generate.sample', null);
  const [detach, setDetach] = useStoredState<boolean>('aitk.generate.detach', true);

  // the strip's health (active model, pool) changes with each request: refresh it when one ends
  const phase = gen.view.phase;
  const { refreshHealth } = engine;
  useEffect(() => {
    if (phase !== 'running') refreshHealth().catch(() => undefined);
  }, [phase, refreshHealth]);

  const archs = useMemo(() => engine.models?.archs ?? [], [engine.models]);
  const profiles = useMemo(() => engine.models?.profiles ?? [], [engine.models]);
  const arch = archs.find((a) => a.name === model?.arch) ?? null;
  const profileNamed = (name: string) => profiles.find((p) => p.name === name) ?? null;

  /** New forms for an arch (or a profile), keeping what the person wrote. */
  const resetForms = (a: ArchInfo, profile: ProfileInfo | null, variant = '') => {
    const m = { ...modelDefaults(a, profile), ...(variant ? { variant } : {}) };
    setModel(m);
    setSample((prev) =>
      sampleDefaults(resolvedDefaults(a, m.variant, profile), a, prev ? { prompt: prev.prompt, negative_prompt: prev.negative_prompt, seed: prev.seed } : {}),
    );
  };

  // first /models answer: keep the saved forms if their arch (and profile) exist, else the engine's default model
  useEffect(() => {
    if (!archs.length || !modelLoaded || !sampleLoaded) return;
    const savedOk = model && archs.some((a) => a.name === model.arch) && (!model.profile || profileNamed(model.profile));
    if (savedOk && sample) return;
    const dm = engine.models?.default_model;
    const dmProfile = typeof dm === 'string' ? profileNamed(dm) : null;
    const dmArch = dm && typeof dm === 'object' ? archs.find((a) => a.name === (dm as { arch?: string }).arch) : undefined;
    const a = archs.find((x) => x.name === dmProfile?.architecture) ?? dmArch ?? archs[0];
    resetForms(a, dmProfile);
    const dmPath = dm && typeof dm === 'object' ? (dm as { name_or_path?: unknown }).name_or_path : undefined;
    if (dmArch && typeof dmPath === 'string') setModel((m) => (m ? { ...m, name_or_path: dmPath } : m));
  }, [archs, modelLoaded, sampleLoaded]); // eslint-disable-line react-hooks/exhaustive-deps

  const onArch = (name: string) => {
    const next = archs.find((a) => a.name === name);
    if (next) resetForms(next, null);
  };
  const onProfile = (name: string) => {
    const p = profileNamed(name);
    const a = archs.find((x) => x.name === (p?.architecture ?? model?.arch)) ?? archs[0];
    resetForms(a, p);
  };
  const onVariant = (variant: string) => {
    if (arch && model) {
      setModel(withVariant(arch, model, variant));
      setSample((prev) => sampleDefaults(resolvedDefaults(arch, variant, null), arch, prev ?? {}));
    }
  };

  const running = engine.state === 'ready';
  const job = engine.job;
  const canGenerate = !!(arch && model && sample && job);
  const whyNot = !engine.models
    ? 'Start the engine: the model list comes from it.'
    : !running
      ? 'The engine is not running: start it above to generate.'
      : null;

  const generate = () => {
    if (!arch || !model || !sample || !job) return;
    const body = buildGenerateBody(arch, model, sample, newRequestId(), { detach, maxFrames: 8 });
    gen.generate({ id: job.id, name: job.name }, body);
  };

  const reuse = (item: GalleryItem) => {
    const a = archs.find((x) => x.name === item.model.arch);
    if (!a) return;
    const forms = formsFromSettings(a, profiles, item.model, item.sample, item.result.seed);
    setModel(forms.model);
    setSample(forms.sample);
    window.scrollTo({ top: 0, behavior: 'smooth' });
  };

  const active = ACTIVE_PHASES.has(gen.view.phase);
  const onKeyDown = (e: React.KeyboardEvent) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && canGenerate && !active) {
      e.preventDefault();
      generate();
    }
  };

  return (
    <div className="generate" onKeyDown={onKeyDown}>
      <h1>Generate</h1>
      <EngineStrip engine={engine} />
      <div className="generate-grid">
        <div className="forms">
          {!engine.models ? (
            <section className="card muted" data-testid="models-missing">
              {engine.modelsError ? `Could not read the model list: ${engine.modelsError}` : 'Start the engine to load the model list.'}
            </section>
          ) : model && sample && arch ? (
            <>
              <ModelPanel
                archs={archs}
                profiles={profiles}
                arch={arch}
                model={model}
                onArch={onArch}
                onProfile={onProfile}
                onVariant={onVariant}
                onChange={(p) => setModel({ ...model, ...p })}
              />
              <PromptPanel arch={arch} sample={sample} jobId={job?.id ?? null} onChange={(p) => setSample({ ...sample, ...p })} />
              <label className="small">
                <input type="checkbox" checked={detach} onChange={(e) => setDetach(e.target.checked)} /> keep generating when this page
                closes (re-attach on return)
              </label>
            </>
          ) : null}
        </div>
        <div className="output">
          <PreviewPanel view={gen.view} canGenerate={canGenerate} whyNot={whyNot} onGenerate={generate} onCancel={gen.cancel} onDismiss={gen.dismiss} />
          <Gallery items={gallery.items} onReuse={reuse} onDelete={gallery.remove} />
        </div>
      </div>
    </div>
  );
}
