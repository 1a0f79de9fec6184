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
import { buildGenerateBody, formsFromSettings, modelDefaults, sampleDefaults } from './requestBody';
import type { GalleryItem, ModelForm, SampleForm } from './types';
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
  const arch = archs.find((a) => a.name === model?.arch) ?? null;

  // first /models answer: keep the saved forms if their arch exists, else the first arch's defaults
  useEffect(() => {
    if (!archs.length || !modelLoaded || !sampleLoaded) return;
    if (!model || !archs.some((a) => a.name === model.arch)) {
      setModel(modelDefaults(archs[0]));
      setSample(sampleDefaults(archs[0], sample ?? {}));
    } else if (!sample) {
      setSample(sampleDefaults(archs.find((a) => a.name === model.arch) ?? archs[0]));
    }
  }, [archs, modelLoaded, sampleLoaded]); // eslint-disable-line react-hooks/exhaustive-deps

  const onArch = (name: string) => {
    const next = archs.find((a) => a.name === name);
    if (!next) return;
    setModel(modelDefaults(next));
    setSample((prev) => sampleDefaults(next, prev ? { prompt: prev.prompt, negative_prompt: prev.negative_prompt, seed: prev.seed } : {}));
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
    const forms = formsFromSettings(a, item.model, item.sample, item.result.seed);
    setModel(forms.model);
    setSample(forms.sample);
    window.scrollTo({ top: 0, behavior: 'smooth' });
  };

  const active = gen.view.phase === 'submitting' || gen.view.phase === 'running' || gen.view.phase === 'reattaching';
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
              <ModelPanel archs={archs} arch={arch} model={model} onArch={onArch} onChange={(p) => setModel({ ...model, ...p })} />
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
