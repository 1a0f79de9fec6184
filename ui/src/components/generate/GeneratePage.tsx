'use client';
// /generate: the engine strip, the prompt next to Generate, the model, settings and input-image panels
// (fed by the engine's /models, or with the engine down the last one this browser saw), the live preview,
// the engine's queue and the results gallery; a generated file dropped on the page restores its settings.
import { useEffect } from 'react';
import { missingDownload } from '@/components/library/library';
import EngineStrip from './EngineStrip';
import EnginesList from './EnginesList';
import { engineDefault } from './formStart';
import FormPanels from './FormPanels';
import GenerateBar from './GenerateBar';
import OutputColumn from './OutputColumn';
import type { SendTask } from './ResultViewer';
import SettingsDrop from './SettingsDrop';
import { archTakes, taskInfo } from './tasks';
import type { GalleryItem } from './types';
import { useEngine } from './useEngine';
import { useEngineQueue } from './useEngineQueue';
import { useEngines } from './useEngines';
import { useFormNotes } from './useFormNotes';
import { useGallery } from './useGallery';
import { useGenerateForms } from './useGenerateForms';
import { useGeneration } from './useGeneration';
import { useInputImages } from './useInputImages';
import { useLibrary } from './useLibrary';
import { useModelsCache } from './useModelsCache';
import { useSettingsRestore } from './useSettingsRestore';
import { useSubmit } from './useSubmit';
import { upscaleDefaults, type UpscaleAction } from './controlHires';
import { useControlLists } from './useControlLists';
import { useUpscale } from './useUpscale';

export default function GeneratePage({ preferredJobId, preferredModel = null }: { preferredJobId: string | null; preferredModel?: string | null }) {
  const engine = useEngine(preferredJobId);
  const engines = useEngines(engine.job ? 1 : 0);
  const gallery = useGallery();
  const gen = useGeneration(gallery.add);
  const running = engine.state === 'ready' || engine.state === 'warming'; // a warming engine answers and queues
  const job = engine.job;
  // not while the engine is down (stopped from another tab too: the strip polls the job row)
  const library = useLibrary(job?.id ?? null, running);
  // a stopped engine's last answer is the cached one (said so under the form)
  const cache = useModelsCache(running ? engine.models : null);
  const dflt = engineDefault(job?.job_config, cache.models?.default_model);
  const forms = useGenerateForms(cache.models, preferredModel, { engineKnown: engine.state !== 'loading', engineDefault: dflt, library });
  const { arch, model, sample } = forms;
  const inputs = useInputImages(job, forms);
  const restore = useSettingsRestore(job, running, forms);
  const queue = useEngineQueue(job?.id ?? null, running);
  useEngineEvents(engine, gen, queue);
  const download = model ? missingDownload(library?.archs ?? null, model) : null;
  const { resolved, notes } = useFormNotes(job?.id ?? null, running, forms);
  const submit = useSubmit({ engine, engines, gen, forms, inputs, notes, resolved, missingRepo: download ? model?.name_or_path.trim() || null : null });
  const { canGenerate, generate } = submit;
  const lists = useControlLists(job?.id ?? null, running);
  const runUpscale = useUpscale(job, forms, gen.generate);
  // a result's Upscale: the form's hires upscaler and scale where it is a pixel one, else Lanczos x2
  const upscale: UpscaleAction | undefined = running ? { upscalers: lists.upscalers, initial: upscaleDefaults(sample?.hires, lists.upscalers), run: runUpscale } : undefined;

  // the viewer's send-to: the gallery's "Use as input", with the task it asks for ('' automatic: img2img without a mask)
  const takesInput = !!arch && archTakes(arch, 'init_img');
  const sendTo = (item: GalleryItem, task: SendTask) => inputs.useAsInput(item, task === 'inpaint' && arch && taskInfo(arch, 'inpaint') ? 'inpaint' : '');

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
      <GenerateBar
        arch={arch}
        sample={sample}
        notes={notes}
        onChange={forms.patchSample}
        submit={submit}
        view={gen.view}
        onCancel={gen.cancel}
      />
      {/* after the prompt: several engines' list must not push it below the fold */}
      {(engines.engines?.length ?? 0) > 1 && <EnginesList engines={engines.engines!} target={engines.target} onTarget={engines.setTarget} />}
      <div className="generate-grid">
        <div className="forms">
          <SettingsDrop notice={restore.notice} onFile={(f) => void restore.restoreFrom(f)} onDismiss={restore.dismiss} />
          <FormPanels
            models={!!cache.models}
            cached={cache.cached}
            modelsError={engine.modelsError}
            forms={forms}
            inputs={inputs}
            job={job}
            running={running}
            notes={notes}
            resolved={resolved}
            download={download}
            library={library?.entries ?? null}
            lists={lists}
          />
        </div>
        <OutputColumn
          gen={gen}
          queue={queue}
          gallery={gallery}
          onReuse={restore.reuse}
          onUseAsInput={takesInput ? inputs.useAsInput : undefined}
          upscale={upscale}
          viewer={{ onSendTo: takesInput ? sendTo : undefined, canInpaint: !!arch && archTakes(arch, 'mask_img'), upscale }}
        />
      </div>
    </div>
  );
}

/**
 * What the engine's state tells this page's requests: the strip's health (active model, pool) is read
 * again when a request ends; each GET /queue answer goes to the requests; the engine stopped (here, from
 * another tab, or by the jobs page) while a request ran is said, rather than a plain "Cancelled" that
 * reads as if someone pressed Cancel.
 */
function useEngineEvents(engine: ReturnType<typeof useEngine>, gen: ReturnType<typeof useGeneration>, queue: ReturnType<typeof useEngineQueue>) {
  const phase = gen.view.phase;
  const { refreshHealth } = engine;
  useEffect(() => {
    if (phase !== 'running') refreshHealth().catch(() => undefined);
  }, [phase, refreshHealth]);
  const { onQueue, engineStopped } = gen;
  useEffect(() => {
    if (queue.snapshot) onQueue(queue.snapshot, queue.at);
  }, [queue.snapshot, queue.at, onQueue]);
  useEffect(() => {
    if (engine.state === 'stopping' || engine.state === 'stopped') engineStopped();
  }, [engine.state, engineStopped]);
}
