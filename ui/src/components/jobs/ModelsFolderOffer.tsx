'use client';
// First run: point the engine at the models a person already has: a ComfyUI install (comfyui_path),
// or an A1111/Forge install or any models folder (model_folders). What the engine finds there is
// listed on the /library page once it runs.
import { useState } from 'react';
import { folderPatch, type Block, type FolderKind } from './engineSettingsForm';

interface Props {
  /** the folder as engine keys; answers a refusal to show, or null */
  onUse: (patch: Block) => Promise<string | null>;
  /** the engine block the patch adds to (model_folders already set are kept) */
  block?: Block;
  action: string;
  busy?: boolean;
}

export default function ModelsFolderOffer({ onUse, block = {}, action, busy = false }: Props) {
  const [kind, setKind] = useState<FolderKind>('folders');
  const [folder, setFolder] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const use = async () => {
    setProblem(null);
    setProblem(await onUse(folderPatch(kind, folder, block)));
  };
  return (
    <div className="models-folder-offer" data-testid="models-folder-offer">
      <div>
        <strong>Have models already?</strong>{' '}
        <span className="muted small">Point the engine at your ComfyUI or A1111/Forge models: it lists and loads them from there.</span>
      </div>
      <div className="row wrap">
        <select value={kind} onChange={(e) => setKind(e.target.value as FolderKind)} aria-label="What the folder is" data-testid="models-folder-kind">
          <option value="folders">A1111 / Forge install, or a models folder</option>
          <option value="comfyui">ComfyUI install (the folder holding models/)</option>
        </select>
        <input
          className="grow"
          value={folder}
          onChange={(e) => setFolder(e.target.value)}
          placeholder={kind === 'comfyui' ? '/home/me/ComfyUI' : '/home/me/stable-diffusion-webui/models'}
          aria-label="Models folder"
          data-testid="models-folder-path"
        />
        <button type="button" className="primary" onClick={use} disabled={busy || !folder.trim()} data-testid="models-folder-use">
          {action}
        </button>
      </div>
      {problem && (
        <div className="alert error small" role="alert" data-testid="models-folder-problem">
          {problem}
        </div>
      )}
    </div>
  );
}
