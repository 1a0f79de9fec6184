'use client';
// The history's search box (words of the prompt), model filter and source filter (who asked:
// this page, the CLI, the A1111 / OpenAI / ComfyUI / sd.cpp routes).
import { useEffect, useState } from 'react';
import { sourceLabel } from '@/utils/historySource';
import type { GallerySearch } from './useGallery';

export default function GalleryFilters({ search }: { search: GallerySearch }) {
  const { filter, setFilter, models, sources } = search;
  // typed text goes out on each change; the hook drops answers to older queries
  const [q, setQ] = useState(filter.q);
  useEffect(() => setQ(filter.q), [filter.q]);
  const known = models.some((m) => m.model === filter.model);
  const knownSource = sources.some((s) => s.source === filter.source);
  return (
    <div className="row wrap gallery-filters" role="search" aria-label="Search the results">
      <label>
        Search prompts{' '}
        <input
          type="search"
          aria-label="Search prompts"
          value={q}
          placeholder="words of the prompt"
          data-testid="gallery-search"
          onChange={(e) => {
            setQ(e.target.value);
            setFilter({ ...filter, q: e.target.value.trim() });
          }}
        />
      </label>
      <label>
        Model{' '}
        <select value={filter.model} aria-label="Filter by model" data-testid="gallery-model" onChange={(e) => setFilter({ ...filter, model: e.target.value })}>
          <option value="">All models</option>
          {!known && filter.model && <option value={filter.model}>{filter.model}</option>}
          {models.map((m) => (
            <option key={m.model} value={m.model}>
              {m.model} ({m.count})
            </option>
          ))}
        </select>
      </label>
      <label>
        Source{' '}
        <select value={filter.source} aria-label="Filter by source" data-testid="gallery-source" onChange={(e) => setFilter({ ...filter, source: e.target.value })}>
          <option value="">All sources</option>
          {!knownSource && filter.source && <option value={filter.source}>{sourceLabel(filter.source)}</option>}
          {sources.map((s) => (
            <option key={s.source} value={s.source}>
              {sourceLabel(s.source)} ({s.count})
            </option>
          ))}
        </select>
      </label>
    </div>
  );
}
