'use client';
// /library: the models usable on the engine's machine (GET /library through the proxy): the loaded one,
// the tiny ones, the hub cache, the model folders, the profiles, grouped by source, with arch, format,
// size and completeness (a checkpoint's parts, the companion files a model file will use, what is
// missing); "Use" opens /generate with that model; "used" says how often the history holds results of
// it and who asked (the Generate page, the CLI, the A1111 / OpenAI / ComfyUI / sd.cpp routes). The filter applies to every list. Downloads (a repo
// id or a URL, and each default repo not here) with their progress: DownloadsPanel.
import Link from 'next/link';
import { useCallback, useEffect, useMemo, useState } from 'react';
import { apiFetch, apiJson, describeError } from '@/utils/api';
import type { Job } from '@/components/jobs/types';
import DownloadsPanel from './DownloadsPanel';
import type { DownloadRow } from './downloads';
import { emptyMessage, filterArchs, filterEntries, formatBytes, generateHref, groupBySource, missingDefaults, type ArchPresence, type LibraryEntry, type LibraryResponse, type LibrarySource } from './library';
import { useDownloads } from './useDownloads';
import { modelKey } from '@/utils/modelIdentity';
import { sourceLabel } from '@/utils/historySource';

/** What the history holds of one model (GET /api/history/models). */
interface ModelUse {
  count: number;
  sources: string[];
}

/** The history's models by key (utils/modelIdentity.ts), read again with the listing. */
function useModelUse(refresh: unknown): Map<string, ModelUse> {
  const [use, setUse] = useState<Map<string, ModelUse>>(new Map());
  useEffect(() => {
    apiJson<{ models: ({ model: string } & ModelUse)[] }>('/api/history/models')
      .then((r) => setUse(new Map(r.models.map((m) => [m.model, { count: m.count, sources: m.sources ?? [] }]))))
      .catch(() => undefined); // the library shows no "used" line
  }, [refresh]);
  return use;
}

/** The running engine the page lists (the one asked for, else the first), and its GET /library. */
function useLibraryListing(preferredJobId: string | null) {
  const [jobs, setJobs] = useState<Job[] | null>(null);
  const [lib, setLib] = useState<LibraryResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);

  useEffect(() => {
    apiJson<{ jobs: Job[] }>('/api/jobs?job_type=inference')
      .then((r) => setJobs(r.jobs))
      .catch((err) => setError((err as Error).message));
  }, []);

  const running = (jobs ?? []).filter((j) => j.status === 'running');
  const job = running.find((j) => j.id === preferredJobId) ?? running[0] ?? null;
  const jobId = job?.id ?? null;

  const load = useCallback(async () => {
    if (!jobId) return;
    setLoading(true);
    try {
      const res = await apiFetch(`/api/inference/library?job=${encodeURIComponent(jobId)}`);
      if (res.ok) {
        setLib((await res.json()) as LibraryResponse);
        setError(null);
      } else setError((await describeError(res)).message);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setLoading(false);
    }
  }, [jobId]);
  useEffect(() => {
    load();
  }, [load]);

  return { jobs, job, lib, error, loading, load };
}

export default function LibraryPage({ preferredJobId }: { preferredJobId: string | null }) {
  const { jobs, job, lib, error, loading, load } = useLibraryListing(preferredJobId);
  const jobId = job?.id ?? null;
  const downloads = useDownloads(jobId, load);
  const [query, setQuery] = useState('');
  const groups = useMemo(() => groupBySource(filterEntries(lib?.entries ?? [], query)), [lib, query]);
  const missing = useMemo(() => filterArchs(missingDefaults(lib?.archs ?? []), query), [lib, query]);
  const use = useModelUse(lib);

  return (
    <>
      <h1>Library</h1>
      {jobs && !job && (
        <div className="alert" data-testid="library-no-engine">
          No engine is running: start one on the <Link href="/generate">Generate</Link> page to list its models.
        </div>
      )}
      {error && <div className="alert" data-testid="library-error">{error}</div>}
      {job && (
        <div className="row">
          <input
            className="grow"
            placeholder="Filter: name, arch, format…"
            value={query}
            onChange={(e) => setQuery(e.target.value)}
            data-testid="library-filter"
            aria-label="Filter models"
          />
          <span className="muted small">engine {job.name}</span>
          <button onClick={load} disabled={loading} data-testid="library-refresh">
            Refresh
          </button>
        </div>
      )}
      {job && <DownloadsPanel state={downloads.state} error={downloads.error} actions={downloads} />}
      {lib && groups.length === 0 && missing.length === 0 && (
        <div className="muted" data-testid="library-empty">
          {emptyMessage(query)}
        </div>
      )}
      {groups.map((g) => (
        <LibraryGroup key={g.source} group={g} jobId={jobId} use={use} />
      ))}
      {missing.length > 0 && <MissingDefaults missing={missing} rows={downloads.state?.downloads ?? []} start={downloads.start} />}
    </>
  );
}

