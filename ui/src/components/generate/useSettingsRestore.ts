'use client';
// Settings read back into the Generate page's forms: a generated file dropped on the page (the engine's
// POST /settings reads it, its answer becomes the forms: requestBody.formsFromFile; the notice says
// where the settings came from and what did not carry over), or a gallery item's Reuse. The task
// stays automatic where the engine infers the same one (resolveRequest.withAutomaticTask).
import { useState } from 'react';
import { readFileSettings } from './assets';
import { formsFromFile, formsFromSettings } from './requestBody';
import { withAutomaticTask } from './resolveRequest';
import { NO_RESTORE, type RestoreNotice } from './SettingsDrop';
import type { GalleryItem } from './types';
import type { GenerateForms } from './useGenerateForms';

export function useSettingsRestore(job: { id: string } | null, running: boolean, forms: Pick<GenerateForms, 'archs' | 'profiles' | 'model' | 'setForms'>) {
  const [notice, setNotice] = useState<RestoreNotice>(NO_RESTORE);

  /** A generated file: POST /settings, then the forms from its answer. */
  const restoreFrom = async (file: File) => {
    if (!job || !running) {
      setNotice({ ...NO_RESTORE, fileName: file.name, error: 'Start the engine first: it reads the settings out of the file.' });
      return;
    }
    setNotice({ ...NO_RESTORE, busy: true, fileName: file.name });
    try {
      const answer = await readFileSettings(job.id, file);
      const restored = formsFromFile(forms.archs, forms.profiles, forms.model, answer);
      if ('error' in restored) {
        setNotice({ ...NO_RESTORE, fileName: file.name, error: restored.error });
        return;
      }
      // its task left automatic where the engine infers the same from its inputs
      const arch = forms.archs.find((a) => a.name === restored.model.arch);
      forms.setForms({ model: restored.model, sample: arch ? await withAutomaticTask(job.id, arch, restored.model, restored.sample) : restored.sample });
      setNotice({ ...NO_RESTORE, fileName: file.name, source: answer.source ?? 'aitk', warnings: restored.warnings });
    } catch (err) {
      setNotice({ ...NO_RESTORE, fileName: file.name, error: (err as Error).message });
    }
  };

  /** A gallery item's settings into the forms (a batch item's own seed, batch 1). */
  const reuse = async (item: GalleryItem) => {
    const arch = forms.archs.find((x) => x.name === item.model.arch);
    if (!arch) return;
    const f = formsFromSettings(arch, forms.profiles, item.model, item.sample, item.result.seed);
    forms.setForms({ model: f.model, sample: job && running ? await withAutomaticTask(job.id, arch, f.model, f.sample) : f.sample });
    window.scrollTo({ top: 0, behavior: 'smooth' });
  };

  return { notice, restoreFrom, reuse, dismiss: () => setNotice(NO_RESTORE) };
}
