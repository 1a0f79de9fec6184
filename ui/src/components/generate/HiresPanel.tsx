'use client';
// The Hires section (A1111's "Hires. fix"), where the arch's /models row lists the `hires` field (an
// img2img task): on/off, scale, upscaler (GET /upscalers: latent modes, Lanczos, the upscale models
// found), steps (0: the base pass's) and denoise. Sent as `sample.hires` when on (controlHires.ts).
import { hiresDefaults, type UpscalerInfo } from './controlHires';
import { UpscalerOptions } from './UpscalerOptions';
import { problemPlace, problemText } from './resolveRequest';
import type { ArchInfo, HiresForm } from './types';
import type { Resolved } from './useResolve';

interface Props {
  arch: ArchInfo;
  hires: HiresForm | null | undefined;
  upscalers: UpscalerInfo[];
  onHires: (next: HiresForm) => void;
  problem: Resolved['problem'];
}

export default function HiresPanel({ arch, hires, upscalers, onHires, problem }: Props) {
  const h = hires ?? hiresDefaults(arch);
  const f = arch.fields.hires?.fields ?? {};
  const set = (patch: Partial<HiresForm>) => onHires({ ...h, ...patch });
  const mine = problem && (() => {
    const place = problemPlace(problem);
    return 'sample' in place && place.sample === 'hires' ? problemText(problem) : null;
  })();
  const names = upscalers.length ? upscalers : [{ name: h.upscaler, kind: 'latent' }];
  return (
    <section className="card" aria-label="Hires fix" data-testid="hires-panel">
      <label className="row">
        <input type="checkbox" checked={h.enabled} onChange={(e) => set({ enabled: e.target.checked })} data-testid="hires-enabled" />
        <h3 style={{ margin: 0 }}>Hires fix</h3>
        <span className="muted small">a second img2img pass at a larger size</span>
      </label>
      {h.enabled && (
        <div className="row wrap">
          <label className="field">
            Scale
            <input type="number" min={f.scale?.min ?? 1} max={f.scale?.max ?? 8} step={0.05} value={h.scale} onChange={(e) => set({ scale: Number(e.target.value) })} aria-label="Hires scale" data-testid="hires-scale" />
          </label>
          <label className="field">
            Upscaler
            <select value={h.upscaler} onChange={(e) => set({ upscaler: e.target.value })} aria-label="Hires upscaler" data-testid="hires-upscaler">
              {!names.some((u) => u.name === h.upscaler) && <option value={h.upscaler}>{h.upscaler}</option>}
              <UpscalerOptions names={names} />
            </select>
          </label>
          <label className="field">
            Steps (0: as the base pass)
            <input type="number" min={0} step={1} value={h.steps} onChange={(e) => set({ steps: Number(e.target.value) })} aria-label="Hires steps" data-testid="hires-steps" />
          </label>
          <label className="field">
            Denoise
            <input type="number" min={0} max={1} step={0.05} value={h.denoise} onChange={(e) => set({ denoise: Number(e.target.value) })} aria-label="Hires denoise" data-testid="hires-denoise" />
          </label>
        </div>
      )}
      {mine && (
        <div className="alert error small" role="alert" data-testid="hires-problem">
          {mine}
        </div>
      )}
    </section>
  );
}