/** One source's entries (the hub cache, the model folders, the profiles) as a table. */
function LibraryGroup({ group, jobId, use }: { group: { source: LibrarySource; label: string; entries: LibraryEntry[] }; jobId: string | null; use: Map<string, ModelUse> }) {
  return (
    <section className="card" aria-label={group.label} data-testid={`library-group-${group.source}`}>
      <h2>{group.label}</h2>
      <table className="jobs">
        <thead>
          <tr>
            <th>name</th>
            <th>kind</th>
            <th>arch</th>
            <th>format</th>
            <th>size</th>
            <th>complete</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {group.entries.map((e) => (
            <EntryRow key={`${e.source}:${e.path ?? e.name}`} e={e} jobId={jobId} used={e.model ? use.get(modelKey(e.model)) : undefined} />
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** One model: its name (and the companions it takes), kind (and parts), arch, format, size, completeness, and Use. */
function EntryRow({ e, jobId, used }: { e: LibraryEntry; jobId: string | null; used?: ModelUse }) {
  return (
    <tr data-testid="library-entry" data-name={e.name} data-arch={e.arch ?? ''}>
      <td data-label="name" title={e.path ?? e.repo ?? ''}>
        {e.name}
        {e.companions && Object.keys(e.companions).length > 0 && (
          <div className="muted small" data-testid="library-entry-companions">
            with{' '}
            {Object.entries(e.companions)
              .map(([role, c]) => `${role}: ${c.name}`)
              .join(' · ')}
          </div>
        )}
        {used && (
          <div className="muted small" data-testid="library-entry-used">
            used {used.count}×{used.sources.length ? ` via ${used.sources.map(sourceLabel).join(', ')}` : ''}
          </div>
        )}
      </td>
      <td data-label="kind">
        {e.kind === 'component' ? `component (${e.label ?? e.role ?? '?'})` : e.kind}
        {e.parts && e.kind === 'checkpoint' && <div className="muted small">{Object.keys(e.parts).join(', ')}</div>}
      </td>
      <td data-label="arch">{e.arch ? `${e.arch}${e.variant ? ` ${e.variant}` : ''}` : <span className="muted">unknown</span>}</td>
      <td data-label="format">{e.format ?? <span className="muted">—</span>}</td>
      <td data-label="size">{e.source === 'tiny' && !e.built ? <span className="muted">built on first use</span> : e.source === 'loaded' ? <span className="muted">in memory</span> : formatBytes(e.bytes)}</td>
      <td data-label="complete" title={e.missing.join('\n')}>{e.complete ? 'yes' : <span className="warn-text">no: {e.missing[0] ?? ''}</span>}</td>
      <td>
        {e.model && e.complete ? (
          <Link href={generateHref(jobId, e.model)} data-testid="library-use">
            Use
          </Link>
        ) : e.model === null && e.missing.length ? (
          <span className="muted small">{e.missing[0]}</span>
        ) : null}
      </td>
    </tr>
  );
}

/** The archs whose default repo is not on this machine, each with its `hf download` command and a
 * Download button (into the hub cache, as that command does). */
function MissingDefaults({ missing, rows, start }: { missing: ArchPresence[]; rows: DownloadRow[]; start: (body: Record<string, string>) => Promise<boolean> }) {
  return (
    <section className="card" aria-label="Default models not here" data-testid="library-missing-defaults">
      <h2>Default models not on this machine</h2>
      {missing.map((a) => (
        <div key={`${a.arch}:${a.repo}`} className="row small" data-testid="library-download" data-arch={a.arch} data-variant={a.variant ?? ''}>
          <span>
            {a.arch}
            {a.variant ? ` ${a.variant}` : ''}:
          </span>
          <code>{a.download}</code>
          <button
            onClick={() => start({ repo_id: a.repo })}
            disabled={rows.some((d) => d.source === a.repo && d.status === 'running')}
            data-testid="library-download-start"
          >
            Download
          </button>
        </div>
      ))}
    </section>
  );
}
