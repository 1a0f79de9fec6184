'use client';
// The history's search box (words of the prompt) and model filter.
import { useEffect, useState } from 'react';
import type { GallerySearch } from './useGallery';

export default function GalleryFilters({ search }: { search: GallerySearch }) {
  const { filter, setFilter, models } = search;
  // typed text goes out on each change; the hook drops answers to older queries
  const [q, setQ] = useState(filter.q);
  useEffect(() => setQ(filter.q), [filter.q]);
  const known = models.some((m) => m.model === filter.model);
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
    </div>
  );
}
