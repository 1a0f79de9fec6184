'use client';
// /grid: an X/Y comparison grid (A1111's X/Y/Z plot) over the Generate page's settings. Each cell is
// an ordinary request on the engine's queue; the page lays the results out with their labels and,
// once all have ended, saves one labelled PNG under the engine job's outputs folder.
import Link from 'next/link';
import { useEffect, useMemo, useRef, useState } from 'react';
import EngineStrip from '@/components/generate/EngineStrip';
import { normalizeModel } from '@/components/generate/loras';
import { normalizeSample } from '@/components/generate/requestBody';
import type { ModelForm, SampleForm } from '@/components/generate/types';
import { useEngine } from '@/components/generate/useEngine';
import { useStoredState } from '@/utils/useStoredState';
import { planGrid, type AxisSpec, type GridPlan } from './axes';
import AxisPicker from './AxisPicker';
import BaseSummary from './BaseSummary';
import GridTable from './GridTable';
import { saveGrid, type SavedGrid } from './saveGrid';
import { cellEnded, useGridRun, type CellState } from './useGridRun';

const newRunId = () => `grid-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;

type Saving = { state: 'idle' } | { state: 'saving' } | { state: 'saved'; grid: SavedGrid } | { state: 'error'; message: string };

/** All cells of the active run ended: the labelled PNG, saved once per run (none when no cell made an image);
 * `reset` when a new run starts. */
function useGridSave(active: { plan: GridPlan; job: { id: string; name: string } } | null, grid: { cells: CellState[]; running: boolean }) {
  const [saving, setSaving] = useState<Saving>({ state: 'idle' });
  const savedFor = useRef<GridPlan | null>(null);
  const allEnded = grid.cells.length > 0 && grid.cells.every(cellEnded);
  useEffect(() => {
    if (!active || !allEnded || grid.running || savedFor.current === active.plan) return;
    savedFor.current = active.plan;
    if (!grid.cells.some((c) => c.phase === 'done')) {
      setSaving({ state: 'error', message: 'No cell made an image, so there is no grid PNG.' });
      return;
    }
    setSaving({ state: 'saving' });
    saveGrid(active.job, active.plan.xLabels, active.plan.yLabels, grid.cells)
      .then((g) => setSaving({ state: 'saved', grid: g }))
      .catch((err) => setSaving({ state: 'error', message: `The grid PNG could not be made: ${(err as Error).message}` }));
  }, [active, allEnded, grid.running, grid.cells]);
  return { saving, reset: () => setSaving({ state: 'idle' }) };
}

export default function GridPage({ preferredJobId }: { preferredJobId: string | null }) {
  const engine = useEngine(preferredJobId);
  // read only: the Generate page owns these forms
  const [storedModel] = useStoredState<ModelForm | null>('aitk.generate.model', null);
  const [storedSample] = useStoredState<SampleForm | null>('aitk.generate.sample', null);
  const [x, setX] = useStoredState<AxisSpec>('aitk.grid.x', { kind: 'seed', values: '1, 2, 3' });
  const [y, setY] = useStoredState<AxisSpec>('aitk.grid.y', { kind: 'steps', values: '10, 20' });
  const grid = useGridRun();
  const [active, setActive] = useState<{ plan: GridPlan; job: { id: string; name: string } } | null>(null);

  const model = useMemo(() => (storedModel ? normalizeModel(storedModel) : null), [storedModel]);
  const sample = useMemo(() => (storedSample ? normalizeSample(storedSample) : null), [storedSample]);
  const arch = engine.models?.archs.find((a) => a.name === model?.arch) ?? null;
  const profiles = engine.models?.profiles ?? [];
  const plan = useMemo(
    () => (arch && model && sample ? planGrid({ arch, profiles, model, sample }, x, y, newRunId()) : null),
    [arch, profiles, model, sample, x, y], // eslint-disable-line react-hooks/exhaustive-deps
  );

  const { saving, reset: resetSave } = useGridSave(active, grid);

  const job = engine.job;
  const ready = (engine.state === 'ready' || engine.state === 'warming') && !!job;
  const canRun = ready && !!plan && !('error' in plan) && !grid.running;

  const run = () => {
    if (!canRun || !plan || 'error' in plan || !job) return;
    const fresh = planGrid({ arch: arch!, profiles, model: model!, sample: sample! }, x, y, newRunId());
    if ('error' in fresh) return;
    setActive({ plan: fresh, job: { id: job.id, name: job.name } });
    resetSave();
    void grid.run(job, fresh);
  };

  const done = grid.cells.filter((c) => c.phase === 'done').length;
  const noForms = !model || !sample;

  return (
    <div className="grid-page">
      <h1>Grid</h1>
      <EngineStrip engine={engine} />
      {noForms ? (
        <div className="alert warn" data-testid="grid-no-base">
          No settings yet: set a model and a prompt on the <Link href="/generate">Generate</Link> page; the grid starts from them.
        </div>
      ) : (
        <BaseSummary model={model} sample={sample} jobId={job?.id ?? null} />
      )}
      {model && !engine.models && <div className="muted small">Start the engine to check the axes against the model.</div>}
      {model && engine.models && !arch && <div className="alert warn">The engine does not serve arch {model.arch}: pick another model on the Generate page.</div>}
      <div className="axis-row">
        <AxisPicker name="X" spec={x} loras={model?.loras ?? []} samplers={arch?.samplers ?? []} onChange={setX} />
        <AxisPicker name="Y" spec={y} loras={model?.loras ?? []} samplers={arch?.samplers ?? []} onChange={setY} />
      </div>
      {plan && 'error' in plan && (
        <div className="alert error" role="alert" data-testid="grid-plan-error">
          {plan.error}
        </div>
      )}
      <div className="row">
        <button className="primary" onClick={run} disabled={!canRun} data-testid="grid-run">
          Run grid{plan && !('error' in plan) ? ` (${plan.cells.length} images)` : ''}
        </button>
        <button onClick={() => void grid.cancel(grid.cells)} disabled={!grid.running} data-testid="grid-cancel">
          Cancel grid
        </button>
        {!ready && <span className="muted small">Start the engine above to run a grid.</span>}
        {active && (
          <span className="muted small" data-testid="grid-progress">
            {done}/{grid.cells.length} done
          </span>
        )}
      </div>
      <SaveNotice saving={saving} />
      {active && <GridTable jobName={active.job.name} xLabels={active.plan.xLabels} yLabels={active.plan.yLabels} cells={grid.cells} />}
    </div>
  );
}

/** Saving the grid PNG: under way, failed, or saved with its download link. */
function SaveNotice({ saving }: { saving: Saving }) {
  return (
    <>
      {saving.state === 'saving' && <div className="muted">Making the grid PNG…</div>}
      {saving.state === 'error' && (
        <div className="alert error" role="alert" data-testid="grid-save-error">
          {saving.message}
        </div>
      )}
      {saving.state === 'saved' && (
        <div className="alert ok" data-testid="grid-saved" data-relpath={saving.grid.relpath}>
          Grid PNG saved ({saving.grid.width}×{saving.grid.height}, outputs/{saving.grid.relpath}).{' '}
          <a href={saving.grid.url} download data-testid="grid-download">
            Download the grid PNG
          </a>
        </div>
      )}
    </>
  );
}
