'use client';
// /generate: the engine strip, the model, prompt and input-image panels (fed by the engine's
// /models), the live preview, the engine's queue and the results gallery; a generated file
// dropped on the page restores its settings.
import Link from 'next/link';
import { useEffect, useMemo, useRef, useState } from 'react';
import { apiFetch, describeError } from '@/utils/api';
import { useStoredState } from '@/utils/useStoredState';
import { readFileSettings, uploadAsset } from './assets';
import EngineStrip from './EngineStrip';
import Gallery from './Gallery';
import InputsPanel, { archTakesInputs } from './InputsPanel';
import LoraPanel from './LoraPanel';
import type { MaskPainterHandle } from './MaskPainter';
import ModelPanel from './ModelPanel';
import PreviewPanel from './PreviewPanel';
import PromptPanel from './PromptPanel';
import QueuePanel from './QueuePanel';
import SettingsDrop, { NO_RESTORE, type RestoreNotice } from './SettingsDrop';
import { blockingSummary, sampleNotes } from './formChecks';
import { missingDownload, parseModelParam, type LibraryEntry } from '@/components/library/library';
import { normalizeModel } from './loras';
import {
  buildGenerateBody,
  formsFromFile,
  formsFromSettings,
  imagesFor,
  modelDefaults,
  modelFormFromSettings,
  normalizeSample,
  resolvedDefaults,
  sampleDefaults,
  withVariant,
} from './requestBody';
import { archTakes } from './tasks';
import type { ArchInfo, GalleryItem, ModelForm, ProfileInfo, SampleForm } from './types';
import { useEngine } from './useEngine';
import EnginesList from './EnginesList';
import { useEngineQueue } from './useEngineQueue';
import { targetJob, useEngines } from './useEngines';
import { fileUrl, useGallery } from './useGallery';
import { useGeneration } from './useGeneration';
import { useLibrary } from './useLibrary';

