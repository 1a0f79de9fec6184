'use client';
// The grid on the page: X labels on top, Y labels on the left, each cell its state, progress,
// image or the engine's message.
import { fileUrl } from '@/components/generate/useGallery';
import { useMediaUrl } from '@/components/generate/useMediaUrl';
import type { CellState } from './useGridRun';

function CellImage({ jobName, cell, alt }: { jobName: string; cell: CellState; alt: string }) {
  const { src, error } = useMediaUrl(cell.result ? fileUrl({ jobName, result: cell.result }) : '');
  if (error) return <span className="small">{error}</span>;
  // the image opens full size in a new tab (a link: the keyboard reaches it)
  return src ? (
    <a href={src} target="_blank" rel="noreferrer" aria-label={`${alt}: open full size`}>
      <img src={src} alt={alt} className="grid-image" data-testid="grid-cell-image" />
    </a>
  ) : null;
}

function cellText(c: CellState): string {
  if (c.phase === 'running') return c.total ? `step ${c.step}/${c.total}` : c.stage || 'starting';
  if (c.phase === 'waiting') return 'not sent yet';
  return c.phase;
}

export default function GridTable({ jobName, xLabels, yLabels, cells }: { jobName: string; xLabels: string[]; yLabels: string[]; cells: CellState[] }) {
  const cols = Math.max(1, xLabels.length);
  return (
    <div className="grid-table-wrap">
      <table className="grid-table" data-testid="grid-table">
        <thead>
          <tr>
            <td />
            {xLabels.map((l, i) => (
              <th key={i} scope="col">
                {l}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {yLabels.map((yl, y) => (
            <tr key={y}>
              <th scope="row">{yl}</th>
              {xLabels.map((xl, x) => {
                const c = cells[y * cols + x];
                if (!c) return <td key={x} />;
                const label = [xl, yl].filter(Boolean).join(', ') || 'the image';
                return (
                  <td key={x} className="grid-cell" data-testid="grid-cell" data-phase={c.phase} data-request-id={c.requestId} aria-label={label}>
                    {c.phase === 'done' && c.result ? (
                      <CellImage jobName={jobName} cell={c} alt={label} />
                    ) : (
                      <span className={c.phase === 'error' ? 'small warn-text' : 'small muted'} data-testid="grid-cell-state">
                        {cellText(c)}
                        {c.message && c.phase !== 'done' ? `: ${c.message}` : ''}
                      </span>
                    )}
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
