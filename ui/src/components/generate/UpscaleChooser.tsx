'use client';
// The small dialog of a result's Upscale action (the gallery's and the viewer's): the upscaler (GET
// /upscalers' pixel ones: Lanczos, Nearest, the upscale models found) and the scale, then one
// `task: upscale` request (useUpscale.ts), whose result lands in the gallery like any other.
import { useState } from 'react';
import { pixelUpscalers, type UpscaleChoice, type UpscalerInfo } from './controlHires';
import { UpscalerOptions } from './UpscalerOptions';

interface Props {
  upscalers: UpscalerInfo[];
  initial: UpscaleChoice;
  onUpscale: (choice: UpscaleChoice) => Promise<string | null>;
  /** after the request is sent (and on Cancel, unless `onCancel`) */
  onClose: () => void;
  onCancel?: () => void;
  testId?: string;
}

export default function UpscaleChooser({ upscalers, initial, onUpscale, onClose, onCancel, testId = 'upscale-chooser' }: Props) {
  const [choice, setChoice] = useState<UpscaleChoice>(initial);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const pixel = pixelUpscalers(upscalers);
  const names = pixel.length ? pixel : [{ name: initial.upscaler, kind: 'pixel' }];
  const go = async () => {
    setBusy(true);
    const why = await onUpscale(choice);
    setBusy(false);
    if (why) setError(why);
    else onClose();
  };
  return (
    <div className="upscale-chooser row wrap" role="group" aria-label="Upscale" data-testid={testId}>
      <label className="field">
        Upscaler
        <select value={choice.upscaler} onChange={(e) => setChoice({ ...choice, upscaler: e.target.value })} aria-label="Upscaler" data-testid={`${testId}-upscaler`}>
          <UpscalerOptions names={names} />
        </select>
      </label>
      <label className="field">
        Scale
        <input type="number" min={1} max={8} step={0.5} value={choice.scale} onChange={(e) => setChoice({ ...choice, scale: Number(e.target.value) })} aria-label="Upscale by" data-testid={`${testId}-scale`} />
      </label>
      <button type="button" onClick={() => void go()} disabled={busy || !(choice.scale > 0)} data-testid={`${testId}-go`}>
        {busy ? 'Sending…' : 'Upscale'}
      </button>
      <button type="button" onClick={onCancel ?? onClose}>
        Cancel
      </button>
      {error && (
        <div className="alert error small" role="alert">
          {error}
        </div>
      )}
    </div>
  );
}
