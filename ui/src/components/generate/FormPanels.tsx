'use client';
// The Generate page's form column: the model, LoRA, settings and input-image panels over the forms
// (useGenerateForms.ts), and the link to a grid from these settings. Built from the engine's /models, or
// with the engine down from the last one this browser saw (said so); with none yet, why not.
import Link from 'next/link';
import type { LibraryEntry } from '@/components/library/library';
import type { FieldNote } from './formChecks';
import ControlPanel from './ControlPanel';
import { archTakesControls, archTakesHires } from './controlHires';
import HiresPanel from './HiresPanel';
import InputsPanel, { archTakesInputs } from './InputsPanel';
import LoraPanel from './LoraPanel';
import ModelPanel from './ModelPanel';
import PromptPanel from './PromptPanel';
import type { GenerateForms } from './useGenerateForms';
import type { useInputImages } from './useInputImages';
import type { ControlLists } from './useControlLists';
import type { Resolved } from './useResolve';

interface Props {
  /** a /models answer is here (the engine's, or the cached one) */
  models: boolean;
  /** it is the cached one: the engine is not up */
  cached: boolean;
  modelsError: string | null;
  forms: GenerateForms;
  inputs: ReturnType<typeof useInputImages>;
  job: { id: string; name: string } | null;
  running: boolean;
  notes: FieldNote[];
  /** the engine's answer to the form (useResolve.ts) */
  resolved: Resolved;
  /** `hf download REPO` when the model form names a default repo that is not on this machine */
  download: string | null;
  library: LibraryEntry[] | null;
  /** the engine's preprocessors and upscalers (useControlLists.ts) */
  lists: ControlLists;
}

export default function FormPanels({ models, cached, modelsError, forms, inputs, job, running, notes, resolved, download, library, lists }: Props) {
  const { archs, profiles, arch, model, sample, setModel, setSample, setMaskPainted } = forms;
  if (!models) {
    return (
      <section className="card muted" data-testid="models-missing">
        {modelsError
          ? `Could not read the model list: ${modelsError}`
          : 'The model and its settings come from the engine: they show once it runs. Write a prompt and press “Start engine and generate”.'}
      </section>
    );
  }
  if (!model || !sample || !arch) return null;
  return (
    <>
      {cached && (
        <div className="muted small" data-testid="models-cached">
          The engine is not running: these choices come from the model list it gave last; they are checked again once it starts.
        </div>
      )}
      <ModelPanel
        archs={archs}
        profiles={profiles}
        arch={arch}
        model={model}
        onArch={forms.onArch}
        onProfile={forms.onProfile}
        onVariant={forms.onVariant}
        onChange={(p) => setModel({ ...model, ...p })}
        download={download}
        library={library}
        problem={resolved.problem}
        onPick={forms.onPick}
        libraryHref={job ? `/library?job=${encodeURIComponent(job.id)}` : '/library'}
      />
      <LoraPanel
        jobId={job?.id ?? null}
        running={running}
        arch={arch.name}
        picks={model.loras}
        prompt={sample.prompt}
        problem={resolved.problem}
        onPicks={(loras) => setModel({ ...model, loras })}
        onPrompt={(prompt) => setSample({ ...sample, prompt })}
      />
      <PromptPanel arch={arch} sample={sample} notes={notes} onChange={(p) => setSample({ ...sample, ...p })} />
      {archTakesInputs(arch) && (
        <InputsPanel
          arch={arch}
          sample={sample}
          job={job}
          painterRef={inputs.painter}
          uploadMask={inputs.uploadMask}
          onMaskPaint={inputs.onMaskPaint}
          onChange={(p) => {
            if (p.images && p.images.init_img !== sample.images.init_img) setMaskPainted(false);
            setSample({ ...sample, ...p });
          }}
          resolved={resolved}
        />
      )}
      {archTakesControls(arch) && (
        <ControlPanel
          arch={arch}
          controls={sample.controls ?? []}
          job={job}
          library={library}
          preprocessors={lists.preprocessors}
          onControls={(controls) => forms.patchSample({ controls })}
          problem={resolved.problem}
        />
      )}
      {archTakesHires(arch) && <HiresPanel arch={arch} hires={sample.hires} upscalers={lists.upscalers} onHires={(hires) => forms.patchSample({ hires })} problem={resolved.problem} />}
      <div className="row">
        <Link href={job ? `/grid?job=${encodeURIComponent(job.id)}` : '/grid'} className="button" data-testid="make-grid">
          Make a grid from these settings
        </Link>
      </div>
    </>
  );
}
