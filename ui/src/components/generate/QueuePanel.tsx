'use client';
// The engine's queue: the running call and each waiting request (place, model, size, steps,
// estimated start), with Cancel, and moves for the waiting ones (to the top, up, down).
import { useRef, useState } from 'react';
import { queueRows, type LiveStep, type QueueRow, type QueueSnapshot } from './queueView';

interface Props {
  snapshot: QueueSnapshot | null;
  error: string | null;
  /** this page's requests (marked "yours") */
  mine: string[];
  /** a request this page could not queue */
  notice: string | null;
  onCancel: (id: string) => Promise<string | null>;
  onMove: (id: string, position: number) => Promise<string | null>;
  /** the request the preview streams, at its stream's step */
  live?: LiveStep | null;
}

function label(r: QueueRow): string {
  const prompt = r.prompt.length > 40 ? `${r.prompt.slice(0, 40)}…` : r.prompt;
  return prompt ? `“${prompt}” (${r.model})` : `request ${r.id} (${r.model})`;
}

export default function QueuePanel({ snapshot, error, mine, notice, onCancel, onMove, live }: Props) {
  // one action at a time; the buttons stay enabled meanwhile, so keyboard focus stays on them
  const busy = useRef(false);
  const [problem, setProblem] = useState<string | null>(null);
  const rows = queueRows(snapshot, new Set(mine), live);
  const run = async (fn: () => Promise<string | null>) => {
    if (busy.current) return;
    busy.current = true;
    try {
      setProblem(await fn());
    } finally {
      busy.current = false;
    }
  };
  const handlers = (r: QueueRow) => ({
    top: () => onMove(r.id, 0),
    up: () => onMove(r.id, Math.max(0, (r.position as number) - 1)),
    down: () => onMove(r.id, (r.position as number) + 1),
    cancel: () => onCancel(r.id),
  });
  return (
    <section className="card queue" aria-label="Queue" data-testid="queue-panel">
      <h3>Queue</h3>
      {notice && (
        <div className="alert warn" role="alert" data-testid="queue-notice">
          {notice}
        </div>
      )}
      {(problem || error) && (
        <div className="alert error" role="alert" data-testid="queue-error">
          {problem ?? error}
        </div>
      )}
      {!snapshot ? (
        <p className="muted small">The queue shows while the engine runs.</p>
      ) : rows.length === 0 ? (
        <p className="muted small">Nothing is running or waiting. Generate again while one runs to queue more.</p>
      ) : (
        <ol className="queue-rows">
          {rows.map((r) => {
            const h = handlers(r);
            return (
              <Row key={r.id} r={r} onTop={() => run(h.top)} onUp={() => run(h.up)} onDown={() => run(h.down)} onCancel={() => run(h.cancel)} />
            );
          })}
        </ol>
      )}
    </section>
  );
}

interface RowProps {
  r: QueueRow;
  onTop: () => void;
  onUp: () => void;
  onDown: () => void;
  onCancel: () => void;
}

function Row(props: RowProps) {
  const { r } = props;
  const queued = r.state === 'queued';
  return (
    <li className={`queue-row ${r.state}`} data-testid="queue-row" data-request={r.id} data-state={r.state} data-position={r.position ?? ''}>
      <span className={`badge ${queued ? '' : 'badge-running'}`}>{queued ? `#${(r.position as number) + 1}` : 'running'}</span>
      <span className="queue-what">
        <b>{r.model}</b> · {r.size} · {r.steps} steps{r.mine && <span className="badge queue-mine">yours</span>}
        {r.pinned && <span className="muted small" title="Placed by hand: the queue policy keeps it here"> · placed</span>}
        <span className="muted small queue-prompt" title={r.prompt}>
          {r.prompt || <i>no prompt</i>}
        </span>
      </span>
      <span className="small queue-start" data-testid="queue-start" title={queued ? 'Estimated start, from the engine\'s step time, smoothed' : undefined}>
        {queued ? `starts ${r.start}` : r.start}
      </span>
      <span className="queue-actions">
        {queued && (
          <>
            <button aria-label={`Move ${label(r)} to the top`} title="To the top" data-testid="queue-top" disabled={r.position === 0} onClick={props.onTop}>
              ⤒
            </button>
            <button aria-label={`Move ${label(r)} up`} title="Up" data-testid="queue-up" disabled={r.position === 0} onClick={props.onUp}>
              ↑
            </button>
            <button aria-label={`Move ${label(r)} down`} title="Down" data-testid="queue-down" disabled={r.last} onClick={props.onDown}>
              ↓
            </button>
          </>
        )}
        <button aria-label={`Cancel ${label(r)}`} data-testid="queue-cancel" onClick={props.onCancel}>
          Cancel
        </button>
      </span>
    </li>
  );
}
