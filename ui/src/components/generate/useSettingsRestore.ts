'use client';
// A generated file dropped on the Generate page: the engine's POST /settings reads it, and its answer
// becomes the forms (requestBody.formsFromFile); the notice says where the settings came from and
// what did not carry over.
import { useState } from 'react';
import { readFileSettings } from './assets';
import { formsFromFile } from './requestBody';
import { NO_RESTORE, type RestoreNotice } from './SettingsDrop';
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
      forms.setForms(restored);
      setNotice({ ...NO_RESTORE, fileName: file.name, source: answer.source ?? 'aitk', warnings: restored.warnings });
    } catch (err) {
      setNotice({ ...NO_RESTORE, fileName: file.name, error: (err as Error).message });
    }
  };

  return { notice, restoreFrom, dismiss: () => setNotice(NO_RESTORE) };
}