const newRequestId = () => `ui-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

export default function GeneratePage({ preferredJobId, preferredModel = null }: { preferredJobId: string | null; preferredModel?: string | null }) {
  const engine = useEngine(preferredJobId);
  const engines = useEngines(engine.job ? 1 : 0);
  const gallery = useGallery();
  const gen = useGeneration(gallery.add);
  const [storedModel, setModel, modelLoaded] = useStoredState<ModelForm | null>('aitk.generate.model', null);
  const [storedSample, setSample, sampleLoaded] = useStoredState<SampleForm | null>('aitk.generate.sample', null);
  const [detach, setDetach] = useStoredState<boolean>('aitk.generate.detach', true);
  // a form saved by an older page gets the keys added since
  const model = useMemo(() => (storedModel ? normalizeModel(storedModel) : null), [storedModel]);
  const sample = useMemo(() => (storedSample ? normalizeSample(storedSample) : null), [storedSample]);
  const painter = useRef<MaskPainterHandle>(null);
  const [maskPainted, setMaskPainted] = useState(false);
  const [preparing, setPreparing] = useState(false);
  const [restore, setRestore] = useState<RestoreNotice>(NO_RESTORE);

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
    // the input images the new arch takes stay: an asset id is the engine's, whatever the model
    setSample((prev) =>
      sampleDefaults(
        resolvedDefaults(a, m.variant, profile),
        a,
        prev ? { prompt: prev.prompt, negative_prompt: prev.negative_prompt, seed: prev.seed, images: imagesFor(a, normalizeSample(prev).images) } : {},
      ),
    );
    setMaskPainted(false);
  };

  // first /models answer: keep the saved forms if their arch (and profile) exist, else the engine's default model
  useEffect(() => {
    if (!archs.length || !modelLoaded || !sampleLoaded) return;
    if (applyLibraryModel()) return;
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

  /** A model from the Library page (?model=), once: the forms for its arch (or profile), then its keys. */
  const libraryModelUsed = useRef(false);
  const applyLibraryModel = (): boolean => {
    if (libraryModelUsed.current) return false;
    libraryModelUsed.current = true;
    const picked = parseModelParam(preferredModel);
    const profile = typeof picked?.profile === 'string' ? profileNamed(picked.profile) : null;
    const a = archs.find((x) => x.name === (profile?.architecture ?? picked?.arch));
    if (!picked || !a) return false;
    resetForms(a, profile);
    setModel(modelFormFromSettings(a, profiles, picked));
    return true;
  };

  /** A model from the picker (the engine's library): the forms for its arch, then its model keys. */
  const onPick = (entry: LibraryEntry) => {
    const a = archs.find((x) => x.name === entry.arch);
    if (!a || !entry.model) return;
    resetForms(a, null, typeof entry.model.variant === 'string' ? entry.model.variant : '');
    setModel(modelFormFromSettings(a, profiles, entry.model));
  };

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
      setSample((prev) => sampleDefaults(resolvedDefaults(arch, variant, null), arch, prev ? normalizeSample(prev) : {}));
    }
  };

  const running = engine.state === 'ready';
  const job = engine.job;
  const queue = useEngineQueue(job?.id ?? null, running);
  const { onQueue } = gen;
  useEffect(() => {
    if (queue.snapshot) onQueue(queue.snapshot, queue.at);
  }, [queue.snapshot, queue.at, onQueue]);
  const jobRef = job ? { id: job.id, name: job.name } : null;
  // not while the engine is down (stopped from another tab too: the strip polls the job row)
  const library = useLibrary(job?.id ?? null, running);
  const presence = library?.archs ?? null;
  const download = model ? missingDownload(presence, model) : null;
  const notes = useMemo(() => (arch && sample ? sampleNotes(arch, sample) : []), [arch, sample]);
  const blocked = blockingSummary(notes);
  const canGenerate = !!(arch && model && sample && job) && running && !preparing && !blocked;
  const whyNot = !engine.models
    ? 'Start the engine above: the model list comes from it.'
    : !running
      ? 'The engine is not running: start the engine above to generate.'
      : blocked;

  // the engine stopped (here, from another tab, or by the jobs page) while a request ran: say so,
  // rather than a plain "Cancelled" that reads as if someone pressed Cancel
  const { engineStopped } = gen;
  useEffect(() => {
    if (engine.state === 'stopping' || engine.state === 'stopped') engineStopped();
  }, [engine.state, engineStopped]);

  const uploadMask = (png: Blob) => {
    if (!job) return Promise.reject(new Error('the engine is not running'));
    return uploadAsset(job.id, png, 'mask.png');
  };

  const onMaskPaint = (has: boolean) => {
    setMaskPainted(has);
    // every stroke erased: no mask (the stored one too)
    if (!has) {
      setSample((prev) => {
        const p = prev ? normalizeSample(prev) : null;
        return p?.images.mask_img ? { ...p, images: { ...p.images, mask_img: null } } : prev;
      });
    }
  };

  const generate = async () => {
    if (!arch || !model || !sample || !job || preparing) return;
    let s = sample;
    if (painter.current && s.images.init_img) {
      // the painted mask goes up first (once per change): its asset id is the request's mask_img
      setPreparing(true);
      try {
        const mask = await painter.current.commit();
        if (mask !== (s.images.mask_img ?? null)) {
          s = { ...s, images: { ...s.images, mask_img: mask } };
          setSample(s);
        }
      } catch (err) {
        gen.fail(`The mask could not be uploaded: ${(err as Error).message}`);
        return;
      } finally {
        setPreparing(false);
      }
    }
    const body = buildGenerateBody(arch, model, s, newRequestId(), { detach, maxFrames: 8 });
    const to = targetJob(engines.target, engines.engines, { id: job.id, name: job.name });
    if (to) gen.generate(to, body);
  };

  const reuse = (item: GalleryItem) => {
    const a = archs.find((x) => x.name === item.model.arch);
    if (!a) return;
    const forms = formsFromSettings(a, profiles, item.model, item.sample, item.result.seed);
    setModel(forms.model);
    setSample(forms.sample);
    setMaskPainted(false);
    window.scrollTo({ top: 0, behavior: 'smooth' });
  };

  /** A generated file: POST /settings, then the forms from its answer. */
  const restoreFrom = async (file: File) => {
    if (!job || !running) {
      setRestore({ ...NO_RESTORE, fileName: file.name, error: 'Start the engine first: it reads the settings out of the file.' });
      return;
    }
    setRestore({ ...NO_RESTORE, busy: true, fileName: file.name });
    try {
      const answer = await readFileSettings(job.id, file);
      const forms = formsFromFile(archs, profiles, model, answer);
      if ('error' in forms) {
        setRestore({ ...NO_RESTORE, fileName: file.name, error: forms.error });
        return;
      }
      setModel(forms.model);
      setSample(forms.sample);
      setMaskPainted(false);
      setRestore({ ...NO_RESTORE, fileName: file.name, source: answer.source ?? 'aitk', warnings: forms.warnings });
    } catch (err) {
      setRestore({ ...NO_RESTORE, fileName: file.name, error: (err as Error).message });
    }
  };

  /** A gallery image as the input image: its file uploaded to the engine's assets. */
  const useAsInput = async (item: GalleryItem): Promise<string | null> => {
    if (!job || !sample) return 'Start the engine first: input images are uploaded to it.';
    try {
      const res = await apiFetch(fileUrl(item));
      if (!res.ok) return `The file could not be read: ${(await describeError(res)).message}`;
      const id = await uploadAsset(job.id, await res.blob(), item.result.relpath.split('/').pop() || 'input.png');
      setSample((prev) => {
        const p = prev ? normalizeSample(prev) : sample;
        return { ...p, images: { ...p.images, init_img: id, mask_img: null } };
      });
      setMaskPainted(false);
      window.scrollTo({ top: 0, behavior: 'smooth' });
      return null;
    } catch (err) {
      return `The image could not be uploaded: ${(err as Error).message}`;
    }
  };

  const batchResults = gen.view.requestId
    ? gallery.recent.filter((i) => i.requestId === gen.view.requestId).sort((a, b) => (a.result.index ?? 0) - (b.result.index ?? 0))
    : [];

  const onKeyDown = (e: React.KeyboardEvent) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && canGenerate) {
      e.preventDefault();
      void generate();
    }
  };

  return (
    <div className="generate" onKeyDown={onKeyDown}>
      <h1>Generate</h1>
      <EngineStrip engine={engine} />
      {(engines.engines?.length ?? 0) > 1 && <EnginesList engines={engines.engines!} target={engines.target} onTarget={engines.setTarget} />}
      <div className="generate-grid">
        <div className="forms">
          <SettingsDrop notice={restore} onFile={(f) => void restoreFrom(f)} onDismiss={() => setRestore(NO_RESTORE)} />
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
                download={download}
                library={library?.entries ?? null}
                onPick={onPick}
                libraryHref={job ? `/library?job=${encodeURIComponent(job.id)}` : '/library'}
              />
              <LoraPanel
                jobId={job?.id ?? null}
                running={running}
                arch={arch.name}
                picks={model.loras}
                prompt={sample.prompt}
                onPicks={(loras) => setModel({ ...model, loras })}
                onPrompt={(prompt) => setSample({ ...sample, prompt })}
              />
              <PromptPanel arch={arch} sample={sample} notes={notes} onChange={(p) => setSample({ ...sample, ...p })} />
              {archTakesInputs(arch) && (
                <InputsPanel
                  arch={arch}
                  sample={sample}
                  job={jobRef}
                  maskPainted={maskPainted}
                  painterRef={painter}
                  uploadMask={uploadMask}
                  onMaskPaint={onMaskPaint}
                  onChange={(p) => {
                    if (p.images && p.images.init_img !== sample.images.init_img) setMaskPainted(false);
                    setSample({ ...sample, ...p });
                  }}
                />
              )}
              <div className="row">
                <Link href={job ? `/grid?job=${encodeURIComponent(job.id)}` : '/grid'} className="button" data-testid="make-grid">
                  Make a grid from these settings
                </Link>
              </div>
            </>
          ) : null}
        </div>
        <div className="output">
          <PreviewPanel
            view={gen.view}
            canGenerate={canGenerate}
            whyNot={whyNot}
            onGenerate={() => void generate()}
            onCancel={gen.cancel}
            onDismiss={gen.dismiss}
            detach={detach}
            onDetach={setDetach}
            results={batchResults}
          />
          <QueuePanel
            snapshot={queue.snapshot}
            error={queue.error}
            mine={gen.ours}
            notice={gen.notice}
            onCancel={(id) => {
              gen.noteCancel(id);
              return queue.cancel(id);
            }}
            onMove={queue.move}
          />
          <Gallery items={gallery.items} search={gallery.search} onReuse={reuse} onDelete={gallery.remove} onUseAsInput={arch && archTakes(arch, 'init_img') ? useAsInput : undefined} />
        </div>
      </div>
    </div>
  );
}
